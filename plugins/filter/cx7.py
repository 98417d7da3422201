"""Filters over gathered facts for ConnectX-7 fabric interfaces."""

from __future__ import annotations

import re

# CX7 netdev names on DGX Spark / GB10: enp1s0f1np1 and its other half enP2p1s0f1np1.
CX7_NETDEV_PATTERN = re.compile(r"^en[pP]\d+(?:p\d+)?s\d+f\d+np\d+$")


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
    """ConnectX-7 fact filters."""

    def filters(self):
        return {"cx7_interfaces": cx7_interfaces, "cx7_drift": cx7_drift}
