"""``llmfleet plan`` on the shipped sample inventories (playbooks/plan.yml, no host reached)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llmfleet.cli import app

ROOT = Path(__file__).resolve().parents[3]
runner = CliRunner()


@pytest.fixture(autouse=True)
def _in_the_collection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMFLEET_HOME", str(ROOT))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.chdir(ROOT)


def _plans(*args: str) -> tuple[int, list[dict]]:
    result = runner.invoke(app, ["plan", *args, "--json"])
    return result.exit_code, json.loads(result.stdout)["plans"] if result.stdout else []


def test_the_spark_sample_plans_minimax_m27_on_two_sparks() -> None:
    code, (entry,) = _plans("-i", "inventory/sparks")
    assert code == 0
    assert entry["hosts"] == ["spark-1", "spark-2"]
    assert entry["profile"] == "minimax_m27_two_sparks"
    layout = entry["plan"]["layout"]
    # 62 layers x 2 x (8 / 2) KV heads x 128 x 1 byte (fp8); 115 GB / 2 of weights;
    # 0.82 x 119.67 GiB - 53.55 GiB - 2 GiB = 42.58 GiB of cache.
    assert layout["kv_bytes_per_token"] == 63_488
    assert layout["weights_per_rank_bytes"] == 57_500_000_000
    assert layout["kv_cache_tokens"] == 720_096
    assert layout["max_concurrency"] == 5.4939
    assert entry["problems"] == []
    assert [
        (row["tensor_parallel_size"], row["pipeline_parallel_size"], row["fits"])
        for row in entry["plan"]["layouts"]
    ] == [(2, 1, True), (1, 2, True), (1, 1, False)]


def test_the_table_shows_the_layouts_and_the_assumptions() -> None:
    result = runner.invoke(app, ["plan", "-i", "inventory/sparks"])
    assert result.exit_code == 0
    out = result.stdout
    for needle in ("63,488 B", "720,096", "5.49x", "53.55 GiB", "Assumptions:", "allowance"):
        assert needle in out
    assert "fits: 720,096 tokens of KV cache" in out


def test_the_gh200_sample_reproduces_seed_000() -> None:
    # vLLM printed 235,280 tokens, 1.44x; the planner's weights are estimated (+0.9%).
    code, (entry,) = _plans("-i", "inventory/gh200")
    assert code == 0
    layout = entry["plan"]["layout"]
    assert (layout["tensor_parallel_size"], layout["kv_bytes_per_token"]) == (2, 126_976)
    assert layout["kv_cache_tokens"] == 237_408
    assert abs(layout["kv_cache_tokens"] - 235_280) / 235_280 < 0.01


def test_a_layout_that_does_not_fit_exits_2_with_the_layouts_that_do() -> None:
    code, (entry,) = _plans("-i", "inventory/sparks", "-e", '{"llmfleet_vllm_hosts": ["spark-1"]}')
    assert code == 2
    assert not entry["plan"]["layout"]["fits"]
    assert "weights need 107.10 GiB per GPU" in entry["problems"][0]


def test_an_unknown_profile_exits_1_and_says_why() -> None:
    code, (entry,) = _plans("-i", "inventory/sparks", "-e", "llmfleet_vllm_profile=nope")
    assert code == 1
    assert entry["profile"] == "nope"
    assert "error" in entry


def test_the_table_is_a_line_per_layout_at_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    out = runner.invoke(app, ["plan", "-i", "inventory/sparks"]).stdout
    table = out[: out.index("max_model_len 131,072")].splitlines()
    assert max(len(line) for line in table) <= 80, out
    rows = [line for line in table if "GiB" in line]
    assert len(rows) == 3, out
    assert rows[-1].split()[-1] == "no", out
    # Why the layout of one Spark does not fit, under the table.
    flat = " ".join(out.split())
    assert "TP 1 x PP 1 on 1 host(s) does not fit: weights need 107.10 GiB per GPU" in flat, out
