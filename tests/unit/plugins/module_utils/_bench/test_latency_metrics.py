"""module_utils/_bench/latency_metrics: percentiles, summaries and a scenario's metrics."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench import (
    latency_metrics as _latency_metrics,
)


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([1.0, 2.0, 3.0, 4.0], 50, 2.5),
        ([1.0, 2.0, 3.0, 4.0], 90, 3.7),  # rank 2.7: 3 + 0.7 * (4 - 3)
        ([1.0, 2.0, 3.0, 4.0], 99, 3.97),
        ([4.0, 1.0, 3.0, 2.0], 90, 3.7),  # order does not matter
        ([10.0, 20.0], 90, 19.0),
        ([10.0, 20.0], 0, 10.0),
        ([10.0, 20.0], 100, 20.0),
        ([7.0], 99, 7.0),
        ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 110.0], 90, 10.0),
        ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 110.0], 99, 100.0),
        ([0.1, 0.2, 0.3], 50, 0.2),
    ],
)
def test_percentile_interpolates_linearly(values: list[float], q: float, expected: float) -> None:
    assert _latency_metrics.percentile(values, q) == pytest.approx(expected)


def test_percentile_of_nothing_is_none() -> None:
    assert _latency_metrics.percentile([], 50) is None
    with pytest.raises(ValueError, match="between 0 and 100"):
        _latency_metrics.percentile([1.0], 101)


def test_summarize() -> None:
    assert _latency_metrics.summarize([0.3, 0.1, 0.2, 0.4]) == {
        "mean": 0.25,
        "p50": 0.25,
        "p90": 0.37,
        "p99": 0.397,
        "min": 0.1,
        "max": 0.4,
    }
    assert _latency_metrics.summarize([]) == dict.fromkeys(
        ("mean", "p50", "p90", "p99", "min", "max")
    )


def record(
    start: float = 0.0,
    first: float | None = 0.1,
    end: float = 1.0,
    out: int = 10,
    prompt: int | None = 100,
    error: str | None = None,
) -> dict[str, Any]:
    return {
        "ok": error is None,
        "error": error,
        "status": 200 if error is None else 500,
        "start": start,
        "first": first,
        "end": end,
        "output_tokens": out,
        "prompt_tokens": prompt,
        "chunks": out,
    }


def test_metrics_over_synthetic_records() -> None:
    records = [
        record(start=0.0, first=0.1, end=1.0, out=10),  # tpot 0.1, 9 tokens in 0.9 s
        record(start=0.5, first=0.8, end=2.8, out=11),  # tpot 0.2, 10 tokens in 2.0 s
        record(start=1.0, first=None, end=1.5, error="HTTP 500: boom"),
    ]
    metrics = _latency_metrics.scenario_metrics(records, 4.0)
    assert metrics["ok"] == 2
    assert metrics["errors"] == 1
    assert metrics["error_samples"] == ["HTTP 500: boom"]
    assert metrics["duration_s"] == 4.0
    assert metrics["requests_per_s"] == 0.5
    assert metrics["ttft_s"] == {
        "mean": 0.2,
        "p50": 0.2,
        "p90": 0.28,
        "p99": 0.298,
        "min": 0.1,
        "max": 0.3,
    }
    assert metrics["latency_s"]["mean"] == pytest.approx(1.65)
    assert metrics["latency_s"]["p90"] == pytest.approx(1.0 + 0.9 * 1.3)
    assert metrics["tpot_s"]["min"] == pytest.approx(0.1)
    assert metrics["tpot_s"]["max"] == pytest.approx(0.2)
    assert metrics["tpot_s"]["mean"] == pytest.approx(0.15)
    assert metrics["prompt_tokens"] == 200
    assert metrics["prompt_tokens_per_request"] == 100.0
    assert metrics["output_tokens"] == 21
    assert metrics["output_tokens_per_s"] == 5.25
    assert metrics["decode_tokens_per_s"] == pytest.approx(19 / 2.9, abs=1e-4)


def test_a_burst_of_tokens_does_not_make_an_endless_decode_rate() -> None:
    """A request whose 15 tokens after the first arrived 1 ms apart (a busy server flushing
    late) weighs by its time next to one that decoded 15 tokens in 1.5 s."""
    records = [
        record(start=0.0, first=1.0, end=1.001, out=16),
        record(start=0.0, first=0.1, end=1.6, out=16),
    ]
    metrics = _latency_metrics.scenario_metrics(records, 1.6)
    assert metrics["decode_tokens_per_s"] == pytest.approx(30 / 1.501, abs=1e-3)


def test_metrics_when_every_request_failed() -> None:
    records = [record(error=f"HTTP 50{i % 3}: down") for i in range(9)]
    records.append(record(error="timed out after 5 s"))
    records += [record(error=f"other {i}") for i in range(5)]
    metrics = _latency_metrics.scenario_metrics(records, 2.0)
    assert (metrics["ok"], metrics["errors"]) == (0, 15)
    # distinct, in order of appearance, at most 5
    assert metrics["error_samples"] == [
        "HTTP 500: down",
        "HTTP 501: down",
        "HTTP 502: down",
        "timed out after 5 s",
        "other 0",
    ]
    for key in ("ttft_s", "tpot_s", "latency_s"):
        assert metrics[key] == dict.fromkeys(("mean", "p50", "p90", "p99", "min", "max"))
    assert metrics["output_tokens"] == 0
    assert metrics["prompt_tokens"] == 0
    assert metrics["prompt_tokens_per_request"] is None
    assert metrics["requests_per_s"] == 0.0
    assert metrics["output_tokens_per_s"] == 0.0
    assert metrics["decode_tokens_per_s"] is None


def test_metrics_with_one_token_outputs() -> None:
    records = [record(first=0.2, end=0.2, out=1), record(start=1, first=1.4, end=1.4, out=1)]
    metrics = _latency_metrics.scenario_metrics(records, 1.6)
    assert metrics["ok"] == 2
    assert metrics["ttft_s"]["mean"] == pytest.approx(0.3)
    assert metrics["output_tokens"] == 2
    assert metrics["output_tokens_per_s"] == 1.25
    # nothing after the first token: no time per output token, no decode speed
    assert metrics["tpot_s"]["mean"] is None
    assert metrics["decode_tokens_per_s"] is None


def test_metrics_without_duration_have_no_rates() -> None:
    metrics = _latency_metrics.scenario_metrics([record()], 0.0)
    assert metrics["requests_per_s"] is None
    assert metrics["output_tokens_per_s"] is None


def test_metrics_without_usage_have_no_prompt_count() -> None:
    metrics = _latency_metrics.scenario_metrics([record(prompt=None), record(prompt=None)], 1.0)
    assert metrics["prompt_tokens"] == 0
    assert metrics["prompt_tokens_per_request"] is None


def test_summary_line() -> None:
    line = _latency_metrics.summary_line(
        {
            "name": "c4",
            "warmup": False,
            "ok": 3,
            "requests": 4,
            "ttft_s": {"p50": 0.1234},
            "output_tokens_per_s": 78.44,
        }
    )
    assert line == "c4: 3/4 ok, TTFT p50 0.123 s, 78.4 output tok/s"
