"""module_utils/_bench/format: values as text, and the one-line summaries."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench import (
    comparison as _bench_comparison,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench import format as _bench_format

from tests.unit.plugins.bench_samples import (
    make_benchmark,
    make_scenario,
)


@pytest.mark.parametrize(
    ("func", "value", "text"),
    [
        (_bench_format.fmt_ms, 0.2123, "212"),
        (_bench_format.fmt_ms, 0.1, "100"),
        (_bench_format.fmt_ms, 0.0999, "99.9"),
        (_bench_format.fmt_ms, 0.0456, "45.6"),
        (_bench_format.fmt_ms, None, "—"),
        (_bench_format.fmt_s, 1.6234, "1.62"),
        (_bench_format.fmt_s, 0.4567, "0.457"),
        (_bench_format.fmt_s, None, "—"),
        (_bench_format.fmt_rate, 78.44, "78.4"),
        (_bench_format.fmt_rate, 160, "160.0"),
        (_bench_format.fmt_rate, None, "—"),
        (_bench_format.fmt_reqrate, 0.64, "0.64"),
        (_bench_format.fmt_reqrate, 24.56, "24.6"),
        (_bench_format.fmt_count, 16, "16"),
        (_bench_format.fmt_count, 16.0, "16"),
        (_bench_format.fmt_count, None, "—"),
        (_bench_format.fmt_pct, 6.0, "+6.0%"),
        (_bench_format.fmt_pct, -3.33, "-3.3%"),
        (_bench_format.fmt_pct, None, "—"),
        (_bench_format.fmt_value, True, "true"),
        (_bench_format.fmt_value, 12.3456, "12.346"),
        (_bench_format.fmt_value, 13.0, "13.0"),
        (_bench_format.fmt_value, 0.00012, "0.00012"),
        (_bench_format.fmt_value, ["a", 1], "a, 1"),
        (_bench_format.fmt_value, list(range(20)), "20 values"),
        (_bench_format.fmt_value, None, "—"),
    ],
)
def test_number_formats(func: Any, value: Any, text: str) -> None:
    assert func(value) == text


def test_summary_lines() -> None:
    before = make_benchmark("2026-11-21T18:05:00Z", ttft=0.2, out_rate=75.0)
    after = make_benchmark()
    after["scenarios"][2] = make_scenario("long_c8", errors=32, requests=32, ttft=None)
    assert _bench_format.summary_lines(after) == [
        "warmup (warm-up): 2 ok, 0 errors, TTFT p50 200 ms, 20.6 out tok/s",
        "short_c4: 16 ok, 0 errors, TTFT p50 212 ms, 78.4 out tok/s",
        "long_c8: 0 ok, 32 errors, TTFT p50 —, 78.4 out tok/s",
    ]
    lines = _bench_format.summary_lines(after, _bench_comparison.compare(before, after, "x.json"))
    assert lines[1] == (
        "short_c4: 16 ok, 0 errors, TTFT p50 212 ms, 78.4 out tok/s; "
        "vs previous: 1 better, 3 worse, 6 same"
    )
    assert "vs previous" not in lines[0]
