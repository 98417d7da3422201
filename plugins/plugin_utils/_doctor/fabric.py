# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""The fabric checks of ``llmfleet doctor``: NCCL and Gloo on the fabric interface, RDMA
counters that move under a probe, MTU and subnets that match between peers, links up at full
rate, the RoCE GID index NCCL was given (pure; see _doctor.py for the shape of the evidence)."""

from __future__ import annotations

import ipaddress

from ansible_collections.llmfleet.cluster.plugins.plugin_utils._doctor.evidence import (
    finding,
    host_processes,
    is_multi_node,
)

SOCKET_VARIABLES = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")
# What one probe request of 32 tokens moves between two ranks at least, far above the
# background (the lab's tiny model: about 1.2 MB; health checks and heartbeats: a few KB).
DEFAULT_MIN_PROBE_BYTES = 256 * 1024


def check_socket_interface(docs):
    """NCCL and Gloo bound to the fabric interface, in the environment of the running vLLM
    (a socket on the management network is 10-100 times slower, silently)."""
    title = "NCCL and Gloo use the fabric interface"
    findings = []
    for doc in docs:
        expected = (doc.get("expect") or {}).get("fabric_interface")
        processes = host_processes(doc, "vllm")
        if not is_multi_node(doc) or not expected or not processes:
            continue
        environ = processes[0].get("environ")
        if environ is None:
            findings.append(
                finding(
                    "socket_interface",
                    title,
                    doc["host"],
                    None,
                    "the environment of vLLM could not be read (needs root)",
                    None,
                )
            )
            continue
        wrong = {
            name: environ.get(name) for name in SOCKET_VARIABLES if environ.get(name) != expected
        }
        evidence = ", ".join(f"{name}={value}" for name, value in wrong.items()) or (
            f"{' and '.join(SOCKET_VARIABLES)} = {expected}"
        )
        findings.append(
            finding(
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
        if expect.get("nccl_mode") != "ib" or not is_multi_node(doc):
            continue
        moved = (doc.get("traffic") or {}).get("moved_bytes")
        if moved is None:
            findings.append(
                finding(
                    "rdma_traffic", title, doc["host"], None, "no probe request was measured", None
                )
            )
            continue
        least = int(expect.get("min_probe_bytes") or DEFAULT_MIN_PROBE_BYTES)
        findings.append(
            finding(
                "rdma_traffic",
                title,
                doc["host"],
                moved < least,
                f"{moved} bytes on the RDMA data counters during one probe request"
                + (f" (background traffic only: less than {least})" if moved < least else ""),
                "NCCL fell back to sockets: check NCCL_IB_HCA, NCCL_IB_GID_INDEX and "
                "NCCL_IB_DISABLE in the environment of vLLM (llmfleet up rewrites them) and "
                "`rdma link`",
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
        if not is_multi_node(doc):
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
            finding(
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
            finding(
                "link_rate",
                title,
                doc["host"],
                bool(problems),
                evidence + f" (expected up at {minimum}Mb/s or more)" if problems else evidence,
                "reseat or replace the QSFP cable, check both ends with `ethtool IFACE` and "
                "`rdma link`; llmfleet up -i INV --tags fabric_verify measures the rails",
            )
        )
    return findings


GID_PROCESSES = (("vllm", "vLLM"), ("raylet", "raylet"))


def _gid_index_holders(doc):
    """Where an NCCL_IB_GID_INDEX of the host is: pinned in the environment file, and in the
    environment each running vLLM and raylet (Ray's workers inherit it) started with; the
    wrapper of role nccl_env exports it at each start. ``(label, value, pinned)`` triples, and
    the processes whose environment could not be read."""
    holders, unread = [], []
    pinned = (doc.get("nccl_env") or {}).get("NCCL_IB_GID_INDEX")
    if pinned is not None:
        holders.append(
            ("NCCL_IB_GID_INDEX={} pinned in the environment file".format(pinned), pinned, True)
        )
    for name, label in GID_PROCESSES:
        for process in host_processes(doc, name):
            environ = process.get("environ")
            if environ is None:
                unread.append(f"{label} pid {process['pid']}")
            elif environ.get("NCCL_IB_GID_INDEX") is not None:
                value = environ["NCCL_IB_GID_INDEX"]
                holders.append(
                    (
                        f"{label} pid {process['pid']} started with NCCL_IB_GID_INDEX={value}",
                        value,
                        False,
                    )
                )
    return holders, unread


def check_gid_index(docs):
    """The RoCE GID index NCCL runs with is still the one of the fabric address: the one each
    running vLLM and raylet started with (the index moves between boots; nccl_env's wrapper
    reads it at every start), and one the environment file pins."""
    title = "RoCE GID index matches the device"
    findings = []
    for doc in docs:
        if (doc.get("expect") or {}).get("nccl_mode") != "ib":
            continue
        rdma = doc.get("rdma") or {}
        current = rdma.get("gid_index")
        holders, unread = _gid_index_holders(doc)
        if current is None or not holders:
            why = (
                f"{rdma.get('device')} has no RoCE v2 GID now"
                if current is None
                else "no running vLLM or raylet carries NCCL_IB_GID_INDEX"
                + (f" ({', '.join(unread)}: environment unreadable, needs root)" if unread else "")
                + " and the environment file pins none: NCCL picks the GID itself"
            )
            findings.append(finding("gid_index", title, doc["host"], None, why, None))
            continue
        stale = [holder for holder in holders if str(holder[1]) != str(current)]
        findings.append(
            finding(
                "gid_index",
                title,
                doc["host"],
                bool(stale),
                "{}; the RoCE v2 GID of the fabric address on {} is at index {}".format(
                    "; ".join(holder[0] for holder in stale or holders),
                    rdma.get("device"),
                    current,
                ),
                (
                    f"set nccl_env_gid_index to auto (or {current}) and run llmfleet up -i INV: "
                    "the wrapper then reads the index at every start"
                    if any(holder[2] for holder in stale)
                    else "restart Ray and the group's vLLM (systemctl restart llmfleet-ray "
                    "llmfleet-vllm, or restart their containers): nccl_env's wrapper reads the "
                    "index at each start; units or containers older than the wrapper start "
                    "through it after llmfleet up -i INV"
                ),
            )
        )
    return findings
