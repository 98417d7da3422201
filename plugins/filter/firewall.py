"""Filters for the cluster firewall: who may reach the private ports, and which ports."""

from __future__ import annotations

import contextlib
import ipaddress

from ansible.errors import AnsibleFilterError


def _networks(value, where):
    try:
        return ipaddress.ip_network(str(value).strip(), strict=False)
    except ValueError:
        raise AnsibleFilterError(
            f"{where} has {value!r}; expected an IPv4/IPv6 address or network"
        ) from None


def firewall_sources(hosts, extra=()):
    """``{'ipv4': [...], 'ipv6': [...]}``: every address the given hosts have (their gathered
    ``all_ipv4_addresses``/``all_ipv6_addresses``, and ``ansible_host`` when it is an address),
    and the ``extra`` addresses or networks; sorted, without duplicates."""
    found = set()
    for host in hosts or []:
        facts = host.get("ansible_facts") or {}
        addresses = list(facts.get("all_ipv4_addresses") or [])
        addresses += list(facts.get("all_ipv6_addresses") or [])
        # A name is resolved by the connection: its address is among the facts.
        with contextlib.suppress(ValueError):
            addresses.append(str(ipaddress.ip_address(str(host.get("ansible_host", "")))))
        found.update(_networks(address, "a host's facts") for address in addresses)
    found.update(_networks(entry, "cluster_firewall_allowed_sources") for entry in extra or [])
    return {
        family: [
            str(net) if net.prefixlen < net.max_prefixlen else str(net.network_address)
            for net in nets
        ]
        for family, nets in (
            ("ipv4", sorted(n for n in found if n.version == 4)),
            ("ipv6", sorted(n for n in found if n.version == 6)),
        )
    }


def firewall_ports(ports, variable="cluster_firewall_tcp_ports"):
    """TCP ports and ranges (``6379``, ``"10001-19999"``) as nftables writes them, checked:
    each 1..65535, ranges from low to high; an error names ``variable``."""
    out = []
    for raw in ports or []:
        text = str(raw).strip()
        low, sep, high = text.partition("-")
        try:
            bounds = [int(low)] + ([int(high)] if sep else [])
        except ValueError:
            bounds = []
        if not bounds or not all(1 <= b <= 65535 for b in bounds) or bounds != sorted(bounds):
            raise AnsibleFilterError(
                f"{variable} has {raw!r}; expected a TCP port (1..65535) or a range"
                " LOW-HIGH of them"
            )
        normal = "-".join(str(b) for b in bounds)
        if normal not in out:
            out.append(normal)
    return out


class FilterModule:
    """Firewall filters."""

    def filters(self):
        return {"firewall_sources": firewall_sources, "firewall_ports": firewall_ports}
