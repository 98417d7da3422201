"""Parsers of ibdev2netdev, ethtool and perftest output."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.filter.tool_output import (
    FilterModule,
    ethtool_link,
    ibdev2netdev_map,
    meminfo,
    perftest_report,
)

from .tool_output_samples import (
    ETHTOOL_DOWN,
    ETHTOOL_UP,
    IBDEV2NETDEV,
    IBDEV2NETDEV_VERBOSE,
    PERFTEST_GBITS,
)


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


def test_registered() -> None:
    assert set(FilterModule().filters()) == {
        "ibdev2netdev_map", "ethtool_link", "perftest_report", "meminfo",
    }  # fmt: skip


MEMINFO = """\
MemTotal:       24684136 kB
MemFree:        12501184 kB
MemAvailable:   18585280 kB
HugePages_Total:       0
Hugepagesize:       2048 kB
"""


def test_meminfo_gives_bytes_and_keeps_counts() -> None:
    values = meminfo(MEMINFO)
    assert values["MemTotal"] == 24684136 * 1024
    assert values["MemAvailable"] == 18585280 * 1024
    assert values["HugePages_Total"] == 0


@pytest.mark.parametrize("text", ["", "not meminfo", None])
def test_meminfo_refuses_what_is_not_meminfo(text: object) -> None:
    with pytest.raises(AnsibleFilterError, match="meminfo"):
        meminfo(text)
