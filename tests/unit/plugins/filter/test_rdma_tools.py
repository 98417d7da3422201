"""Parsers of ibdev2netdev, ethtool and perftest output, and the fabric judgement."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.filter.rdma_tools import (
    FilterModule,
    ethtool_link,
    fabric_checks,
    ibdev2netdev_map,
    perftest_report,
    rdma_verdict,
)

IBDEV2NETDEV = """\
roceP2p1s0f0 port 1 ==> enP2p1s0f0np0 (Down)
roceP2p1s0f1 port 1 ==> enP2p1s0f1np1 (Up)
rocep1s0f0 port 1 ==> enp1s0f0np0 (Down)
rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)
"""
IBDEV2NETDEV_VERBOSE = (
    "0000:01:00.1 rocep1s0f1 (MT4129 - NVD0000000087) NVIDIA ConnectX-7 fw 28.45.4028 "
    "port 1 (ACTIVE) ==> enp1s0f1np1 (Up)\n"
)
ETHTOOL_UP = """\
Settings for enp1s0f1np1:
\tSupported ports: [ FIBRE ]
\tSpeed: 200000Mb/s
\tDuplex: Full
\tLink detected: yes
"""
ETHTOOL_DOWN = """\
Settings for enp1s0f1np1:
\tSpeed: Unknown!
\tDuplex: Unknown! (255)
\tLink detected: no
"""
PERFTEST_GBITS = """\
---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF\t\tDevice         : rocep1s0f1
 Number of qps   : 4\t\tTransport type : IB
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 8388608    15870            0.00               106.51             0.001587
---------------------------------------------------------------------------------------
"""


def test_ibdev2netdev_plain() -> None:
    mapping = ibdev2netdev_map(IBDEV2NETDEV)
    assert mapping["enp1s0f1np1"] == {"device": "rocep1s0f1", "port": 1, "state": "Up"}
    assert mapping["enP2p1s0f0np0"]["state"] == "Down"
    assert len(mapping) == 4


def test_ibdev2netdev_verbose() -> None:
    assert ibdev2netdev_map(IBDEV2NETDEV_VERBOSE) == {
        "enp1s0f1np1": {"device": "rocep1s0f1", "port": 1, "state": "Up"}
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (ETHTOOL_UP, {"speed_mbps": 200000, "link_detected": True}),
        (ETHTOOL_DOWN, {"speed_mbps": None, "link_detected": False}),
        ("", {"speed_mbps": None, "link_detected": False}),
    ],
)
def test_ethtool_link(text: str, expected: dict) -> None:
    assert ethtool_link(text) == expected


def test_perftest_report_in_gbits() -> None:
    report = perftest_report(PERFTEST_GBITS)
    assert report["bytes"] == 8388608
    assert report["iterations"] == 15870
    assert report["average"] == 106.51
    assert report["average_gbits"] == 106.51
    assert report["unit"] == "Gb/sec"


def test_perftest_report_in_megabytes_is_converted() -> None:
    text = PERFTEST_GBITS.replace("Gb/sec", "MB/sec").replace("106.51", "13313.75")
    assert perftest_report(text)["average_gbits"] == pytest.approx(106.51, abs=0.01)


def test_perftest_without_report_names_the_tail() -> None:
    with pytest.raises(AnsibleFilterError, match=r"Couldn't connect to 192\.168\.100\.12:18515"):
        perftest_report(" Couldn't connect to 192.168.100.12:18515\n")


EXPECT = {
    "netdevs": ["enp1s0f1np1", "enP2p1s0f1np1"],
    "speed_mbps": 200000,
    "mtu": 9000,
    "ping_targets": [
        {"netdev": "enp1s0f1np1", "peer": "spark-2", "address": "192.168.100.12"},
        {"netdev": "enP2p1s0f1np1", "peer": "spark-2", "address": "192.168.101.12"},
    ],
}
RDMA = {
    "rocep1s0f1": {"netdevs": ["enp1s0f1np1"], "ports": {"1": {"link_layer": "Ethernet"}}},
    "roceP2p1s0f1": {"netdevs": ["enP2p1s0f1np1"], "ports": {"1": {"link_layer": "Ethernet"}}},
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
    findings = fabric_checks(IBDEV2NETDEV, ethtool_results(), RDMA, pings(), EXPECT)
    assert failed(findings) == []
    assert len(findings) == 2 * 3 + 2  # rdma, link layer, speed per half; a ping per peer


def test_a_down_link_is_named_by_every_tool() -> None:
    text = IBDEV2NETDEV.replace("enP2p1s0f1np1 (Up)", "enP2p1s0f1np1 (Down)")
    problems = failed(
        fabric_checks(text, ethtool_results(second=ETHTOOL_DOWN), RDMA, pings(1), EXPECT)
    )
    assert "enP2p1s0f1np1: ibdev2netdev shows roceP2p1s0f1 port 1 Down, expected Up" in problems
    assert any(
        p.startswith("enP2p1s0f1np1: ethtool shows no speed, link detected no") for p in problems
    )
    assert (
        "enP2p1s0f1np1 -> spark-2 (192.168.101.12): ping -M do -s 8972 failed: "
        "2 packets transmitted, 0 received, 100% packet loss, time 1010ms"
    ) in problems


def test_wrong_speed_link_layer_and_missing_peer_address() -> None:
    slow = ETHTOOL_UP.replace("200000Mb/s", "100000Mb/s")
    rdma = {
        **RDMA,
        "rocep1s0f1": {"netdevs": ["enp1s0f1np1"], "ports": {"1": {"link_layer": "InfiniBand"}}},
    }
    expect = {
        **EXPECT,
        "ping_targets": [{"netdev": "enp1s0f1np1", "peer": "spark-3", "address": ""}],
    }
    problems = failed(fabric_checks(IBDEV2NETDEV, ethtool_results(first=slow), rdma, [], expect))
    assert any("ethtool shows 100000Mb/s" in p and "expected 200000Mb/s" in p for p in problems)
    assert any("link layer InfiniBand, expected Ethernet" in p for p in problems)
    assert any(
        p.startswith("enp1s0f1np1 -> spark-3: spark-3 has no IPv4 address on enp1s0f1np1")
        for p in problems
    )


def test_registered() -> None:
    assert set(FilterModule().filters()) == {
        "ibdev2netdev_map",
        "ethtool_link",
        "perftest_report",
        "fabric_checks",
        "rdma_verdict",
    }


RAIL_A = {
    "netdev": "enp1s0f1np1",
    "device": "rocep1s0f1",
    "port": 18515,
    "server_address": "192.168.100.12",
}
RAIL_B = {
    "netdev": "enP2p1s0f1np1",
    "device": "roceP2p1s0f1",
    "port": 18516,
    "server_address": "192.168.101.12",
}


def report(gbits: float) -> str:
    return PERFTEST_GBITS.replace("106.51", f"{gbits:.2f}")


def measurement(test: str, rails: list[dict], outputs: list[str]) -> dict:
    return {
        "test": test,
        "client": "spark-1",
        "server": "spark-2",
        "rails": rails,
        "clients": outputs,
        "servers": outputs,
    }


def test_healthy_rails_and_aggregate_pass() -> None:
    verdict = rdma_verdict(
        [
            measurement("rail", [RAIL_A], [report(106.2)]),
            measurement("rail", [RAIL_B], [report(105.8)]),
            measurement("aggregate", [RAIL_A, RAIL_B], [report(98.0), report(97.5)]),
        ],
        90,
        175,
    )
    assert verdict["passed"] is True
    assert verdict["failures"] == []
    assert verdict["aggregates"] == [
        {
            "client": "spark-1",
            "server": "spark-2",
            "rails": "enp1s0f1np1+enP2p1s0f1np1",
            "gbits": 195.5,
        }
    ]
    assert [r["gbits"] for r in verdict["results"]] == [106.2, 105.8, 98.0, 97.5]
    assert verdict["results"][0]["device"] == "rocep1s0f1"
    assert "rail enp1s0f1np1 spark-1 -> spark-2: 106.20 Gb/s" in verdict["summary"]


def test_slow_rail_is_named_with_its_number() -> None:
    verdict = rdma_verdict([measurement("rail", [RAIL_B], [report(40.0)])], 90, 175)
    assert verdict["passed"] is False
    assert verdict["failures"] == [
        "rail enP2p1s0f1np1 (roceP2p1s0f1) spark-1 -> spark-2: 40.00 Gb/s, "
        "below the 90 Gb/s floor per rail"
    ]


def test_low_aggregate_and_missing_report() -> None:
    verdict = rdma_verdict(
        [
            measurement("aggregate", [RAIL_A, RAIL_B], [report(80.0), report(80.0)]),
            measurement("rail", [RAIL_A], [" Couldn't connect to 192.168.100.12:18515"]),
        ],
        90,
        175,
    )
    assert (
        "aggregate enp1s0f1np1+enP2p1s0f1np1 spark-1 -> spark-2: 160.00 Gb/s, below the "
        "175 Gb/s floor for both rails together"
    ) in verdict["failures"]
    assert any(
        f.startswith("rail enp1s0f1np1 (rocep1s0f1) spark-1 -> spark-2: ib_write_bw gave no report")
        and "Couldn't connect" in f
        for f in verdict["failures"]
    )


def test_no_measurement_does_not_pass() -> None:
    assert rdma_verdict([], 90, 175)["passed"] is False
