"""bench_scenarios_fit: the benchmark role's matrix fitted to the served context."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.filter.bench_scenarios import (
    FilterModule,
    bench_scenarios_fit,
)

ROOT = Path(__file__).resolve().parents[4]
# The role's matrix (inventory/sparks and inventory/gh200 keep it) and the lab's smaller one.
DEFAULT = yaml.safe_load((ROOT / "roles/benchmark/defaults/main.yml").read_text())[
    "benchmark_scenarios"
]
LAB_VARS = ROOT / "inventory/lab/group_vars/all/bench.yml"
# None in the collection copy that ansible-test units runs: the lab stays out of it.
LAB = yaml.safe_load(LAB_VARS.read_text())["benchmark_scenarios"] if LAB_VARS.is_file() else None
ALL = [
    "warmup",
    "short_c4",
    "short_c8",
    "long_c2",
    "sweep_c1",
    "sweep_c64",
    "sweep_c256",
    "prefill_1k",
    "prefill_8k",
    "prefill_32k",
]
# Claude Code's sessions: the role's matrix has 1, 2, 4 and 8 of them (the last turn about
# 20K tokens, and 256 out), the lab's 4 (about 2.4K).
ALL_DEFAULT = [*ALL, "sessions_c1", "sessions_c2", "sessions_c4", "sessions_c8"]
ALL_LAB = [*ALL, "sessions_c4"]
SHORT = ["warmup", "short_c4", "short_c8", "sweep_c1", "sweep_c64", "sweep_c256", "prefill_1k"]
UNKNOWN = 2147483647  # the role's context when the model card has no max_model_len


# What the role's former Jinja loop gave for these contexts (recorded before the change).
@pytest.mark.parametrize(
    ("scenarios", "context", "fit"),
    [
        (DEFAULT, UNKNOWN, ALL_DEFAULT),
        (DEFAULT, 100, []),
        (DEFAULT, 512, ["warmup", "short_c4", "short_c8"]),
        (DEFAULT, 4096, SHORT),
        (DEFAULT, 8192, SHORT),
        # 2000 + 8000 + 2500 + 7 x (1000 + 40) + 256
        (DEFAULT, 20035, [n for n in ALL if n != "prefill_32k"]),
        (DEFAULT, 20036, [n for n in ALL_DEFAULT if n != "prefill_32k"]),
        (DEFAULT, 33000, ALL_DEFAULT),
        (LAB, UNKNOWN, ALL_LAB),
        (LAB, 100, ["warmup"]),
        (LAB, 512, ["warmup", "short_c4", "short_c8", "sweep_c64", "sweep_c256"]),
        (LAB, 4096, [*SHORT, "sessions_c4"]),
        (LAB, 4128, [n for n in ALL_LAB if n not in ("prefill_8k", "prefill_32k")]),  # 4096 + 32
        (LAB, 4129, [n for n in ALL_LAB if n not in ("prefill_8k", "prefill_32k")]),
        (LAB, 40000, ALL_LAB),
    ],
)
def test_the_matrix_fitted_to_a_context(
    scenarios: list[dict] | None, context: int, fit: list[str]
) -> None:
    if scenarios is None:
        pytest.skip("the lab's inventory is not in the collection copy ansible-test runs")
    result = bench_scenarios_fit(scenarios, context)
    assert [s["name"] for s in result["fit"]] == fit
    names = [s["name"] for s in scenarios]
    assert result["left_out"] == [n for n in names if n not in fit]  # in the matrix's order
    assert all(s in scenarios for s in result["fit"])  # the scenarios as they are


def test_the_bound_is_inclusive_and_inventory_strings_count() -> None:
    scenario = {"name": "s", "prompt_tokens": "96", "max_tokens": 32}
    assert bench_scenarios_fit([scenario], "128") == {"fit": [scenario], "left_out": []}
    assert bench_scenarios_fit([scenario], 127) == {"fit": [], "left_out": ["s"]}


def test_a_session_counts_its_last_turn_with_the_module_defaults() -> None:
    """2000 system + 8000 tools (the defaults) + 100 task + 2 x (500 + 40) + 20 out."""
    session = {"name": "s", "kind": "session", "sessions": 2, "turns": 3, "prompt_tokens": 100,
               "turn_tokens": 500, "max_tokens": 20}  # fmt: skip
    assert bench_scenarios_fit([session], 11200)["fit"] == [session]
    assert bench_scenarios_fit([session], 11199)["left_out"] == ["s"]


def test_no_scenarios() -> None:
    assert bench_scenarios_fit([], 4096) == {"fit": [], "left_out": []}


def test_a_token_count_that_is_no_number_is_named() -> None:
    with pytest.raises(AnsibleFilterError, match="scenario 'x' has max_tokens 'lots'"):
        bench_scenarios_fit([{"name": "x", "prompt_tokens": 1, "max_tokens": "lots"}], 4096)


def test_registered() -> None:
    assert FilterModule().filters() == {"bench_scenarios_fit": bench_scenarios_fit}
