"""Fabric filters: subnet conflicts, per-host addresses, and the checks of a host's links."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.filter.fabric import (
    FilterModule,
    check_link_layer,
    check_link_speed,
    check_ping,
    check_rdma_device,
    fabric_address,
    fabric_address_conflicts,
    fabric_checks,
    fabric_disagreements,
    fabric_host_addresses,
    fabric_host_number,
    fabric_ping_targets,
    fabric_subnet_conflicts,
)

from .tool_output_samples import ETHTOOL_DOWN, ETHTOOL_UP


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
        "fabric_subnet_conflicts",
        "fabric_address",
        "fabric_address_conflicts",
        "fabric_host_number",
        "fabric_host_addresses",
        "fabric_ping_targets",
        "fabric_checks",
        "fabric_disagreements",
    }


# The address plan of cx7_network for the sample inventories (what its vars gave before
# they called these filters): the lab's spark-1..3 and inventory/sparks' spark-1..2 in the
# sparks group, gh200-1 in an inventory without one (the host numbers itself alone).
PORT_1 = ["enp1s0f1np1", "enP2p1s0f1np1"]
SUBNETS_1 = {"enp1s0f1np1": "192.168.100.0/24", "enP2p1s0f1np1": "192.168.101.0/24"}
LAB = ["spark-1", "spark-2", "spark-3"]


@pytest.mark.parametrize(
    ("host", "hosts", "offset", "number", "expected"),
    [
        ("spark-1", LAB, 10, None, 11),
        ("spark-3", LAB, 10, None, 13),
        ("spark-2", LAB[:2], 10, "", 12),  # an empty number is no number
        ("gh200-1", ["gh200-1"], 10, None, 11),
        ("spark-2", LAB, 20, None, 22),
        ("spark-2", LAB, "3", "7", 7),  # inventory strings
        ("spark-1", LAB, 10, 5, 5),
        ("spark-1", ["spark-1"], 10, None, 11),  # a group the inventory lacks: the host alone
    ],
)
def test_fabric_host_number(
    host: str, hosts: list[str], offset: object, number: object, expected: int
) -> None:
    assert fabric_host_number(host, hosts, offset, number) == expected


def test_a_host_outside_the_numbered_hosts_is_named() -> None:
    # inventory/sparks' localhost (a Claude client) is no Spark; before: "'localhost' is not
    # in list"
    with pytest.raises(AnsibleFilterError, match=r"localhost is not among .*spark-1, spark-2"):
        fabric_host_number("localhost", LAB[:2], 10)


def test_a_host_number_that_is_no_number_is_named() -> None:
    with pytest.raises(AnsibleFilterError, match="'first' is not a whole number"):
        fabric_host_number("spark-1", LAB, 10, "first")


@pytest.mark.parametrize(
    ("netdevs", "subnets", "number", "own", "expected"),
    [
        (
            PORT_1,
            SUBNETS_1,
            13,
            {},
            {"enp1s0f1np1": "192.168.100.13/24", "enP2p1s0f1np1": "192.168.101.13/24"},
        ),
        (PORT_1[:1], SUBNETS_1, 11, {}, {"enp1s0f1np1": "192.168.100.11/24"}),  # link_local
        (
            PORT_1,
            SUBNETS_1,
            11,
            # an address of its own wins; one for a netdev not configured is left out
            {"enP2p1s0f1np1": "192.168.101.99/24", "enp1s0f0np0": "10.1.1.1/24"},
            {"enp1s0f1np1": "192.168.100.11/24", "enP2p1s0f1np1": "192.168.101.99/24"},
        ),
        (
            ["enp1s0f0np0", "enP2p1s0f0np0", *PORT_1],
            {
                "enp1s0f0np0": "10.0.0.0/24",
                "enP2p1s0f0np0": "10.0.1.0/24",
                "enp1s0f1np1": "10.0.2.0/24",
                "enP2p1s0f1np1": "10.0.3.0/24",
            },
            21,
            None,
            {
                "enp1s0f0np0": "10.0.0.21/24",
                "enP2p1s0f0np0": "10.0.1.21/24",
                "enp1s0f1np1": "10.0.2.21/24",
                "enP2p1s0f1np1": "10.0.3.21/24",
            },
        ),
    ],
    ids=["lab-spark-3", "first-half-only", "own-address", "both-ports-offset-20"],
)
def test_fabric_host_addresses(
    netdevs: list[str], subnets: dict, number: int, own: dict | None, expected: dict
) -> None:
    plan = fabric_host_addresses(netdevs, subnets, number, own)
    assert plan == expected
    assert list(plan) == netdevs


def test_a_host_number_beyond_the_subnet_fails_naming_the_variables_that_set_it() -> None:
    with pytest.raises(
        AnsibleFilterError, match=r"host number 300 does not fit in 192\.168\.100\.0/24"
    ) as failure:
        fabric_host_addresses(PORT_1, SUBNETS_1, 300)
    assert "cx7_network_host_number" in str(failure.value)
    assert "cx7_network_address_offset" in str(failure.value)


def test_a_netdev_without_subnet_or_address_is_named() -> None:
    with pytest.raises(AnsibleFilterError, match="enp1s0f0np0 has neither an address"):
        fabric_host_addresses(["enp1s0f0np0"], SUBNETS_1, 11)


def test_addresses_inside_their_subnets_pass() -> None:
    subnets = {"enp1s0f1np1": "192.168.100.0/24", "enP2p1s0f1np1": "192.168.101.0/24"}
    addresses = {"enp1s0f1np1": "192.168.100.11/24", "enP2p1s0f1np1": "192.168.101.11/24"}
    assert fabric_address_conflicts(addresses, subnets) == []


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("192.168.101.11/24", "is not in its subnet 192.168.100.0/24"),
        (
            "192.168.100.11/16",
            "has the prefix length /16, its subnet 192.168.100.0/24 /24;"
            " expected 192.168.100.11/24",
        ),
        # Without a prefix length, not "not in its subnet" (an address alone is a /32).
        (
            "192.168.100.11",
            "192.168.100.11 has no prefix length; expected an address/prefix of its subnet"
            " 192.168.100.0/24, such as 192.168.100.11/24",
        ),
        (
            "10.0.0.5",
            "has no prefix length; expected an address/prefix of its subnet"
            " 192.168.100.0/24, such as 192.168.100.1/24",
        ),
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


EXPECT = {
    "netdevs": ["enp1s0f1np1", "enP2p1s0f1np1"],
    "speed_mbps": 200000,
    "mtu": 9000,
    "ping_targets": [
        {"netdev": "enp1s0f1np1", "peer": "spark-2", "address": "192.168.100.12"},
        {"netdev": "enP2p1s0f1np1", "peer": "spark-2", "address": "192.168.101.12"},
    ],
}
ACTIVE = {"code": 4, "name": "ACTIVE"}
DOWN = {"code": 1, "name": "DOWN"}


def rdma_device(netdev: str, state: dict | None = None, link_layer: str = "Ethernet") -> dict:
    """One device as ``llmfleet.cluster.rdma_devices`` reports it (the fields judged)."""
    port = {"state": state or ACTIVE, "link_layer": link_layer}
    return {"netdevs": [netdev], "ports": {"1": port}}


RDMA = {
    "rocep1s0f1": rdma_device("enp1s0f1np1"),
    "roceP2p1s0f1": rdma_device("enP2p1s0f1np1"),
}


def ethtool_results(first: str = ETHTOOL_UP, second: str = ETHTOOL_UP) -> list[dict]:
    return [
        {"item": "enp1s0f1np1", "stdout": first, "rc": 0},
        {
            "item": "enP2p1s0f1np1",
            "stdout": second.replace("enp1s0f1np1", "enP2p1s0f1np1"),
            "rc": 0,
        },
    ]


def pings(rc_second: int = 0) -> list[dict]:
    loss = "2 packets transmitted, 0 received, 100% packet loss, time 1010ms"
    return [
        {"item": EXPECT["ping_targets"][0], "rc": 0, "stdout": "0% packet loss", "stderr": ""},
        {
            "item": EXPECT["ping_targets"][1],
            "rc": rc_second,
            "stdout": loss if rc_second else "0% packet loss",
            "stderr": "",
        },
    ]


def failed(findings: list[dict]) -> list[str]:
    return [f["msg"] for f in findings if not f["ok"]]


def test_healthy_fabric_has_no_failures() -> None:
    findings = fabric_checks(RDMA, ethtool_results(), pings(), EXPECT)
    assert failed(findings) == []
    assert len(findings) == 2 * 3 + 2  # rdma, link layer, speed per half; a ping per peer


def test_a_down_link_is_named_by_every_tool() -> None:
    rdma = {**RDMA, "roceP2p1s0f1": rdma_device("enP2p1s0f1np1", DOWN)}
    problems = failed(fabric_checks(rdma, ethtool_results(second=ETHTOOL_DOWN), pings(1), EXPECT))
    assert "enP2p1s0f1np1: RDMA device roceP2p1s0f1 port 1 DOWN, expected ACTIVE" in problems
    assert any(
        p.startswith("enP2p1s0f1np1: ethtool shows no speed, link detected no") for p in problems
    )
    assert (
        "enP2p1s0f1np1 -> spark-2 (192.168.101.12): ping -M do -s 8972 failed: "
        "2 packets transmitted, 0 received, 100% packet loss, time 1010ms"
    ) in problems


def test_wrong_speed_link_layer_and_missing_peer_address() -> None:
    slow = ETHTOOL_UP.replace("200000Mb/s", "100000Mb/s")
    rdma = {**RDMA, "rocep1s0f1": rdma_device("enp1s0f1np1", link_layer="InfiniBand")}
    expect = {
        **EXPECT,
        "ping_targets": [{"netdev": "enp1s0f1np1", "peer": "spark-3", "address": ""}],
    }
    problems = failed(fabric_checks(rdma, ethtool_results(first=slow), [], expect))
    assert any("ethtool shows 100000Mb/s" in p and "expected 200000Mb/s" in p for p in problems)
    assert any("link layer InfiniBand, expected Ethernet" in p for p in problems)
    assert any(
        p.startswith("enp1s0f1np1 -> spark-3: spark-3 has no IPv4 address on enp1s0f1np1")
        for p in problems
    )


# One check at a time: what fabric_checks combines.
def test_check_rdma_device_of_an_active_port() -> None:
    finding = check_rdma_device("enp1s0f1np1", "rocep1s0f1", RDMA["rocep1s0f1"])
    assert finding == {
        "what": "enp1s0f1np1 rdma",
        "ok": True,
        "msg": "enp1s0f1np1: RDMA device rocep1s0f1 port 1 ACTIVE, expected ACTIVE",
    }


def test_check_rdma_device_without_a_device() -> None:
    missing = check_rdma_device("enP2p1s0f1np1", None, {})
    assert missing["ok"] is False
    assert missing["msg"].startswith("enP2p1s0f1np1: no RDMA device backs it")
    assert "`rdma link`" in missing["msg"]


@pytest.mark.parametrize(
    ("ports", "shown"),
    [
        ({"1": {"state": DOWN}}, "port 1 DOWN"),
        ({"1": {"state": ACTIVE}, "2": {"state": DOWN}}, "port 1 ACTIVE, port 2 DOWN"),
        ({"1": {"state": None}}, "port 1 unknown"),
        ({}, "no port"),
    ],
)
def test_check_rdma_device_needs_every_port_active(ports: dict, shown: str) -> None:
    finding = check_rdma_device("enp1s0f1np1", "rocep1s0f1", {"ports": ports})
    assert finding["ok"] is False
    assert finding["msg"] == f"enp1s0f1np1: RDMA device rocep1s0f1 {shown}, expected ACTIVE"


def test_check_link_layer_without_a_device() -> None:
    finding = check_link_layer("enp1s0f1np1", None, {})
    assert finding["ok"] is False
    assert finding["msg"] == (
        "enp1s0f1np1: RDMA device (none) has link layer unknown, expected Ethernet (RoCE)"
    )


def test_check_link_layer_of_a_roce_device() -> None:
    finding = check_link_layer("enp1s0f1np1", "rocep1s0f1", RDMA["rocep1s0f1"])
    assert finding == {
        "what": "enp1s0f1np1 link layer",
        "ok": True,
        "msg": "enp1s0f1np1: RDMA device rocep1s0f1 has link layer Ethernet, "
        "expected Ethernet (RoCE)",
    }


@pytest.mark.parametrize(
    ("stdout", "speed", "ok"),
    [(ETHTOOL_UP, 200000, True), (ETHTOOL_UP, 100000, False), (ETHTOOL_DOWN, 200000, False)],
)
def test_check_link_speed(stdout: str, speed: int, ok: bool) -> None:
    finding = check_link_speed("enp1s0f1np1", stdout, speed)
    assert finding["what"] == "enp1s0f1np1 speed"
    assert finding["ok"] is ok


def test_check_ping_not_run_and_answered() -> None:
    target = EXPECT["ping_targets"][0]
    assert check_ping(target, {"rc": 0, "stdout": "0% packet loss"}, 8972)["ok"] is True
    not_run = check_ping(target, {}, 8972)
    assert not_run["ok"] is False
    assert not_run["msg"] == (
        "enp1s0f1np1 -> spark-2 (192.168.100.12): ping -M do -s 8972 failed: not run"
    )


def test_check_ping_of_a_peer_without_an_address_needs_no_result() -> None:
    finding = check_ping({"netdev": "enp1s0f1np1", "peer": "spark-3", "address": ""}, {}, 8972)
    assert finding["ok"] is False
    assert finding["msg"].startswith("enp1s0f1np1 -> spark-3: spark-3 has no IPv4 address")


def test_findings_come_per_netdev_then_speed_then_ping() -> None:
    findings = fabric_checks(RDMA, ethtool_results(), pings(), EXPECT)
    assert [f["what"] for f in findings] == [
        "enp1s0f1np1 rdma",
        "enp1s0f1np1 link layer",
        "enP2p1s0f1np1 rdma",
        "enP2p1s0f1np1 link layer",
        "enp1s0f1np1 speed",
        "enP2p1s0f1np1 speed",
        "enp1s0f1np1 -> spark-2",
        "enP2p1s0f1np1 -> spark-2",
    ]


def test_expect_without_its_keys_is_refused() -> None:
    with pytest.raises(AnsibleFilterError, match="expect needs netdevs, speed_mbps and mtu"):
        fabric_checks(RDMA, [], [], {"netdevs": []})


# Three Sparks as the lab's facts show them: spark-2's second half has MTU 1500, spark-3's
# first half has another primary address (the planned one is secondary), its second none.
def spark_facts(first: str, second: str | None, second_mtu: int = 9000) -> dict:
    return {
        "ansible_facts": {
            "enp1s0f1np1": {"mtu": 9000, "ipv4": {"address": first, "prefix": "24"}},
            "enP2p1s0f1np1": {"mtu": second_mtu}
            | ({"ipv4": {"address": second, "prefix": "24"}} if second else {}),
            "enp1s0f0np0": {"mtu": 1500},
        }
    }


HOSTVARS = {
    "spark-1": spark_facts("192.168.100.11", "192.168.101.11"),
    "spark-2": spark_facts("192.168.100.12", "192.168.101.12", second_mtu=1500),
    "spark-3": spark_facts("10.9.9.9", None),
    "localhost": {"ansible_facts": {}},
}


def test_fabric_ping_targets_netdev_by_netdev() -> None:
    assert fabric_ping_targets(PORT_1, ["spark-2", "spark-3"], HOSTVARS) == [
        {"netdev": "enp1s0f1np1", "peer": "spark-2", "address": "192.168.100.12"},
        {"netdev": "enp1s0f1np1", "peer": "spark-3", "address": "10.9.9.9"},
        {"netdev": "enP2p1s0f1np1", "peer": "spark-2", "address": "192.168.101.12"},
        {"netdev": "enP2p1s0f1np1", "peer": "spark-3", "address": ""},
    ]


def test_fabric_ping_targets_of_a_peer_without_facts_or_netdev() -> None:
    assert fabric_ping_targets(["enp1s0f0np0", "enp1s0f1np1"], ["localhost"], HOSTVARS) == [
        {"netdev": "enp1s0f0np0", "peer": "localhost", "address": ""},
        {"netdev": "enp1s0f1np1", "peer": "localhost", "address": ""},
    ]
    assert fabric_ping_targets(PORT_1, [], HOSTVARS) == []


def test_hosts_that_agree_have_no_disagreement() -> None:
    assert fabric_disagreements({"spark-1": 9000, "spark-2": 9000}, "mtu", "why") == []
    assert fabric_disagreements({"spark-1": 9000}, "mtu", "why") == []
    assert fabric_disagreements({}, "mtu", "why") == []


def test_a_disagreement_names_each_value_with_its_hosts() -> None:
    values = {"spark-1": 9000, "spark-2": 1500, "spark-3": 9000}
    assert fabric_disagreements(values, "cx7_network_mtu", "frames are dropped") == [
        "cx7_network_mtu differs between the hosts of the fabric (9000 on spark-1, spark-3;"
        " 1500 on spark-2); expected the same on every host: frames are dropped"
    ]
    plans = {
        "a": {"x": "10.0.0.0/24", "y": "10.0.1.0/24"},
        "b": {"y": "10.0.1.0/24", "x": "10.0.0.0/24"},
    }
    assert fabric_disagreements(plans, "subnets", "why") == []  # the same mapping, in any order
    plans["b"] = {"x": "10.0.9.0/24"}
    (sentence,) = fabric_disagreements(plans, "subnets", "why")
    assert '{"x": "10.0.9.0/24"} on b' in sentence
    with pytest.raises(AnsibleFilterError, match="host -> value"):
        fabric_disagreements([9000], "mtu", "why")
