# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""The checks of ``llmfleet doctor``: what the field notes found by hand, judged from what each
serving host reported (``playbooks/doctor.yml`` gathers it), each finding with its evidence and
its fix.

Every check takes the hosts' evidence (a list of mappings, one per host, the shape
``playbooks/doctor.yml`` documents) and returns findings: ``{check, title, host, status,
evidence, fix}``, ``status`` one of ``ok``, ``problem`` or ``skipped`` (the check does not
apply, or its evidence is missing: the evidence says which). Pure: no host is reached.
"""

from __future__ import annotations

from ansible_collections.llmfleet.cluster.plugins.plugin_utils._doctor.evidence import (
    GIB,
    finding,
    host_processes,
    is_multi_node,
)
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._doctor.fabric import (
    check_gid_index,
    check_link_rate,
    check_peer_links,
    check_rdma_traffic,
    check_socket_interface,
)
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._doctor.mac import mac_findings


def check_ray_client(docs):
    """vLLM started as a Ray client (``ray://``) runs on one GPU of the cluster instead of
    inside the head: seed 004's silent TP=1."""
    title = "vLLM runs inside the Ray head, not as a ray:// client"
    fix = (
        "start vLLM in the Ray head (the collection's Ray executor does: `vllm serve` runs in "
        "the head's container or unit); unset RAY_ADDRESS=ray://..."
    )
    findings = []
    for doc in docs:
        if (doc.get("expect") or {}).get("executor") != "ray" or not is_multi_node(doc):
            continue
        clients = [
            process
            for process in host_processes(doc, "vllm")
            if "ray://" in process["cmdline"] or environment_ray_address(process)
        ]
        evidence = (
            "; ".join(describe_ray_client(process) for process in clients)
            or "no vLLM process with a ray:// address"
        )
        findings.append(finding("ray_client", title, doc["host"], bool(clients), evidence, fix))
    return findings


def environment_ray_address(process):
    """The ray:// address a process has in its RAY_ADDRESS, or an empty string."""
    address = str((process.get("environ") or {}).get("RAY_ADDRESS", ""))
    return address if address.startswith("ray://") else ""


def describe_ray_client(process):
    """A vLLM process that connects to Ray as a client: its pid, its command line and, when
    the address came from its environment, that variable."""
    address = environment_ray_address(process)
    told = f" with RAY_ADDRESS={address}" if address else ""
    return "pid {} {}{}".format(process["pid"], process["cmdline"], told)


def check_ranks(docs):
    """Every rank of a multi-node group runs vLLM, and the API of rank 0 answers (a rank that
    lost the others takes the API down with it)."""
    title = "the ranks of the group run and see each other"
    findings = []
    for doc in docs:
        if not is_multi_node(doc):
            continue
        running = host_processes(doc, "vllm")
        vllm = doc.get("vllm") or {}
        problems = []
        if not running and (doc.get("expect") or {}).get("executor") == "mp":
            problems.append("no `vllm serve` process")
        if vllm.get("serves_api") and vllm.get("health") != 200:
            problems.append(
                "the API does not answer /health ({})".format(
                    vllm.get("health_error") or vllm.get("health")
                )
            )
        evidence = "; ".join(problems) or "{} vLLM process(es){}".format(
            len(running), ", /health 200" if vllm.get("serves_api") else ""
        )
        findings.append(
            finding(
                "ranks",
                title,
                doc["host"],
                bool(problems),
                evidence,
                "llmfleet logs -i INV --since 30m shows which rank stopped first and why; "
                "llmfleet up restarts every rank of the group together",
            )
        )
    return findings


def check_generation(docs):
    """The API that answers /health also answers a request (vLLM's /health stays 200 while the
    engine behind it is dead or wedged), and the serving probe has not given up healing."""
    title = "the API answers requests, not only /health"
    fix = (
        "the serving probe restarts the group after a few requests without an answer "
        "(journalctl -u llmfleet-vllm-probe says what it saw); `llmfleet logs -i INV --since 30m` "
        "shows why the engine stopped; `llmfleet up` restarts every rank of the group"
    )
    findings = []
    for doc in docs:
        vllm = doc.get("vllm") or {}
        if not vllm.get("serves_api"):
            continue
        probe = (doc.get("node") or {}).get("probe") or {}
        generation = vllm.get("generation")
        heal = probe.get("last_heal") or {}
        healed = "; last heal {}: {}".format(heal["time"], heal["reason"]) if heal else ""
        if probe.get("phase") == "given up":
            evidence = "the serving probe gave up healing: {}{}".format(
                probe.get("last_failure") or "?", healed
            )
            problem = True
        elif generation is None or vllm.get("health") != 200:
            evidence, problem = "/health does not answer (see the ranks check)", None
        elif generation.get("status") != 200:
            evidence = "answers /health but does not generate: HTTP {} {}{}".format(
                generation.get("status"), generation.get("error") or "", healed
            ).replace("  ", " ")
            problem = True
        else:
            evidence = "answered one token{}{}".format(
                " (the probe: {})".format(probe["phase"]) if probe.get("phase") else "", healed
            )
            problem = False
        findings.append(finding("generation", title, doc["host"], problem, evidence, fix))
    return findings


def check_swap(docs):
    """Swap off: a unified-memory node that swaps under vLLM stalls for minutes."""
    findings = []
    for doc in docs:
        memory = doc["node"]["memory"]
        total = memory.get("swap_total_bytes") or 0
        evidence = (
            "swap of {:.1f} GiB on {} ({:.1f} GiB used)".format(
                total / GIB,
                ", ".join(memory.get("swap_devices") or []) or "?",
                (memory.get("swap_used_bytes") or 0) / GIB,
            )
            if total
            else "no swap"
        )
        findings.append(
            finding(
                "swap",
                "swap is off",
                doc["host"],
                total > 0,
                evidence,
                "llmfleet up -i INV --tags preflight turns it off and keeps it off "
                "(preflight_disable_swap)",
            )
        )
    return findings


def check_page_cache(docs):
    """vLLM would find its memory at the next restart, counting what our vLLM holds now and,
    where the collection drops it before that restart, the page cache (preflight's
    memory_check). A fit that needs the page cache dropped is a problem only where nothing
    drops it (preflight_drop_caches never): the silent failure of unified memory."""
    title = "vLLM finds its memory at the next restart"
    findings = []
    for doc in docs:
        gpu = doc.get("gpu") or {}
        if not gpu.get("gpus") or gpu.get("fits") is None:
            continue
        needs_drop = bool(gpu.get("drop_cache_before_restart"))
        dropped = bool(gpu.get("page_cache_dropped_before_restart"))
        evidence = gpu.get("msg", "")
        if gpu["fits"] and needs_drop and dropped:
            evidence += (
                "; the page cache it counts is dropped before vLLM restarts "
                "(preflight_drop_caches), as `llmfleet up` does"
            )
        findings.append(
            finding(
                "page_cache",
                title,
                doc["host"],
                not gpu["fits"] or (needs_drop and not dropped),
                evidence,
                "drop the page cache (`sync; echo 3 > /proc/sys/vm/drop_caches`, or "
                "preflight_drop_caches: when_short) or lower gpu_memory_utilization",
            )
        )
    return findings


def check_versions(docs):
    """The ranks of one group run the same vLLM, image and model revision."""
    title = "the ranks of the group run the same vLLM, image and model"
    findings = []
    by_host = {doc["host"]: doc for doc in docs}
    seen = set()
    for doc in docs:
        group = tuple(doc.get("group") or [])
        if len(group) < 2 or group in seen:
            continue
        seen.add(group)
        members = [by_host[host] for host in group if host in by_host]
        differences = []
        for what, read in (
            ("vLLM", lambda d: (d["node"].get("packages") or {}).get("vllm")),
            ("image", _image_id),
            ("model revision", _model_revision),
            ("profile", lambda d: _current(d).get("profile")),
        ):
            values = {member["host"]: read(member) for member in members}
            if len(set(values.values())) > 1:
                differences.append(
                    "{}: {}".format(what, ", ".join(f"{h} {v}" for h, v in values.items()))
                )
        findings.append(
            finding(
                "versions",
                title,
                group[0],
                bool(differences),
                "; ".join(differences) or "same on " + ", ".join(group),
                "llmfleet up -i INV installs the inventory's image/vLLM and model on every rank "
                "(llmfleet upgrade to switch all of them together)",
            )
        )
    return findings


def _current(doc):
    return ((doc["node"].get("serving") or {}).get("current")) or {}


def _model_revision(doc):
    return _current(doc).get("model_revision")


def _image_id(doc):
    images = doc["node"].get("images") or {}
    return ",".join(sorted(str(entry.get("image_id")) for entry in images.values())) or None


def check_ray_settings(docs):
    """Ray's memory monitor threshold and object store size are what the inventory asked for
    (the defaults kill vLLM's workers or take 30-40 GB of a Spark)."""
    title = "Ray's memory monitor and object store are as configured"
    findings = []
    for doc in docs:
        expect = doc.get("expect") or {}
        raylets = host_processes(doc, "raylet")
        if not expect.get("ray_cluster") or not raylets:
            continue
        problems = []
        environ = raylets[0].get("environ") or {}
        wanted = expect.get("memory_usage_threshold")
        if wanted is not None and environ.get("RAY_memory_usage_threshold") != str(wanted):
            problems.append(
                "RAY_memory_usage_threshold={} (expected {})".format(
                    environ.get("RAY_memory_usage_threshold", "unset: Ray's 0.95"), wanted
                )
            )
        store = (doc.get("ray") or {}).get("object_store_bytes")
        wanted_store = expect.get("object_store_bytes")
        if store is not None and wanted_store and abs(store - wanted_store) > wanted_store * 0.01:
            problems.append(
                "object store {:.2f} GiB (expected {:.2f} GiB)".format(
                    store / GIB, wanted_store / GIB
                )
            )
        findings.append(
            finding(
                "ray_settings",
                title,
                doc["host"],
                bool(problems),
                "; ".join(problems)
                or f"RAY_memory_usage_threshold={environ.get('RAY_memory_usage_threshold')}",
                "llmfleet up -i INV --tags ray_node restarts Ray with the configured values",
            )
        )
    return findings


def check_clock(docs):
    """The nodes' clocks agree with this machine within a second (Ray and NCCL time out on
    skew; logs of two nodes stop lining up)."""
    findings = []
    for doc in docs:
        clock = doc.get("clock") or {}
        if not {"node", "before", "after"} <= set(clock):
            continue
        limit = float((doc.get("expect") or {}).get("max_clock_skew_s") or 1.0)
        middle = (clock["before"] + clock["after"]) / 2
        uncertainty = (clock["after"] - clock["before"]) / 2
        skew = clock["node"] - middle
        findings.append(
            finding(
                "clock",
                "the clock agrees with this machine's",
                doc["host"],
                abs(skew) - uncertainty > limit,
                f"{skew:+.3f} s against this machine (+/- {uncertainty:.3f} s)",
                "enable time synchronisation on the node (`timedatectl set-ntp true`, chrony or "
                "systemd-timesyncd)",
            )
        )
    return findings


CHECKS = (
    check_ray_client,
    check_ranks,
    check_generation,
    check_socket_interface,
    check_rdma_traffic,
    check_peer_links,
    check_link_rate,
    check_gid_index,
    check_swap,
    check_page_cache,
    check_versions,
    check_ray_settings,
    check_clock,
)


def findings(docs):
    """Every check's findings over the hosts' evidence, in the order of CHECKS; a Mac's
    (``platform: macos``, vllm-mlx under launchd) from its own checks (``mac.py``)."""
    macs = [doc for doc in docs if doc.get("platform") == "macos"]
    servers = [doc for doc in docs if doc.get("platform") != "macos"]
    return [found for check in CHECKS for found in check(servers)] + mac_findings(macs)
