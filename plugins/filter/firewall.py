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
    ``all_ipv4_addresses``/``all_ipv6_addresses``, and ``ansible_host`` when it is an address)
    but link-local ones, and the ``extra`` addresses or networks; sorted, without duplicates.

    A link-local address (fe80::/10, 169.254.0.0/16) is valid on its link only, so no peer
    reaches a private port from it, and it moves with the interface's MAC address: a
    container's veth, or a lab node that restarts, changed the rules at every run."""
    found = set()
    for host in hosts or []:
        facts = host.get("ansible_facts") or {}
        addresses = list(facts.get("all_ipv4_addresses") or [])
        addresses += list(facts.get("all_ipv6_addresses") or [])
        # A name is resolved by the connection: its address is among the facts.
        with contextlib.suppress(ValueError):
            addresses.append(str(ipaddress.ip_address(str(host.get("ansible_host", "")))))
        networks = (_networks(address, "a host's facts") for address in addresses)
        found.update(net for net in networks if not net.network_address.is_link_local)
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
