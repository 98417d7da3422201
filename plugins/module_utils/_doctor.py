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

import ipaddress

SOCKET_VARIABLES = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")
# What one probe request of 32 tokens moves between two ranks at least, far above the
# background (the lab's tiny model: about 1.2 MB; health checks and heartbeats: a few KB).
DEFAULT_MIN_PROBE_BYTES = 256 * 1024
GIB = 1 << 30


def _finding(check, title, host, problem, evidence, fix):  # noqa: PLR0917 - one record
    return {
        "check": check,
        "title": title,
        "host": host,
        "status": "skipped" if problem is None else ("problem" if problem else "ok"),
        "evidence": evidence,
        "fix": fix if problem else None,
    }


def _processes(doc, name):
    return ((doc.get("node") or {}).get("processes") or {}).get(name) or []


def _is_multi_node(doc):
    return len(doc.get("group") or []) > 1


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
        if (doc.get("expect") or {}).get("executor") != "ray" or not _is_multi_node(doc):
            continue
        clients = [
            process
            for process in _processes(doc, "vllm")
            if "ray://" in process["cmdline"]
            or str((process.get("environ") or {}).get("RAY_ADDRESS", "")).startswith("ray://")
        ]
        evidence = (
            "; ".join("pid {} {}".format(p["pid"], p["cmdline"]) for p in clients)
            or "no vLLM process with a ray:// address"
        )
        findings.append(_finding("ray_client", title, doc["host"], bool(clients), evidence, fix))
    return findings


def check_ranks(docs):
    """Every rank of a multi-node group runs vLLM, and the API of rank 0 answers (a rank that
    lost the others takes the API down with it)."""
    title = "the ranks of the group run and see each other"
    findings = []
    for doc in docs:
        if not _is_multi_node(doc):
            continue
        running = _processes(doc, "vllm")
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
            _finding(
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


def check_socket_interface(docs):
    """NCCL and Gloo bound to the fabric interface, in the environment of the running vLLM
    (a socket on the management network is 10-100 times slower, silently)."""
    title = "NCCL and Gloo use the fabric interface"
    findings = []
    for doc in docs:
        expected = (doc.get("expect") or {}).get("fabric_interface")
        processes = _processes(doc, "vllm")
        if not _is_multi_node(doc) or not expected or not processes:
            continue
        environ = processes[0].get("environ")
        if environ is None:
            findings.append(
                _finding("socket_interface", title, doc["host"], None,
                         "the environment of vLLM could not be read (needs root)", None)
            )  # fmt: skip
            continue
        wrong = {
            name: environ.get(name) for name in SOCKET_VARIABLES if environ.get(name) != expected
        }
        evidence = ", ".join(f"{name}={value}" for name, value in wrong.items()) or (
            f"{' and '.join(SOCKET_VARIABLES)} = {expected}"
        )
        findings.append(
            _finding(
                "socket_interface",
                title,
                doc["host"],
                bool(wrong),
                f"vLLM pid {processes[0]['pid']}: {evidence} (expected {expected})",
                f"set both to {expected} (role nccl_env writes them; llmfleet up restarts vLLM "
                "with the file)",
            )
        )
    return findings


def check_rdma_traffic(docs):
    """With NCCL over RoCE, the fabric's RDMA data counters move while a request is served;
    counters that move no more than background traffic (health checks, Ray's heartbeats) mean
    NCCL fell back to sockets."""
    title = "RDMA counters move under a request"
    findings = []
    for doc in docs:
        expect = doc.get("expect") or {}
        if expect.get("nccl_mode") != "ib" or not _is_multi_node(doc):
            continue
        moved = (doc.get("traffic") or {}).get("moved_bytes")
        if moved is None:
            findings.append(
                _finding("rdma_traffic", title, doc["host"], None,
                         "no probe request was measured", None)
            )  # fmt: skip
            continue
        least = int(expect.get("min_probe_bytes") or DEFAULT_MIN_PROBE_BYTES)
        findings.append(
            _finding(
                "rdma_traffic",
                title,
                doc["host"],
                moved < least,
                f"{moved} bytes on the RDMA data counters during one probe request"
                + (f" (background traffic only: less than {least})" if moved < least else ""),
                "NCCL fell back to sockets: check NCCL_IB_HCA, NCCL_IB_GID_INDEX and "
                "NCCL_IB_DISABLE in the environment of vLLM (llmfleet up rewrites them) and "
                "`ibdev2netdev`",
            )
        )
    return findings


def _networks(link):
    return {str(ipaddress.ip_interface(address).network) for address in link.get("ipv4") or []}


def check_peer_links(docs):
    """The halves of the fabric have one MTU and one subnet on every host of a group."""
    title = "fabric MTU and subnets match between peers"
    findings = []
    by_host = {doc["host"]: doc for doc in docs}
    for doc in docs:
        if not _is_multi_node(doc):
            continue
        peers = [by_host[host] for host in doc["group"] if host in by_host and host != doc["host"]]
        problems = []
        mine = {link["name"]: link for link in doc["node"]["links"] if link.get("present")}
        for peer in peers:
            theirs = {link["name"]: link for link in peer["node"]["links"] if link.get("present")}
            for name in sorted(set(mine) & set(theirs)):
                if mine[name]["mtu"] != theirs[name]["mtu"]:
                    problems.append(
                        "{} MTU {} here, {} on {}".format(
                            name, mine[name]["mtu"], theirs[name]["mtu"], peer["host"]
                        )
                    )
                if _networks(mine[name]) != _networks(theirs[name]):
                    problems.append(
                        "{} in {} here, {} on {}".format(
                            name,
                            ", ".join(sorted(_networks(mine[name]))) or "no subnet",
                            ", ".join(sorted(_networks(theirs[name]))) or "no subnet",
                            peer["host"],
                        )
                    )
        findings.append(
            _finding(
                "peer_links",
                title,
                doc["host"],
                bool(problems),
                "; ".join(problems)
                or "same MTU and subnets as " + ", ".join(p["host"] for p in peers),
                "llmfleet up -i INV --tags cx7_network sets the MTU and addresses the inventory "
                "gives on every host",
            )
        )
    return findings


def check_link_rate(docs):
    """Every fabric netdev present, up and at the rate of a CX7 port (200000Mb/s)."""
    title = "fabric links up at full rate"
    findings = []
    for doc in docs:
        links = doc["node"].get("links") or []
        if not links:
            continue
        minimum = int((doc.get("expect") or {}).get("min_link_mbps") or 200000)
        problems = []
        for link in links:
            if not link.get("present"):
                problems.append(f"{link['name']} missing")
            elif link.get("operstate") != "up":
                problems.append(f"{link['name']} {link.get('operstate')} (rail down)")
            elif link.get("speed_mbps") is not None and link["speed_mbps"] < minimum:
                problems.append(f"{link['name']} at {link['speed_mbps']}Mb/s")
        evidence = "; ".join(problems) or ", ".join(
            "{} up {}Mb/s".format(link["name"], link.get("speed_mbps")) for link in links
        )
        findings.append(
            _finding(
                "link_rate",
                title,
                doc["host"],
                bool(problems),
                evidence + f" (expected up at {minimum}Mb/s or more)" if problems else evidence,
                "reseat or replace the QSFP cable, check both ends with `ethtool IFACE` and "
                "`ibdev2netdev`; llmfleet up -i INV --tags fabric_verify measures the rails",
            )
        )
    return findings


def check_gid_index(docs):
    """The RoCE GID index NCCL was given is still the one of the fabric address (it moves when
    addresses come and go, after a reboot)."""
    title = "RoCE GID index matches the device"
    findings = []
    for doc in docs:
        if (doc.get("expect") or {}).get("nccl_mode") != "ib":
            continue
        configured = (doc.get("nccl_env") or {}).get("NCCL_IB_GID_INDEX")
        current = (doc.get("rdma") or {}).get("gid_index")
        if configured is None or current is None:
            findings.append(
                _finding("gid_index", title, doc["host"], None,
                         f"configured {configured}, device {current}", None)
            )  # fmt: skip
            continue
        findings.append(
            _finding(
                "gid_index",
                title,
                doc["host"],
                str(configured) != str(current),
                "NCCL_IB_GID_INDEX={} in the environment file; the RoCE v2 GID of the fabric "
                "address on {} is at index {}".format(
                    configured, (doc.get("rdma") or {}).get("device"), current
                ),
                "llmfleet up -i INV --tags nccl_env detects the index again and restarts vLLM",
            )
        )
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
            _finding(
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
    """vLLM would find its memory at the next restart, counting what it holds now; page cache
    holding the rest is the silent failure of unified memory."""
    title = "vLLM finds its memory at the next restart"
    findings = []
    for doc in docs:
        gpu = doc.get("gpu") or {}
        if not gpu.get("gpus") or gpu.get("fits") is None:
            continue
        page_cache = gpu.get("drop_cache_before_restart")
        findings.append(
            _finding(
                "page_cache",
                title,
                doc["host"],
                not gpu["fits"] or bool(page_cache),
                gpu.get("msg", ""),
                "drop the page cache (`sync; echo 3 > /proc/sys/vm/drop_caches`, or "
                "preflight_drop_caches: true) or lower gpu_memory_utilization",
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
            _finding(
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
        raylets = _processes(doc, "raylet")
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
            _finding(
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
            _finding(
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
    """Every check's findings over the hosts' evidence, in the order of CHECKS."""
    return [finding for check in CHECKS for finding in check(docs)]
