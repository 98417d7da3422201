"""module_utils/_bench/plot: the PNG of a run, with and without a previous run."""

from __future__ import annotations

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench import plot as _bench_plot
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench import record as _bench_record

from tests.unit.plugins.bench_samples import (
    make_benchmark,
    make_session_scenario,
    png_size,
)


# ---------------------------------------------------------------------------
# plot
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("with_previous", [False, True])
def test_render_png_size(with_previous: bool) -> None:
    pytest.importorskip("matplotlib")
    bench = make_benchmark(ttft=None, latency=None, out_rate=None, errors=16)
    previous = (
        _bench_record.build_record(make_benchmark("2026-11-21T18:05:00Z"))
        if with_previous
        else None
    )
    data = _bench_plot.render_png(_bench_record.build_record(bench), previous)
    assert png_size(data) == _bench_plot.PNG_SIZE == (1200, 900)


def test_render_png_without_measured_scenarios() -> None:
    pytest.importorskip("matplotlib")
    bench = make_benchmark()
    bench["scenarios"] = bench["scenarios"][:1]  # the warm-up only
    assert png_size(_bench_plot.render_png(_bench_record.build_record(bench))) == (1200, 900)


@pytest.mark.parametrize("with_previous", [False, True])
def test_session_scenarios_add_a_row_of_their_turns(with_previous: bool) -> None:
    pytest.importorskip("matplotlib")
    bench = make_benchmark()
    bench["scenarios"].append(make_session_scenario())
    previous = make_benchmark("2026-11-21T18:05:00Z")
    previous["scenarios"].append(make_session_scenario(ttft_p99=(1.2, 0.4)))
    data = _bench_plot.render_png(
        _bench_record.build_record(bench),
        _bench_record.build_record(previous) if with_previous else None,
    )
    assert png_size(data) == _bench_plot.PNG_SIZE_SESSIONS == (1200, 1350)
