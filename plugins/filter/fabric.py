"""Filters for the CX7 fabric between hosts: the subnet and address plan (subnets that do
not clash, each host's number and addresses), what to ping, and the judgement of what a
host's tools report about its links.

``fabric_checks`` combines one check per concern (``check_rdma_device``,
``check_link_layer``, ``check_link_speed``, ``check_ping``), each a finding
``{what, ok, msg}`` whose sentence names the interface, the peer and what was seen, so a
play can report every problem at once.
"""

from __future__ import annotations

import ipaddress
import itertools
import json

from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.filter.tool_output import ethtool_link


def fabric_subnet_conflicts(subnets):
    """Sentences for bad CIDRs and shared or overlapping subnets in ``{netdev: cidr}``."""
    if not isinstance(subnets, dict):
        raise AnsibleFilterError(f"subnets must be a mapping of netdev to CIDR, got {subnets!r}")
    problems = []
    networks = {}
    for netdev, cidr in subnets.items():
        try:
            networks[netdev] = ipaddress.ip_network(str(cidr), strict=True)
        except ValueError as error:
            problems.append(f"{netdev}: {cidr!r} is not a network in CIDR form ({error})")
    for (first, a), (second, b) in itertools.combinations(sorted(networks.items()), 2):
        if a == b:
            problems.append(
                f"{first} and {second} both use {a}: each half of a CX7 port needs its own "
                "subnet, or traffic for one half leaves through the other"
            )
        elif a.overlaps(b):
            problems.append(f"{first} ({a}) and {second} ({b}) overlap: use disjoint subnets")
    return problems


def fabric_address_conflicts(addresses, subnets):
    """Sentences for addresses (``{netdev: address/prefix}``) outside their netdev's subnet."""
    problems = []
    for netdev, address in sorted(addresses.items()):
        try:
            interface = ipaddress.ip_interface(str(address))
        except ValueError as error:
            problems.append(f"{netdev}: {address!r} is not an address/prefix ({error})")
            continue
        if netdev not in subnets:
            problems.append(f"{netdev}: {address} has no subnet to belong to")
            continue
        subnet = ipaddress.ip_network(str(subnets[netdev]), strict=False)
        inside = interface.ip in subnet
        if "/" not in str(address):
            problems.append(
                f"{netdev}: {address} has no prefix length; expected an address/prefix"
                f" of its subnet {subnet}, such as "
                + (f"{interface.ip}/{subnet.prefixlen}" if inside else str(_first_host(subnet)))
            )
        elif interface.network != subnet and inside:
            problems.append(
                f"{netdev}: {address} has the prefix length /{interface.network.prefixlen}, its"
                f" subnet {subnet} /{subnet.prefixlen}; expected {interface.ip}/{subnet.prefixlen}"
            )
        elif interface.network != subnet:
            problems.append(f"{netdev}: {address} is not in its subnet {subnet}")
        elif interface.ip in (subnet.network_address, subnet.broadcast_address) and (
            subnet.version == 4 and subnet.prefixlen < 31
        ):
            problems.append(f"{netdev}: {address} is the network or broadcast address")
    return problems


def fabric_disagreements(values, variable, why):
    """One sentence when the hosts of one fabric do not agree on ``variable`` (``values``:
    host -> its value), naming each value with its hosts and ``why`` it must agree; none
    when they agree (or there is one host)."""
    if not isinstance(values, dict):
        raise AnsibleFilterError(f"fabric_disagreements: expected host -> value; got {values!r}")
    hosts_by_value = {}
    for host, value in values.items():
        shown = json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else str(value)
        hosts_by_value.setdefault(shown, []).append(str(host))
    if len(hosts_by_value) < 2:
        return []
    seen = "; ".join(f"{value} on {', '.join(hosts)}" for value, hosts in hosts_by_value.items())
    return [
        f"{variable} differs between the hosts of the fabric ({seen}); expected the same on"
        f" every host: {why}"
    ]


def _first_host(network):
    """The network's first usable address with its prefix (``192.168.100.1/24``)."""
    return ipaddress.ip_interface(f"{next(network.hosts())}/{network.prefixlen}")


def fabric_address(subnet, host_number):
    """``192.168.100.0/24 | fabric_address(11)`` -> ``192.168.100.11/24``."""
    network = ipaddress.ip_network(str(subnet), strict=True)
    number = int(host_number)
    usable = network.num_addresses - (2 if network.version == 4 and network.prefixlen < 31 else 0)
    if not 1 <= number <= usable:
        raise AnsibleFilterError(
            f"host number {number} does not fit in {network} (1..{usable} are usable): check"
            " cx7_network_host_number, or cx7_network_address_offset (the host's number is its"
            " place in cx7_network_group plus the offset)"
        )
    return f"{network.network_address + number}/{network.prefixlen}"


def fabric_host_number(host, hosts, offset=10, number=None):
    """A host's number in every fabric subnet: ``number`` when one is given, else its place
    in ``hosts`` (1 for the first) plus ``offset`` (spark-1 -> 11 with the default)."""
    if number not in (None, ""):
        try:
            return int(number)
        except (TypeError, ValueError):
            raise AnsibleFilterError(f"host number {number!r} is not a whole number") from None
    hosts = list(hosts)
    if host not in hosts:
        raise AnsibleFilterError(
            f"{host} is not among the hosts numbered on the fabric ({', '.join(hosts)}): "
            "give it a number of its own"
        )
    return hosts.index(host) + 1 + int(offset)


def fabric_host_addresses(netdevs, subnets, host_number, addresses=None):
    """``{netdev: address/prefix}`` for one host, in the order of ``netdevs``: its own
    address where ``addresses`` gives one, else the address numbered ``host_number`` in the
    netdev's subnet (``subnets``: ``{netdev: cidr}``)."""
    own = addresses or {}
    plan = {}
    for netdev in netdevs:
        if netdev in own:
            plan[netdev] = own[netdev]
        elif netdev in subnets:
            plan[netdev] = fabric_address(subnets[netdev], host_number)
        else:
            raise AnsibleFilterError(
                f"{netdev} has neither an address of its own nor a subnet (subnets: {subnets})"
            )
    return plan


def primary_ipv4(facts, netdev):
    """The primary IPv4 of a netdev in a host's facts; empty when it has none."""
    return ((facts.get(netdev) or {}).get("ipv4") or {}).get("address", "")


def fabric_ping_targets(netdevs, peers, hostvars):
    """One ping per netdev and peer, netdev by netdev: ``{netdev, peer, address}`` with the
    peer's primary IPv4 on that netdev (from its gathered facts in ``hostvars``), empty
    when it has none."""
    facts = {peer: hostvars[peer].get("ansible_facts") or {} for peer in peers}
    return [
        {"netdev": netdev, "peer": peer, "address": primary_ipv4(facts[peer], netdev)}
        for netdev in netdevs
        for peer in peers
    ]


def _finding(what, ok, msg):
    return {"what": what, "ok": bool(ok), "msg": msg}


def _port_state(port_facts):
    """A port's state name (``ACTIVE``, ``DOWN``) from its ``rdma_devices`` facts."""
    state = port_facts.get("state")
    if isinstance(state, dict):
        return state.get("name") or "unknown"
    return str(state) if state else "unknown"


def check_rdma_device(netdev, device, device_facts):
    """An RDMA device backs the netdev (``device``: its name, ``None`` when none does) and
    every port of it is ACTIVE, as the kernel's sysfs shows it (``device_facts``: the
    device's facts from ``llmfleet.cluster.rdma_devices``). The same mapping and state that
    MLNX OFED's ``ibdev2netdev`` prints, without depending on it: Debian and Ubuntu's
    rdma-core do not ship it."""
    what = f"{netdev} rdma"
    if device is None:
        return _finding(
            what,
            False,
            f"{netdev}: no RDMA device backs it (none lists it under device/net in sysfs; "
            "`rdma link` shows the devices and their netdevs)",
        )
    ports = device_facts.get("ports") or {}
    states = {str(port): _port_state(facts) for port, facts in sorted(ports.items())}
    shown = ", ".join(f"port {port} {state}" for port, state in states.items()) or "no port"
    return _finding(
        what,
        bool(states) and set(states.values()) == {"ACTIVE"},
        f"{netdev}: RDMA device {device} {shown}, expected ACTIVE",
    )


def check_link_layer(netdev, device, device_facts):
    """The RDMA device behind the netdev (``None`` when there is none) runs Ethernet (RoCE)
    on every port; ``device_facts`` are its facts from ``llmfleet.cluster.rdma_devices``."""
    layers = sorted({p.get("link_layer", "?") for p in device_facts.get("ports", {}).values()})
    return _finding(
        f"{netdev} link layer",
        layers == ["Ethernet"],
        f"{netdev}: RDMA device {device or '(none)'} has link layer "
        f"{', '.join(layers) or 'unknown'}, expected Ethernet (RoCE)",
    )


def check_link_speed(netdev, ethtool_stdout, speed_mbps):
    """``ethtool NETDEV`` shows a link at the expected speed."""
    link = ethtool_link(ethtool_stdout)
    shown = f"{link['speed_mbps']}Mb/s" if link["speed_mbps"] else "no speed"
    return _finding(
        f"{netdev} speed",
        link["link_detected"] and link["speed_mbps"] == speed_mbps,
        f"{netdev}: ethtool shows {shown}, link detected "
        f"{'yes' if link['link_detected'] else 'no'}; expected {speed_mbps}Mb/s with link",
    )


def check_ping(target, ping_result, payload):
    """The peer of ``target`` (``{netdev, peer, address}``) has an address on the netdev and
    answered an unfragmented ping of ``payload`` bytes (``ping_result``: the looped command
    task's result for that target, empty when it was not pinged)."""
    netdev, peer, address = target["netdev"], target["peer"], target.get("address")
    what = f"{netdev} -> {peer}"
    if not address:
        return _finding(
            what,
            False,
            f"{what}: {peer} has no IPv4 address on {netdev} "
            "(its link is down, or cx7_network has not run there)",
        )
    text = ping_result.get("stdout", "") + "\n" + ping_result.get("stderr", "")
    lines = text.strip().splitlines()
    summary = next((line for line in lines if "packet loss" in line), lines[-1] if lines else "")
    return _finding(
        what,
        ping_result.get("rc") == 0,
        f"{what} ({address}): ping -M do -s {payload} failed: {summary.strip() or 'not run'}",
    )


def _ping_key(item):
    return f"{item.get('netdev', '')}>{item.get('peer', '')}"


def fabric_checks(rdma_devices, ethtool_results, ping_results, expect):
    """Judge one host's fabric from its tools' outputs.

    ``rdma_devices`` are the facts of ``llmfleet.cluster.rdma_devices`` (which netdevs back
    each device, its ports' state and link layer, read from sysfs). ``ethtool_results``
    and ``ping_results`` are the ``results`` of looped command tasks (items: a netdev; and
    ``{netdev, peer, address}``). ``expect`` holds ``netdevs``, ``speed_mbps``, ``mtu``
    and ``ping_targets`` (every ``{netdev, peer, address}``, address empty when the peer
    has none on that netdev, so it was not pinged). Findings come per netdev (its RDMA
    device, its link layer), then per ethtool result, then per ping target.
    """
    try:
        netdevs = list(expect["netdevs"])
        speed = int(expect["speed_mbps"])
        payload = int(expect["mtu"]) - 28
    except (KeyError, TypeError, ValueError) as error:
        raise AnsibleFilterError(f"expect needs netdevs, speed_mbps and mtu: {error}") from error
    by_netdev = {
        netdev: (device, facts)
        for device, facts in (rdma_devices or {}).items()
        for netdev in facts.get("netdevs", [])
    }
    findings = []
    for netdev in netdevs:
        device, facts = by_netdev.get(netdev, (None, {}))
        findings.append(check_rdma_device(netdev, device, facts))
        findings.append(check_link_layer(netdev, device, facts))
    findings += [
        check_link_speed(result.get("item"), result.get("stdout", ""), speed)
        for result in ethtool_results or []
    ]
    pinged = {_ping_key(result.get("item") or {}): result for result in ping_results or []}
    findings += [
        check_ping(target, pinged.get(_ping_key(target), {}), payload)
        for target in expect.get("ping_targets", [])
    ]
    return findings


class FilterModule:
    """CX7 fabric filters."""

    def filters(self):
        return {
            "fabric_subnet_conflicts": fabric_subnet_conflicts,
            "fabric_address_conflicts": fabric_address_conflicts,
            "fabric_address": fabric_address,
            "fabric_host_number": fabric_host_number,
            "fabric_host_addresses": fabric_host_addresses,
            "fabric_ping_targets": fabric_ping_targets,
            "fabric_checks": fabric_checks,
            "fabric_disagreements": fabric_disagreements,
        }
