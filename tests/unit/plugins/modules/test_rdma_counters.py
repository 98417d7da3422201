"""modules/rdma_counters: counters in bytes, the sampler, in-process and through `ansible`."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._rdma import (
    counters as _rdma_counters,
)
from ansible_collections.llmfleet.cluster.plugins.modules import rdma_counters

from tests.unit.plugins.conftest import SparkSysfs, ansible_adhoc

RunModule = Callable[..., tuple[int, dict[str, Any]]]


def test_reads_every_counter_data_in_bytes(spark: SparkSysfs, run_module: RunModule) -> None:
    rc, result = run_module(rdma_counters, {"device": "rocep1s0f1", "sysfs_root": str(spark.root)})
    assert rc == 0, result
    assert result["changed"] is False
    assert result["device"] == "rocep1s0f1"
    assert result["port"] == 1
    assert len(result["counters"]) == 21
    assert result["counters_raw"]["port_xmit_data"] == 50_053_280
    assert result["counters"]["port_xmit_data"] == 200_213_120
    assert result["counters_raw"]["port_rcv_data"] == 2_100
    assert result["counters"]["port_rcv_data"] == 8_400
    assert result["counters"]["port_xmit_packets"] == 24_671
    assert result["counters"]["link_downed"] == 1
    assert result["unreadable"] == []
    assert "4-byte words" in result["unit_note"]
    for key in ("rates", "delta", "sample_seconds", "elapsed_seconds"):
        assert key not in result


def test_counter_subset(spark: SparkSysfs, run_module: RunModule) -> None:
    rc, result = run_module(
        rdma_counters,
        {
            "device": "rocep1s0f1",
            "sysfs_root": str(spark.root),
            "counters": ["port_rcv_data", "link_downed"],
        },
    )
    assert rc == 0, result
    assert result["counters"] == {"port_rcv_data": 8_400, "link_downed": 1}
    assert result["counters_raw"] == {"port_rcv_data": 2_100, "link_downed": 1}


@pytest.fixture
def scripted_clock(monkeypatch: pytest.MonkeyPatch, spark: SparkSysfs) -> Iterator[None]:
    """Sleep bumps the counters (250 MB sent in 2 s); the clock says exactly 2 s passed."""
    ticks = iter([50.0, 52.0])

    def fake_sleep(seconds: float) -> None:
        assert seconds == 2.0
        spark.set_counter("rocep1s0f1", "port_xmit_data", 50_053_280 + 62_500_000)
        spark.set_counter("rocep1s0f1", "port_rcv_data", 2_100 + 250)

    monkeypatch.setattr(_rdma_counters, "_sleep", fake_sleep)
    monkeypatch.setattr(_rdma_counters, "_clock", lambda: next(ticks))
    yield


@pytest.mark.usefixtures("scripted_clock")
def test_sampler_returns_rates(spark: SparkSysfs, run_module: RunModule) -> None:
    rc, result = run_module(
        rdma_counters,
        {
            "device": "rocep1s0f1",
            "sysfs_root": str(spark.root),
            "sample_seconds": 2,
            "counters": ["port_xmit_data", "port_rcv_data", "link_downed"],
        },
    )
    assert rc == 0, result
    assert result["sample_seconds"] == 2.0
    assert result["elapsed_seconds"] == 2.0
    assert result["delta"] == {
        "port_xmit_data": 250_000_000,
        "port_rcv_data": 1_000,
        "link_downed": 0,
    }
    assert result["rates"] == {
        "port_xmit_data": 125_000_000.0,
        "port_rcv_data": 500.0,
        "link_downed": 0.0,
        "xmit_gbits_per_second": 1.0,
        "rcv_gbits_per_second": 4e-06,
    }
    # counters are the second reading
    assert result["counters"]["port_xmit_data"] == (50_053_280 + 62_500_000) * 4


@pytest.mark.usefixtures("scripted_clock")
def test_sampler_in_check_mode(spark: SparkSysfs, run_module: RunModule) -> None:
    rc, result = run_module(
        rdma_counters,
        {
            "device": "rocep1s0f1",
            "sysfs_root": str(spark.root),
            "sample_seconds": 2.0,
            "_ansible_check_mode": True,
        },
    )
    assert rc == 0, result
    assert result["changed"] is False
    assert result["rates"]["xmit_gbits_per_second"] == 1.0


def test_counter_going_backwards_warns(
    spark: SparkSysfs, run_module: RunModule, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        _rdma_counters,
        "_sleep",
        lambda _s: spark.set_counter("rocep1s0f1", "port_xmit_data", 7),
    )
    rc, result = run_module(
        rdma_counters,
        {
            "device": "rocep1s0f1",
            "sysfs_root": str(spark.root),
            "sample_seconds": 0.01,
            "counters": ["port_xmit_data"],
        },
    )
    assert rc == 0, result
    assert result["delta"] == {"port_xmit_data": None}
    assert result["rates"]["xmit_gbits_per_second"] is None
    # ansible-core 2.19 modules emit structured warnings; older ones plain strings
    assert "port_xmit_data went backwards" in json.dumps(result["warnings"])


@pytest.mark.parametrize("seconds", [-1, -0.5])
def test_negative_sample_seconds_is_rejected(
    spark: SparkSysfs, run_module: RunModule, seconds: float
) -> None:
    rc, result = run_module(
        rdma_counters,
        {"device": "rocep1s0f1", "sysfs_root": str(spark.root), "sample_seconds": seconds},
    )
    assert rc == 1
    assert "sample_seconds must be 0" in result["msg"]
    assert str(float(seconds)) in result["msg"]


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        ({"device": "mlx5_0"}, ["mlx5_0", "present RDMA devices: rocep1s0f0, rocep1s0f1"]),
        ({"device": "rocep1s0f1", "port": 2}, ["port 2", "present ports: 1"]),
        (
            {"device": "rocep1s0f1", "counters": ["port_xmit_bytes"]},
            ["port_xmit_bytes", "port_xmit_data"],
        ),
    ],
)
def test_missing_things_fail_clearly(
    spark: SparkSysfs, run_module: RunModule, args: dict[str, Any], needles: list[str]
) -> None:
    rc, result = run_module(rdma_counters, {"sysfs_root": str(spark.root), **args})
    assert rc == 1
    for needle in needles:
        assert needle in result["msg"]


def test_device_is_required(run_module: RunModule) -> None:
    rc, result = run_module(rdma_counters, {})
    assert rc == 1
    assert "device" in result["msg"]


def test_sysfs_root_falls_back_to_the_environment(
    spark: SparkSysfs, run_module: RunModule, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLMFLEET_SYSFS_ROOT", str(spark.root))
    rc, result = run_module(rdma_counters, {"device": "roceP2p1s0f1"})
    assert rc == 0, result
    assert result["sysfs_root"] == str(spark.root)


def test_end_to_end_read(spark: SparkSysfs) -> None:
    status, result = ansible_adhoc(
        "llmfleet.cluster.rdma_counters", f"device=rocep1s0f1 sysfs_root={spark.root}"
    )
    assert status == "SUCCESS", result
    assert result["changed"] is False
    assert result["counters"]["port_xmit_data"] == 200_213_120
    assert result["counters_raw"]["port_xmit_data"] == 50_053_280


class CounterPump(threading.Thread):
    """Keeps port_xmit_data at ``start + words_per_second * elapsed`` (real traffic's shape)."""

    def __init__(self, spark: SparkSysfs, words_per_second: int) -> None:
        super().__init__(daemon=True)
        self.spark = spark
        self.words_per_second = words_per_second
        self.base = spark.counter("rocep1s0f1", "port_xmit_data")
        self.stop = threading.Event()
        self.written: list[int] = [self.base]

    @property
    def writes(self) -> int:
        return len(self.written) - 1

    def run(self) -> None:
        t0 = time.monotonic()
        while not self.stop.wait(0.01):
            value = self.base + int((time.monotonic() - t0) * self.words_per_second)
            self.spark.set_counter("rocep1s0f1", "port_xmit_data", value)
            self.written.append(value)


def test_end_to_end_sampler_sees_traffic(spark: SparkSysfs) -> None:
    words_per_second = 125_000_000  # 500 MB/s = 4 Gb/s
    pump = CounterPump(spark, words_per_second)
    pump.start()
    try:
        status, result = ansible_adhoc(
            "llmfleet.cluster.rdma_counters",
            f"device=rocep1s0f1 sysfs_root={spark.root} sample_seconds=1.0 "
            "counters=port_xmit_data,port_rcv_data",
        )
    finally:
        pump.stop.set()
        pump.join(timeout=5)
    assert status == "SUCCESS", result
    assert pump.writes > 50
    assert result["sample_seconds"] == 1.0
    assert result["elapsed_seconds"] >= 1.0
    delta = result["delta"]["port_xmit_data"]
    rate = result["rates"]["port_xmit_data"]
    assert delta > 0
    assert delta % 4 == 0
    assert result["delta"]["port_rcv_data"] == 0
    assert rate == pytest.approx(delta / result["elapsed_seconds"], rel=1e-6)
    # The delta is the difference of two values the pump wrote, in bytes (4 per word). Not
    # the pump's nominal rate: on a busy 2-core machine the pump's thread can miss its ticks
    # for a good part of the second (281 MB/s read against 500 written, a full make test).
    written = set(pump.written)
    assert any(value + delta // 4 in written for value in pump.written), (delta, pump.written)
    # and not far above the pump's rate (the first read's value may be a few ticks old)
    assert 0 < rate <= words_per_second * 4 * 1.5
    assert result["rates"]["xmit_gbits_per_second"] == pytest.approx(rate * 8 / 1e9, rel=1e-6)
    assert result["rates"]["rcv_gbits_per_second"] == 0.0
