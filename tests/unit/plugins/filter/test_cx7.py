"""CX7 filters: netdev and RDMA device names; interfaces and drift from gathered facts."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.filter.cx7 import (
    CX7_NETDEV_PATTERN,
    FilterModule,
    cx7_fabric_interface,
    cx7_interfaces,
    cx7_netdevs,
    cx7_rdma_device,
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
    ("interface", "ports", "expected"),
    [
        ("", [1], "enp1s0f1np1"),
        (None, [0, 1], "enp1s0f0np0"),
        ("enP2p1s0f1np1", [1], "enP2p1s0f1np1"),
        ("eth1", [1], "eth1"),
    ],
)
def test_cx7_fabric_interface_is_the_one_set_else_the_first_half_of_the_first_port(
    interface: str | None, ports: list[int], expected: str
) -> None:
    assert cx7_fabric_interface(interface, ports) == expected


def test_cx7_fabric_interface_unset_with_no_port_is_refused() -> None:
    with pytest.raises(AnsibleFilterError, match="non-empty list"):
        cx7_fabric_interface("", [])


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


@pytest.mark.parametrize(
    ("name", "is_cx7"),
    [
        ("enp1s0f1np1", True),
        ("enP2p1s0f1np1", True),
        ("enp1s0f0np0", True),
        ("enP2p1s0f0np0", True),
        ("enP7s7", False),  # the Spark's 10GbE port
        ("eth0", False),
        ("lo", False),
        ("wlP9s9", False),
    ],
)
def test_netdev_pattern(name: str, is_cx7: bool) -> None:
    assert bool(CX7_NETDEV_PATTERN.match(name)) is is_cx7


def test_summarizes_cx7_interfaces_sorted() -> None:
    facts = {
        "interfaces": ["lo", "enp1s0f1np1", "eth0", "enP2p1s0f1np1"],
        "enp1s0f1np1": {
            "active": True,
            "mtu": 9000,
            "ipv4": {"address": "192.168.100.11", "prefix": "24"},
            "ipv6": [],
        },
        "enP2p1s0f1np1": {"active": False, "mtu": 1500},
        "eth0": {"active": True, "mtu": 1500},
    }
    result = cx7_interfaces(facts)
    assert [entry["name"] for entry in result] == ["enP2p1s0f1np1", "enp1s0f1np1"]
    assert result[1]["ipv4"] == "192.168.100.11/24"
    assert result[1]["summary"] == "enp1s0f1np1 up mtu 9000 192.168.100.11/24"
    assert result[0]["summary"] == "enP2p1s0f1np1 DOWN mtu 1500 no IPv4"


def test_no_interfaces_gathered() -> None:
    assert cx7_interfaces({}) == []


def test_registered_name() -> None:
    assert FilterModule().filters()["cx7_interfaces"] is cx7_interfaces


def test_registered() -> None:
    assert set(FilterModule().filters()) == {
        "cx7_netdevs",
        "cx7_fabric_interface",
        "cx7_rdma_device",
        "cx7_interfaces",
        "cx7_drift",
    }


PLANNED = {"enp1s0f1np1": "192.168.100.11/24", "enP2p1s0f1np1": "192.168.101.11/24"}


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        (
            {
                "enp1s0f1np1": {"mtu": 9000, "ipv4": {"address": "192.168.100.11"}},
                "enP2p1s0f1np1": {
                    "mtu": 9000,
                    "ipv4": {"address": "169.254.3.4"},
                    "ipv4_secondaries": [{"address": "192.168.101.11"}],
                },
            },
            [],
        ),
        (
            {
                "enp1s0f1np1": {"mtu": 1500, "ipv4": {"address": "192.168.100.11"}},
                "enP2p1s0f1np1": {"mtu": 9000},
            },
            [
                "enp1s0f1np1: MTU 1500, planned 9000",
                "enP2p1s0f1np1: no 192.168.101.11, planned 192.168.101.11/24",
            ],
        ),
        ({"enp1s0f1np1": {"mtu": 9000, "ipv4": {"address": "192.168.100.11"}}}, []),
    ],
    ids=["matches", "mtu-and-address", "missing-netdev-not-judged"],
)
def test_drift_names_each_difference(facts: dict, expected: list[str]) -> None:
    assert FilterModule().filters()["cx7_drift"](facts, list(PLANNED), 9000, PLANNED) == expected


def test_drift_without_addresses_judges_the_mtu_only() -> None:
    facts = {"enp1s0f1np1": {"mtu": 9000}}
    assert FilterModule().filters()["cx7_drift"](facts, ["enp1s0f1np1"], "9000") == []
