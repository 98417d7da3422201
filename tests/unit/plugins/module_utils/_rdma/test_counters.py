"""module_utils/_rdma/counters: counters in bytes, rates, and the sampler on the fixture Spark."""

from __future__ import annotations

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._rdma import (
    counters as _rdma_counters,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._rdma import sysfs as rs

from tests.unit.plugins.conftest import (
    SparkSysfs,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"port_xmit_data": 10, "port_rcv_data": 3}, {"port_xmit_data": 40, "port_rcv_data": 12}),
        ({"port_xmit_packets": 10, "link_downed": 2}, {"port_xmit_packets": 10, "link_downed": 2}),
        ({}, {}),
    ],
)
def test_counters_in_bytes(raw: dict, expected: dict) -> None:
    assert _rdma_counters.counters_in_bytes(raw) == expected


def test_compute_rates() -> None:
    before = {"port_xmit_data": 1_000, "port_rcv_data": 0, "port_xmit_packets": 10}
    after = {"port_xmit_data": 2_501_000, "port_rcv_data": 500, "port_xmit_packets": 30}
    delta, rates = _rdma_counters.compute_rates(before, after, 0.5)
    assert delta == {"port_xmit_data": 2_500_000, "port_rcv_data": 500, "port_xmit_packets": 20}
    assert rates["port_xmit_data"] == 5_000_000.0
    assert rates["port_xmit_packets"] == 40.0
    assert rates["xmit_gbits_per_second"] == pytest.approx(0.04)
    assert rates["rcv_gbits_per_second"] == pytest.approx(8e-6)


def test_compute_rates_counter_reset_is_null_and_gbits_follow() -> None:
    delta, rates = _rdma_counters.compute_rates({"port_xmit_data": 100}, {"port_xmit_data": 4}, 1.0)
    assert delta == {"port_xmit_data": None}
    assert rates == {"port_xmit_data": None, "xmit_gbits_per_second": None}


def test_compute_rates_without_data_counters_has_no_gbits() -> None:
    _delta, rates = _rdma_counters.compute_rates({"link_downed": 0}, {"link_downed": 1}, 2.0)
    assert rates == {"link_downed": 0.5}


def test_compute_rates_rejects_zero_elapsed() -> None:
    with pytest.raises(ValueError, match="positive"):
        _rdma_counters.compute_rates({}, {}, 0)


def test_read_counters_every_file(spark: SparkSysfs) -> None:
    values, unreadable = _rdma_counters.read_counters(str(spark.root), "rocep1s0f1", 1)
    assert unreadable == []
    assert len(values) == 21
    assert values["port_xmit_data"] == 50_053_280
    assert _rdma_counters.counters_in_bytes(values)["port_xmit_data"] == 200_213_120
    assert _rdma_counters.counters_in_bytes(values)["port_xmit_packets"] == 24_671


def test_read_counters_subset_and_unknown_name(spark: SparkSysfs) -> None:
    values, _unreadable = _rdma_counters.read_counters(
        str(spark.root), "rocep1s0f1", 1, ["port_rcv_data", "link_downed"]
    )
    assert values == {"port_rcv_data": 2_100, "link_downed": 1}
    with pytest.raises(rs.RdmaSysfsError) as info:
        _rdma_counters.read_counters(str(spark.root), "rocep1s0f1", 1, ["port_xmit_bytes"])
    assert "port_xmit_bytes" in str(info.value)
    assert "port_xmit_data" in info.value.available


def test_read_counters_reports_unreadable_files(spark: SparkSysfs) -> None:
    cdir = spark.port_dir("rocep1s0f1") / "counters"
    (cdir / "symbol_error").unlink()
    (cdir / "symbol_error").mkdir()  # reads like EINVAL
    (cdir / "port_xmit_wait").write_text("garbage\n")
    values, unreadable = _rdma_counters.read_counters(str(spark.root), "rocep1s0f1", 1)
    assert unreadable == ["port_xmit_wait", "symbol_error"]
    assert "symbol_error" not in values


def test_sampler_reads_twice_and_computes_rates(spark: SparkSysfs) -> None:
    clock = iter([100.0, 102.0])

    def fake_sleep(seconds: float) -> None:
        assert seconds == 2.0
        # 250 MB of transmit data (in 4-byte words) and 1000 packets during the sample
        spark.set_counter("rocep1s0f1", "port_xmit_data", 50_053_280 + 62_500_000)
        spark.set_counter("rocep1s0f1", "port_xmit_packets", 24_671 + 1_000)

    sample = _rdma_counters.sample_counters(
        str(spark.root),
        "rocep1s0f1",
        1,
        2.0,
        ["port_xmit_data", "port_rcv_data", "port_xmit_packets"],
        sleep=fake_sleep,
        clock=lambda: next(clock),
    )
    assert sample["elapsed_seconds"] == 2.0
    assert sample["first"]["port_xmit_data"] == 50_053_280
    assert sample["second"]["port_xmit_data"] == 112_553_280
    assert sample["delta"] == {
        "port_xmit_data": 250_000_000,
        "port_rcv_data": 0,
        "port_xmit_packets": 1_000,
    }
    assert sample["rates"]["port_xmit_data"] == 125_000_000.0
    assert sample["rates"]["xmit_gbits_per_second"] == pytest.approx(1.0)
    assert sample["rates"]["rcv_gbits_per_second"] == 0.0
    assert sample["rates"]["port_xmit_packets"] == 500.0


@pytest.mark.parametrize("seconds", [0, -1.0])
def test_sampler_needs_a_positive_interval(spark: SparkSysfs, seconds: float) -> None:
    with pytest.raises(ValueError, match="sample_seconds"):
        _rdma_counters.sample_counters(str(spark.root), "rocep1s0f1", 1, seconds)
