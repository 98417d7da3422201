"""Filters for planning the ConnectX-7 fabric: netdev names, per-half subnets, addresses."""

from __future__ import annotations

import ipaddress
import itertools

from ansible.errors import AnsibleFilterError

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


def cx7_rdma_device(netdev):
    """The RDMA device backing a CX7 netdev (``enp1s0f1np1`` -> ``rocep1s0f1``)."""
    for pair in CX7_HALVES.values():
        for name, device in pair:
            if name == netdev:
                return device
    raise AnsibleFilterError(f"{netdev!r} is not a CX7 netdev of a DGX Spark")


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
        if interface.network != subnet:
            problems.append(f"{netdev}: {address} is not in its subnet {subnet}")
        elif interface.ip in (subnet.network_address, subnet.broadcast_address) and (
            subnet.version == 4 and subnet.prefixlen < 31
        ):
            problems.append(f"{netdev}: {address} is the network or broadcast address")
    return problems


def fabric_address(subnet, host_number):
    """``192.168.100.0/24 | fabric_address(11)`` -> ``192.168.100.11/24``."""
    network = ipaddress.ip_network(str(subnet), strict=True)
    number = int(host_number)
    usable = network.num_addresses - (2 if network.version == 4 and network.prefixlen < 31 else 0)
    if not 1 <= number <= usable:
        raise AnsibleFilterError(
            f"host number {number} does not fit in {network} (1..{usable} are usable)"
        )
    return f"{network.network_address + number}/{network.prefixlen}"


class FilterModule:
    """CX7 fabric planning filters."""

    def filters(self):
        return {
            "cx7_netdevs": cx7_netdevs,
            "cx7_rdma_device": cx7_rdma_device,
            "fabric_subnet_conflicts": fabric_subnet_conflicts,
            "fabric_address_conflicts": fabric_address_conflicts,
            "fabric_address": fabric_address,
        }
