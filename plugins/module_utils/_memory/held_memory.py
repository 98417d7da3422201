# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Memory our own processes hold, which counts as free for the fit check: it is
released before the new vLLM starts. Two kinds of holders:

* our vLLM, found by its command line (``held_by``: ``vllm serve --config FILE``), with
  its descendants;
* under the Ray executor, the Ray workers of our Ray node (``held_by_ray_node``): vLLM's
  workers are Ray actors (``ray::RayWorkerProc.run``, ``ray::RayWorkerWrapper...``),
  children of the raylet, on every rank; a rank other than 0 runs no ``vllm serve`` at
  all. The node is found by what supervises it, never by its command line: the main
  process of its systemd unit (``systemctl show``), or the first process of its container
  (``container inspect``'s ``State.Pid``, the ``ray start --block`` of the entrypoint).
  So another Ray cluster on the host, even one started with the same command line, is
  not ours. Only its workers that run a task or an actor (process title ``ray::NAME``,
  not ``ray::IDLE``) count, with their descendants: they end with their driver when
  vLLM restarts, while Ray's own daemons (raylet, GCS, dashboard, agents) keep running
  and keep their memory.

What a holder holds on a GPU: on unified memory (GB10) the proportional set size of its
processes (``Pss`` of ``/proc/PID/smaps_rollup``, their CPU-side memory) plus what
``nvidia-smi --query-compute-apps`` reports for their PIDs: CUDA allocations (vLLM's
weights and KV cache) come from the same pool there but appear in no process's RSS or
PSS. On a GPU with memory of its own, only what ``--query-compute-apps`` reports.
"""

from __future__ import annotations

import os

from ansible_collections.llmfleet.cluster.plugins.module_utils._memory.meminfo import (
    parse_meminfo,
)

# The title Ray gives a worker that waits for work: it holds nothing of vLLM's.
RAY_WORKER_PREFIX = "ray::"
RAY_IDLE_WORKER = "ray::IDLE"
CONTAINER_ENGINES = ("docker", "podman")


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def read_processes(proc="/proc"):
    """``{pid: (ppid, command line with spaces for NULs, stripped)}`` of every process."""
    processes = {}
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        stat = _read(os.path.join(proc, name, "stat"))
        command = _read(os.path.join(proc, name, "cmdline"))
        if stat is None or command is None:
            continue
        # "PID (comm) STATE PPID ...": comm may hold spaces and parentheses.
        fields = stat.rpartition(")")[2].split()
        if len(fields) > 1:
            processes[int(name)] = (int(fields[1]), command.replace("\0", " ").strip())
    return processes


def with_descendants(roots, processes):
    """``roots`` and every process below them, sorted."""
    pids = set(roots)
    grew = True
    while grew:
        children = {pid for pid, entry in processes.items() if entry[0] in pids} - pids
        grew = bool(children)
        pids |= children
    return sorted(pids)


def held_pids(cmdline, proc="/proc", processes=None):
    """PIDs whose command line contains ``cmdline``, with all their descendants."""
    if processes is None:
        processes = read_processes(proc)
    roots = [pid for pid, entry in processes.items() if cmdline in entry[1]]
    return with_descendants(roots, processes)


def is_busy_ray_worker(command):
    """A Ray worker that runs a task or an actor (its title is ``ray::NAME``)."""
    return command.startswith(RAY_WORKER_PREFIX) and not command.startswith(RAY_IDLE_WORKER)


def ray_worker_pids(root, processes):
    """The busy Ray workers below ``root`` (our node's first process), with descendants."""
    below = with_descendants([root], processes) if root in processes else []
    workers = [pid for pid in below if is_busy_ray_worker(processes[pid][1])]
    return with_descendants(workers, processes)


def _pid(out):
    text = (out or "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


def ray_node_root(ray_node, run, which):
    """``(pid, why)``: the first process of our Ray node, or None and why there is none.

    ``ray_node`` has ``unit`` (systemd) or ``container`` (with ``engine``); ``which(name)``
    is the executable's path or None.
    """
    if ray_node.get("unit"):
        systemctl = which("systemctl")
        if not systemctl:
            return None, "no systemctl to ask for unit {0}".format(ray_node["unit"])
        rc, out, _err = run([systemctl, "show", "--property=MainPID", "--value", ray_node["unit"]])
        pid = _pid(out) if rc == 0 else None
        return pid, None if pid else "unit {0} is not running".format(ray_node["unit"])
    engine = ray_node.get("engine") or "docker"
    path = which(engine)
    if not path:
        return None, "no {0} to ask for container {1}".format(engine, ray_node["container"])
    rc, out, _err = run(
        [path, "container", "inspect", "--format", "{{.State.Pid}}", ray_node["container"]]
    )
    pid = _pid(out) if rc == 0 else None
    return pid, None if pid else "container {0} is not running".format(ray_node["container"])


def ray_node_name(ray_node):
    if ray_node.get("unit"):
        return "unit {0}".format(ray_node["unit"])
    return "container {0}".format(ray_node["container"])


def find_holders(held_by=None, ray_node=None, run=None, which=None, proc="/proc"):
    """Our processes that hold memory, by holder: ``[{name, pids, why}]``.

    ``why`` says why a holder that was looked for has no process (None when it has).
    A process is counted once, for the first holder that has it.
    """
    if not held_by and not ray_node:
        return []
    processes = read_processes(proc)
    holders = []
    if held_by:
        pids = held_pids(held_by, processes=processes)
        holders.append(
            {
                "name": held_by,
                "pids": pids,
                "why": None if pids else "no process runs {0}".format(held_by),
            }
        )
    if ray_node:
        name = "Ray workers of {0}".format(ray_node_name(ray_node))
        root, why = ray_node_root(ray_node, run, which)
        pids = []
        if root is not None:
            pids = ray_worker_pids(root, processes)
            if root not in processes:
                why = "{0}: its process {1} is gone".format(ray_node_name(ray_node), root)
            elif not pids:
                why = "{0} runs no Ray worker with a task or actor".format(ray_node_name(ray_node))
        counted = {pid for holder in holders for pid in holder["pids"]}
        holders.append(
            {"name": name, "pids": [pid for pid in pids if pid not in counted], "why": why}
        )
    return holders


def all_pids(holders):
    return sorted({pid for holder in holders for pid in holder["pids"]})


def pss_bytes(pids, proc="/proc"):
    """The proportional set size of ``pids`` together (processes that ended count 0)."""
    total = 0
    for pid in pids:
        rollup = _read(os.path.join(proc, str(pid), "smaps_rollup")) or ""
        total += parse_meminfo(rollup).get("Pss", 0)
    return total


def _gpu_bytes(gpu, pids, compute_apps):
    wanted = set(pids)
    return sum(
        used for (uuid, pid), used in compute_apps.items() if uuid == gpu["uuid"] and pid in wanted
    )


def add_held(gpus, holders, compute_apps, proc="/proc"):
    """Set ``held`` (bytes) and ``held_by`` (``[(holder name, bytes)]``) on every GPU."""
    pss = {}
    for gpu in gpus:
        gpu["held_by"] = []
        for index, holder in enumerate(holders):
            if not holder["pids"]:
                continue
            held = _gpu_bytes(gpu, holder["pids"], compute_apps)
            if gpu["unified_memory"]:
                if index not in pss:
                    pss[index] = pss_bytes(holder["pids"], proc)
                held += pss[index]
            gpu["held_by"].append((holder["name"], held))
        gpu["held"] = sum(entry[1] for entry in gpu["held_by"])
