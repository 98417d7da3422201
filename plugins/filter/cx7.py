"""Filters for the ConnectX-7 of a DGX Spark: its netdev and RDMA device names, and what
gathered facts say about its interfaces."""

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError

# CX7 netdev names on DGX Spark / GB10: enp1s0f1np1 and its other half enP2p1s0f1np1.
CX7_NETDEV_PATTERN = re.compile(r"^en[pP]\d+(?:p\d+)?s\d+f\d+np\d+$")

# A DGX Spark's CX7 exposes each QSFP port as two netdevs on two PCI domains ("halves");
# each half has its own RDMA device. Index: port number -> (first half, second half).
CX7_HALVES = {
    0: (("enp1s0f0np0", "rocep1s0f0"), ("enP2p1s0f0np0", "roceP2p1s0f0")),
    1: (("enp1s0f1np1", "rocep1s0f1"), ("enP2p1s0f1np1", "roceP2p1s0f1")),
}


def _ports(ports):
    if not isinstance(ports, (list, tuple)) or not ports:
        raise AnsibleFilterError(f"CX7 ports must be a non-empty list of 0 and/or 1, got {ports!r}")
    unknown = [p for p in ports if p not in CX7_HALVES]
    if unknown:
        raise AnsibleFilterError(f"CX7 ports {unknown!r} do not exist: a Spark has ports 0 and 1")
    return sorted(set(ports))


def cx7_netdevs(ports, halves="both"):
    """Netdev names of the given CX7 ports: both halves, or only the ``first`` of each."""
    if halves not in ("both", "first"):
        raise AnsibleFilterError(f"halves must be 'both' or 'first', got {halves!r}")
    count = 2 if halves == "both" else 1
    return [netdev for port in _ports(ports) for netdev, _device in CX7_HALVES[port][:count]]


def cx7_fabric_interface(interface, ports):
    """The interface a role binds to on the fabric: the one set, else the first half of the
    first of the given CX7 ports (what NCCL, Gloo, Ray, vLLM and the weights' copy share)."""
    if interface:
        return interface
    return cx7_netdevs(ports, "first")[0]


def cx7_rdma_device(netdev):
    """The RDMA device backing a CX7 netdev (``enp1s0f1np1`` -> ``rocep1s0f1``)."""
    for pair in CX7_HALVES.values():
        for name, device in pair:
            if name == netdev:
                return device
    raise AnsibleFilterError(f"{netdev!r} is not a CX7 netdev of a DGX Spark")


def cx7_interfaces(facts):
    """Return one dict per ConnectX-7 interface found in ``ansible_facts``, sorted by name."""
    result = []
    for name in sorted(facts.get("interfaces", [])):
        if not CX7_NETDEV_PATTERN.match(name):
            continue
        fact = facts.get(name.replace("-", "_"), {})
        ipv4 = fact.get("ipv4", {}).get("address", "")
        prefix = fact.get("ipv4", {}).get("prefix", "")
        entry = {
            "name": name,
            "active": bool(fact.get("active", False)),
            "mtu": int(fact.get("mtu", 0) or 0),
            "ipv4": f"{ipv4}/{prefix}" if ipv4 else "",
            "ipv6": [a["address"] for a in fact.get("ipv6", []) if "address" in a],
        }
        entry["summary"] = (
            f"{name} {'up' if entry['active'] else 'DOWN'} mtu {entry['mtu']} "
            f"{entry['ipv4'] or 'no IPv4'}"
        )
        result.append(entry)
    return result


def cx7_drift(facts, netdevs, mtu, addresses=None):
    """Say how each planned netdev on the host differs from the plan (MTU, and the planned
    ``address/prefix`` when one is given); netdevs the host lacks are not judged here."""
    drift = []
    for name in netdevs:
        fact = facts.get(name.replace("-", "_"))
        if fact is None:
            continue
        live_mtu = int(fact.get("mtu", 0) or 0)
        if live_mtu != int(mtu):
            drift.append(f"{name}: MTU {live_mtu}, planned {int(mtu)}")
        planned = (addresses or {}).get(name)
        if planned:
            address = planned.split("/")[0]
            live = [fact.get("ipv4", {}).get("address")]
            live += [a.get("address") for a in fact.get("ipv4_secondaries", [])]
            if address not in live:
                drift.append(f"{name}: no {address}, planned {planned}")
    return drift


class FilterModule:
    """ConnectX-7 filters."""

    def filters(self):
        return {
            "cx7_netdevs": cx7_netdevs,
            "cx7_fabric_interface": cx7_fabric_interface,
            "cx7_rdma_device": cx7_rdma_device,
            "cx7_interfaces": cx7_interfaces,
            "cx7_drift": cx7_drift,
        }
