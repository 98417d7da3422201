"""bench_regressions and bench_headline: the upgrade's benchmark gate, a run held against
the one before, and each run in one line."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.filter.bench import (
    FilterModule,
    bench_headline,
    bench_llama_benchy_plan,
    bench_llama_benchy_summary,
    bench_regressions,
)


def run(tokens_per_s: float | None, ttft_s: float | None, errors: int = 0, **extra) -> dict:
    scenario = {
        "name": "gate",
        "output_tokens_per_s": tokens_per_s,
        "ttft_s": {"p50": ttft_s} if ttft_s is not None else None,
        "errors": errors,
        **extra,
    }
    warmup = {"name": "warmup", "warmup": True, "output_tokens_per_s": 1.0, "errors": 3}
    return {"scenarios": [warmup, scenario]}


def test_the_filters_are_registered() -> None:
    assert FilterModule().filters() == {
        "bench_regressions": bench_regressions,
        "bench_headline": bench_headline,
        "bench_llama_benchy_plan": bench_llama_benchy_plan,
        "bench_llama_benchy_summary": bench_llama_benchy_summary,
    }


@pytest.mark.parametrize(
    ("after", "allowed"),
    [
        (run(200.0, 0.020), 20),  # the same
        (run(170.0, 0.023), 20),  # 15% fewer tokens/s, TTFT 15% later: within 20%
        (run(400.0, 0.010), 0),  # faster in both: never a regression
    ],
)
def test_within_the_allowance_nothing_is_said(after: dict, allowed: float) -> None:
    assert bench_regressions(run(200.0, 0.020), after, allowed) == []


def test_fewer_tokens_per_second_are_named_with_both_values() -> None:
    assert bench_regressions(run(200.0, 0.020), run(60.0, 0.020), 20) == [
        "gate: out tok/s 200.0 -> 60.0 (-70.0%, 20% allowed)"
    ]


def test_a_later_first_token_is_named_in_milliseconds() -> None:
    assert bench_regressions(run(200.0, 0.020), run(200.0, 0.030), "25") == [
        "gate: TTFT p50 (ms) 20.0 -> 30.0 (+50.0%, 25% allowed)"
    ]


def test_failed_requests_where_none_failed_before_are_a_regression() -> None:
    # The warm-up's errors count for neither run.
    assert bench_regressions(run(200.0, 0.020), run(200.0, 0.020, errors=2), 20) == [
        "gate: 2 failed requests (before: 0)"
    ]


def test_a_scenario_the_new_run_could_not_measure_or_lacks_is_a_regression() -> None:
    assert bench_regressions(run(200.0, 0.020), run(None, None, errors=16), 20) == [
        "gate: 16 failed requests (before: 0)",
        "gate: no out tok/s in the new run",
        "gate: no TTFT p50 (ms) in the new run",
    ]
    assert bench_regressions(run(200.0, 0.020), {"scenarios": []}, 20) == [
        "gate: not in the new run"
    ]
    assert bench_regressions(run(200.0, 0.020), None, 20) == ["gate: not in the new run"]


def test_without_an_earlier_run_there_is_nothing_to_fall_behind() -> None:
    assert bench_regressions(None, run(1.0, 9.0), 20) == []


@pytest.mark.parametrize("allowed", [-1, "twenty", None])
def test_an_allowance_that_is_not_a_percentage_is_refused(allowed: object) -> None:
    with pytest.raises(AnsibleFilterError, match="expected a percentage, 0 or more"):
        bench_regressions(run(200.0, 0.020), run(200.0, 0.020), allowed)


def test_the_headline_shows_the_measured_scenarios_in_one_line() -> None:
    measured = run(205.34, 0.0182, ok=32)
    assert bench_headline(measured) == "gate: 32 ok, 0 errors, TTFT p50 18.2 ms, 205.3 out tok/s"
    assert bench_headline(None) == "nothing measured"
    assert bench_headline({"scenarios": [measured["scenarios"][0]]}) == "nothing measured"


def test_llama_benchy_plan_gives_a_bad_profiles_problems_and_nothing_to_run() -> None:
    plan = bench_llama_benchy_plan(
        {"pp": [2048], "tg": ["128"], "depth": [0], "concurrency": [1]}, 4096
    )
    assert plan["problems"] == ["tg is ['128']; expected a list of whole numbers, 0 or more"]
    assert (plan["argv"], plan["requests"]) == ([], 0)


def test_llama_benchy_plan_fits_a_profile_and_gives_its_options() -> None:
    plan = bench_llama_benchy_plan(
        {"pp": [64], "tg": [16], "depth": [0, 8192], "concurrency": [1]}, "4096"
    )
    assert plan["problems"] == [] and plan["left_out"] == [8192] and plan["requests"] == 3
    assert plan["argv"][:2] == ["--pp", "64"]
    assert bench_llama_benchy_summary({}, plan)["left_out_depths"] == [8192]
