# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Memory our own processes hold (``held_by``: a running vLLM that is about to be
restarted), which counts as free for the fit check: it is released before the new
process starts. On unified memory that is the processes' proportional set size
(``Pss`` of ``/proc/PID/smaps_rollup``, shared pages split between their users); on a
GPU with memory of its own, what ``nvidia-smi --query-compute-apps`` reports for
their PIDs.
"""

from __future__ import annotations

import os

from ansible_collections.llmfleet.cluster.plugins.module_utils._meminfo import (
    parse_meminfo,
)


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def held_pids(cmdline, proc="/proc"):
    """PIDs whose command line contains ``cmdline``, with all their descendants."""
    parents = {}
    roots = set()
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
            parents[int(name)] = int(fields[1])
        if cmdline in command.replace("\0", " "):
            roots.add(int(name))
    pids = set(roots)
    grew = True
    while grew:
        children = {pid for pid, parent in parents.items() if parent in pids} - pids
        grew = bool(children)
        pids |= children
    return sorted(pids)


def pss_bytes(pids, proc="/proc"):
    """The proportional set size of ``pids`` together (processes that ended count 0)."""
    total = 0
    for pid in pids:
        rollup = _read(os.path.join(proc, str(pid), "smaps_rollup")) or ""
        total += parse_meminfo(rollup).get("Pss", 0)
    return total


def add_held(gpus, pids, compute_apps, proc="/proc"):
    """Set ``held`` (bytes) on every GPU: what ``pids`` use there."""
    wanted = set(pids)
    shared = None
    for gpu in gpus:
        if gpu["unified_memory"]:
            if shared is None:
                shared = pss_bytes(pids, proc)
            gpu["held"] = shared
        else:
            gpu["held"] = sum(
                used
                for (uuid, pid), used in compute_apps.items()
                if uuid == gpu["uuid"] and pid in wanted
            )
