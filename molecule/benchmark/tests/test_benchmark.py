"""The benchmark ran from spark-2 against spark-1's vLLM and kept its results on the
controller: every request answered, vLLM counted them, the scenario that does not fit the
context was left out, and both runs (converge, idempotence) were compared."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

testinfra_hosts = ["molecule-spark-1"]
RESULTS = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "bench"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def runs() -> list[dict]:
    files = sorted(RESULTS.glob("bench-*.json"))
    assert len(files) >= 2, f"expected the converge and the idempotence run in {RESULTS}"
    return [json.loads(path.read_text()) for path in files]


def test_every_request_answered_with_real_numbers(runs: list[dict]) -> None:
    scenarios = {s["name"]: s for s in runs[-1]["benchmark"]["scenarios"]}
    assert sorted(scenarios) == ["prefill_1k", "short_c4", "warmup"]
    short = scenarios["short_c4"]
    assert short["ok"] == 8 and short["errors"] == 0
    assert short["output_tokens"] == 8 * 16  # ignore_eos: every request yields max_tokens
    assert 0 < short["ttft_s"]["p50"] <= short["latency_s"]["p50"]
    assert short["output_tokens_per_s"] > 0
    assert scenarios["prefill_1k"]["prompt_tokens"] >= 2 * 900


def test_the_config_names_what_was_measured(runs: list[dict]) -> None:
    config = runs[-1]["config"]
    assert config["endpoint"] == "http://spark-1:8000"
    assert config["runner"] == "molecule-spark-2"
    assert config["left_out"] == ["too_long"]
    assert config["max_model_len"] == 131072


def test_the_fabric_counters_were_read_on_both_nodes(runs: list[dict]) -> None:
    transport = runs[-1]["transport"]
    assert transport["transport"] == "socket" and transport["judged"] is False
    assert sorted(transport["bytes"]) == ["molecule-spark-1", "molecule-spark-2"]


def test_the_second_run_is_compared_with_the_first(runs: list[dict]) -> None:
    comparison = runs[-1]["comparison"]
    assert comparison["previous"] is not None
    assert "short_c4" in comparison["scenarios"]
    stem = sorted(RESULTS.glob("bench-*.json"))[-1].with_suffix("")
    markdown = stem.with_suffix(".md").read_text()
    assert "| short_c4 |" in markdown
    assert stem.with_suffix(".png").read_bytes().startswith(PNG_SIGNATURE)


def test_vllm_counted_the_requests(host) -> None:
    metrics = host.check_output("curl -s localhost:8000/metrics")
    total = sum(
        float(value)
        for value in re.findall(
            r'^vllm:request_success_total\{[^}]*model_name="llmfleet-tiny"[^}]*\} (\S+)$',
            metrics,
            re.M,
        )
    )
    # Two runs of warm-up + short_c4 + prefill_1k (11 requests each), and the calibration.
    assert total >= 22
