"""Fabric planning filters: CX7 names, subnet conflicts, per-host addresses."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.filter.fabric import (
    FilterModule,
    cx7_netdevs,
    cx7_rdma_device,
    fabric_address,
    fabric_address_conflicts,
    fabric_subnet_conflicts,
)


@pytest.mark.parametrize(
    ("ports", "halves", "expected"),
    [
        ([1], "both", ["enp1s0f1np1", "enP2p1s0f1np1"]),
        ([0], "both", ["enp1s0f0np0", "enP2p1s0f0np0"]),
        ([1, 0], "both", ["enp1s0f0np0", "enP2p1s0f0np0", "enp1s0f1np1", "enP2p1s0f1np1"]),
        ([0, 1], "first", ["enp1s0f0np0", "enp1s0f1np1"]),
    ],
)
def test_cx7_netdevs(ports: list[int], halves: str, expected: list[str]) -> None:
    assert cx7_netdevs(ports, halves) == expected


@pytest.mark.parametrize("ports", [[], [2], "1", None])
def test_cx7_netdevs_rejects_bad_ports(ports: object) -> None:
    with pytest.raises(AnsibleFilterError):
        cx7_netdevs(ports)


@pytest.mark.parametrize(
    ("netdev", "device"),
    [
        ("enp1s0f1np1", "rocep1s0f1"),
        ("enP2p1s0f1np1", "roceP2p1s0f1"),
        ("enp1s0f0np0", "rocep1s0f0"),
        ("enP2p1s0f0np0", "roceP2p1s0f0"),
    ],
)
def test_cx7_rdma_device(netdev: str, device: str) -> None:
    assert cx7_rdma_device(netdev) == device


def test_cx7_rdma_device_unknown() -> None:
    with pytest.raises(AnsibleFilterError, match="eth0"):
        cx7_rdma_device("eth0")


def test_disjoint_subnets_have_no_conflicts() -> None:
    plan = {"enp1s0f1np1": "192.168.100.0/24", "enP2p1s0f1np1": "192.168.101.0/24"}
    assert fabric_subnet_conflicts(plan) == []


def test_same_subnet_on_both_halves_is_named() -> None:
    plan = {"enp1s0f1np1": "192.168.100.0/24", "enP2p1s0f1np1": "192.168.100.0/24"}
    (problem,) = fabric_subnet_conflicts(plan)
    assert "enP2p1s0f1np1 and enp1s0f1np1 both use 192.168.100.0/24" in problem


def test_overlap_and_bad_cidr_are_named() -> None:
    plan = {"a": "192.168.0.0/16", "b": "192.168.100.0/24", "c": "192.168.100.7/24"}
    problems = fabric_subnet_conflicts(plan)
    assert any("a (192.168.0.0/16) and b (192.168.100.0/24) overlap" in p for p in problems)
    assert any(p.startswith("c: '192.168.100.7/24' is not a network") for p in problems)


@pytest.mark.parametrize(
    ("subnet", "number", "expected"),
    [
        ("192.168.100.0/24", 11, "192.168.100.11/24"),
        ("192.168.101.0/24", 254, "192.168.101.254/24"),
        ("10.0.0.0/31", 1, "10.0.0.1/31"),
        ("fd00:c7::/64", 12, "fd00:c7::c/64"),
    ],
)
def test_fabric_address(subnet: str, number: int, expected: str) -> None:
    assert fabric_address(subnet, number) == expected


@pytest.mark.parametrize("number", [0, 255, 1000])
def test_fabric_address_out_of_range(number: int) -> None:
    with pytest.raises(AnsibleFilterError, match="does not fit"):
        fabric_address("192.168.100.0/24", number)


def test_registered() -> None:
    assert set(FilterModule().filters()) == {
        "cx7_netdevs",
        "cx7_rdma_device",
        "fabric_subnet_conflicts",
        "fabric_address",
        "fabric_address_conflicts",
    }


def test_addresses_inside_their_subnets_pass() -> None:
    subnets = {"enp1s0f1np1": "192.168.100.0/24", "enP2p1s0f1np1": "192.168.101.0/24"}
    addresses = {"enp1s0f1np1": "192.168.100.11/24", "enP2p1s0f1np1": "192.168.101.11/24"}
    assert fabric_address_conflicts(addresses, subnets) == []


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("192.168.101.11/24", "is not in its subnet 192.168.100.0/24"),
        ("192.168.100.11/16", "is not in its subnet 192.168.100.0/24"),
        ("192.168.100.0/24", "network or broadcast"),
        ("192.168.100.255/24", "network or broadcast"),
        ("not-an-ip", "is not an address/prefix"),
    ],
)
def test_address_problems_are_named(address: str, problem: str) -> None:
    (found,) = fabric_address_conflicts(
        {"enp1s0f1np1": address}, {"enp1s0f1np1": "192.168.100.0/24"}
    )
    assert found.startswith("enp1s0f1np1: ")
    assert problem in found
