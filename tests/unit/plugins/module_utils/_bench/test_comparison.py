"""module_utils/_bench/comparison: percent changes, verdicts and the comparison of two runs."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench import (
    comparison as _bench_comparison,
)

from tests.unit.plugins.bench_samples import (
    make_benchmark,
    make_scenario,
)


@pytest.mark.parametrize(
    ("previous", "current", "change"),
    [
        (100, 110, 10.0),
        (0.2, 0.1, -50.0),
        (0.212, 0.212, 0.0),
        (3, 0, -100.0),
        (75.0, 78.4, 4.53),
        (0, 5, None),
        (0, 0, None),
        (None, 5, None),
        (5, None, None),
        (None, None, None),
        (True, 2, None),  # a bool is not a number here
    ],
)
def test_percent_change(previous: Any, current: Any, change: float | None) -> None:
    assert _bench_comparison.percent_change(previous, current) == change


@pytest.mark.parametrize(
    ("previous", "current", "time_verdict", "rate_verdict"),
    [
        (100, 125, "worse", "better"),  # went up: slower for a time, faster for a rate
        (100, 80, "better", "worse"),
        (100, 102, "same", "same"),  # the 2% boundary is still "same"
        (100, 98, "same", "same"),
        (100, 102.1, "worse", "better"),
        (100, 97.9, "better", "worse"),
        (0.2, 0.2039, "same", "same"),
        (0, 0, "same", "same"),
        (0, 3, "worse", "better"),  # from zero every move counts
        (None, 3, None, None),
        (3, None, None, None),
    ],
)
def test_verdict_direction(
    previous: Any, current: Any, time_verdict: str | None, rate_verdict: str | None
) -> None:
    assert _bench_comparison.verdict(previous, current, _bench_comparison.LOWER) == time_verdict
    assert _bench_comparison.verdict(previous, current, _bench_comparison.HIGHER) == rate_verdict


@pytest.mark.parametrize(
    ("key", "better"),
    [
        ("ttft_p50", "lower"),
        ("ttft_p90", "lower"),
        ("ttft_p99", "lower"),
        ("latency_p50", "lower"),
        ("latency_p90", "lower"),
        ("latency_p99", "lower"),
        ("errors", "lower"),
        ("output_tokens_per_s", "higher"),
        ("decode_tokens_per_s", "higher"),
        ("requests_per_s", "higher"),
    ],
)
def test_metric_directions(key: str, better: str) -> None:
    assert {m[0]: m[4] for m in _bench_comparison.METRICS}[key] == better


def test_metric_value_reads_stats_and_tolerates_none() -> None:
    scenario = make_scenario("s", ttft=0.3)
    assert _bench_comparison.metric_value(scenario, "ttft_p50") == 0.3
    assert _bench_comparison.metric_value(scenario, "ttft_p90") == pytest.approx(0.36)
    assert _bench_comparison.metric_value(scenario, "errors") == 0
    assert _bench_comparison.metric_value(make_scenario("s", ttft=None), "ttft_p50") is None
    assert _bench_comparison.metric_value({"name": "s", "ttft_s": None}, "ttft_p99") is None
    assert _bench_comparison.metric_value({"name": "s"}, "requests_per_s") is None


# ---------------------------------------------------------------------------
# comparison
# ---------------------------------------------------------------------------
def test_compare_signs_and_verdicts() -> None:
    before = make_benchmark("2026-11-21T18:05:00Z", ttft=0.2, out_rate=75.0, errors=0)
    after = make_benchmark(ttft=0.25, out_rate=90.0, errors=2, latency=1.62)
    comparison = _bench_comparison.compare(before, after, "bench-20261121T180500Z.json")
    assert comparison["previous"] == "bench-20261121T180500Z.json"
    # the warm-up is not compared; both measured scenarios are, in the current run's order
    assert list(comparison["scenarios"]) == ["short_c4", "long_c8"]
    short = comparison["scenarios"]["short_c4"]
    assert list(short) == list(_bench_comparison.METRIC_KEYS)
    assert short["ttft_p50"] == {
        "previous": 0.2,
        "current": 0.25,
        "change_pct": 25.0,
        "verdict": "worse",
    }
    assert short["output_tokens_per_s"]["change_pct"] == 20.0
    assert short["output_tokens_per_s"]["verdict"] == "better"
    assert short["errors"] == {"previous": 0, "current": 2, "change_pct": None, "verdict": "worse"}
    assert short["latency_p50"]["verdict"] == "same"
    assert all(v["verdict"] == "same" for v in comparison["scenarios"]["long_c8"].values())


def test_compare_only_scenarios_in_both_runs_and_none_values() -> None:
    before = make_benchmark("2026-11-21T18:05:00Z")
    before["scenarios"] = [s for s in before["scenarios"] if s["name"] != "long_c8"]
    before["scenarios"].append(make_scenario("gone_c2", concurrency=2))
    after = make_benchmark(ttft=None, latency=None, out_rate=None, decode_rate=None, errors=16)
    comparison = _bench_comparison.compare(before, after, "bench-x.json")
    assert list(comparison["scenarios"]) == ["short_c4"]
    short = comparison["scenarios"]["short_c4"]
    assert short["ttft_p99"]["current"] is None
    assert short["ttft_p99"]["change_pct"] is None
    assert short["ttft_p99"]["verdict"] is None
    assert short["errors"]["verdict"] == "worse"
    assert _bench_comparison.verdict_counts(short) == {"better": 0, "worse": 1, "same": 1}


def test_compare_without_previous_run() -> None:
    assert _bench_comparison.compare(None, make_benchmark()) == {"previous": None, "scenarios": {}}


def test_compare_does_not_match_a_warmup_to_a_measured_scenario() -> None:
    before = make_benchmark("2026-11-21T18:05:00Z")
    after = make_benchmark()
    after["scenarios"][0]["warmup"] = False  # "warmup" measured now, a warm-up before
    assert "warmup" not in _bench_comparison.compare(before, after)["scenarios"]
