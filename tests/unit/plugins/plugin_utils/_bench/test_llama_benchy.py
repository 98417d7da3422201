"""llama-benchy beside our benchmark: its profile fitted to the served context, the requests
it sends, its options, and its JSON results as the report's rows.

llama_benchy_0.4.0.json is what llama-benchy 0.4.0 wrote (``--format json``, its time series
left out) for pp 64, tg 16, depths 0 and 128, concurrency 1 and 2, 2 runs, with prefix
caching, against tests/unit/plugins/fake_llm_server.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.markdown import (
    render_markdown,
)
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._bench.llama_benchy import (
    arguments,
    plan,
    profile_problems,
    rows,
    summary,
)

RECORDED = json.loads((Path(__file__).parent / "llama_benchy_0.4.0.json").read_text())
SPARK_ARENA = {
    "pp": [2048],
    "tg": [128],
    "depth": [0, 4096, 8192, 16384, 32768, 65536, 100000],
    "concurrency": [1, 2, 5, 10],
    "runs": 3,
    "prefix_caching": True,
}


def test_the_depths_that_do_not_fit_the_context_are_left_out_and_named() -> None:
    fitted = plan(SPARK_ARENA, 65536)
    # 32768 + 2048 + 128 fits 65536; 65536 + 2048 + 128 does not.
    assert fitted["profile"]["depth"] == [0, 4096, 8192, 16384, 32768]
    assert fitted["left_out"] == [65536, 100000]


def test_the_requests_count_each_run_at_each_concurrency_and_the_context_loads() -> None:
    # Depth 0: 3 runs x (1 + 2 + 5 + 10) = 54; with a depth, twice (the context is loaded
    # before each measured request): 4 depths x 108.
    assert plan(SPARK_ARENA, 65536)["requests"] == 54 + 4 * 108
    assert plan(dict(SPARK_ARENA, prefix_caching=False), 65536)["requests"] == 5 * 54


def test_the_options_are_llama_benchys_own() -> None:
    fitted = plan({"pp": [64], "tg": [16], "depth": [0, 128], "concurrency": [1, 2]}, 4096)
    assert arguments(fitted["profile"]) == [
        "--pp", "64", "--tg", "16", "--depth", "0", "128", "--concurrency", "1", "2",
        "--runs", "3", "--enable-prefix-caching",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("profile", "problem"),
    [
        ("pp2048", "the profile is 'pp2048'; expected a mapping of pp, tg, depth, concurrency"),
        (dict(SPARK_ARENA, pp=["2048"]), "pp is ['2048']; expected a list of whole numbers"),
        (dict(SPARK_ARENA, concurrency=[0]), "concurrency is [0]; expected numbers above 0"),
        (dict(SPARK_ARENA, tg=[]), "tg is []; expected a list of whole numbers"),
        (dict(SPARK_ARENA, runs=0), "runs is 0; expected a whole number, 1 or more"),
        (dict(SPARK_ARENA, deph=[0]), "deph is not known; expected only pp, tg, depth"),
    ],
)
def test_a_profile_that_cannot_run_says_which_key_and_why(profile: object, problem: str) -> None:
    assert any(p.startswith(problem) for p in profile_problems(profile)), profile_problems(profile)
    if isinstance(profile, dict):
        with pytest.raises(ValueError, match="expected"):
            plan(profile, 4096)


def test_a_single_number_stands_for_a_list_of_one() -> None:
    fitted = plan({"pp": 64, "tg": 16, "depth": 0, "concurrency": 2, "runs": 1}, 4096)
    assert arguments(fitted["profile"]) == [
        "--pp", "64", "--tg", "16", "--depth", "0", "--concurrency", "2", "--runs", "1",
        "--enable-prefix-caching",
    ]  # fmt: skip


def test_spark_arenas_profile_has_no_problem() -> None:
    assert profile_problems(SPARK_ARENA) == []


def test_the_rows_are_the_measured_tests_in_the_order_they_ran() -> None:
    found = rows(RECORDED)
    # 6 tests ran; the two loads of depth 128's context are not measured rows.
    assert [(r["depth"], r["concurrency"]) for r in found] == [(0, 1), (0, 2), (128, 1), (128, 2)]
    first = RECORDED["benchmarks"][0]
    assert found[0] == {
        "depth": 0,
        "concurrency": 1,
        "prompt_tokens": 64,
        "output_tokens": 16,
        "pp_tps": first["pp_throughput"]["mean"],
        "tg_tps": first["tg_throughput"]["mean"],
        "tg_tps_per_request": first["tg_req_throughput"]["mean"],
        "peak_tps": first["peak_throughput"]["mean"],
        "ttfr_ms": first["ttfr"]["mean"],
        "e2e_ttft_ms": first["e2e_ttft"]["mean"],
        "runs": 2,
    }


def test_a_run_without_results_has_no_rows() -> None:
    assert rows({}) == [] and rows(None) == []
    assert rows({"benchmarks": [{"context_size": 0, "concurrency": 1}]})[0]["tg_tps"] is None


def test_the_report_shows_llama_benchys_table_beside_ours() -> None:
    fitted = plan({"pp": [64], "tg": [16], "depth": [0, 128, 8192], "concurrency": [1, 2],
                   "runs": 2}, 4096)  # fmt: skip
    record = {
        "schema": 1,
        "benchmark": {"model": "fake-model", "scenarios": []},
        "llama_benchy": summary(RECORDED, fitted),
    }
    text = render_markdown(record)
    section = text.split("## llama-benchy (the community's suite)", 1)[1]
    assert "llama-benchy 0.4.0, latency mode none" in section
    assert "Depths left out (do not fit the served context): 8192" in section
    table = [line for line in section.splitlines() if line.startswith("|")]
    assert table[0].split("|")[1:4] == [" depth ", " at once ", " prompt "]
    assert len(table) == 2 + 4
    tg = RECORDED["benchmarks"][1]["tg_throughput"]["mean"]
    assert "| 0 | 2 | 64 | 16 |" in table[3] and f"{tg:.1f}" in table[3]
    # Not again as a key/value table.
    assert text.count("llama_benchy") == 0
