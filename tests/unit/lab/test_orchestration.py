"""The orchestration benchmark's parsing and report (the measuring runs on the lab)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from llmfleet_lab import orchestration
from llmfleet_lab.orchestration import OrchestrationResult, Run, parse_recap, render_markdown

RECAP = """
== RECAP
localhost : ok=26 changed=0 unreachable=0 failed=0 skipped=436 rescued=0 ignored=0
spark-1   : ok=248 changed=0 unreachable=0 failed=0 skipped=435 rescued=0 ignored=0
spark-2   : ok=172 changed=3 unreachable=0 failed=0 skipped=444 rescued=0 ignored=0
OK: all hosts done in 02:53
"""


def result(first_answer: float | None = 90.0, no_op: float = 12.0) -> OrchestrationResult:
    recap = parse_recap(RECAP)
    return OrchestrationResult(
        timestamp="20261123T080000Z",
        lab="llmfleet-lab",
        nodes=2,
        lab_up_s=6.2,
        fresh=Run(seconds=290.0, recap=recap, first_answer_s=first_answer),
        vllm_own_start_s=75.0,
        no_op=Run(seconds=no_op, recap=recap),
        profile_change=Run(seconds=110.0, recap=recap),
    )


def test_the_recap_is_read_per_host() -> None:
    recap = parse_recap(RECAP)
    assert recap["spark-1"] == {
        "ok": 248, "changed": 0, "unreachable": 0, "failed": 0, "skipped": 435,
    }  # fmt: skip
    assert recap["spark-2"]["changed"] == 3
    assert set(recap) == {"localhost", "spark-1", "spark-2"}
    assert parse_recap("no recap here") == {}


def test_the_ratio_is_first_answer_over_vllms_own_start() -> None:
    assert result().first_answer_ratio == 90.0 / 75.0
    assert result(first_answer=None).first_answer_ratio is None
    data = json.loads(result().to_json())
    assert data["first_answer_over_vllm_start"] == 90.0 / 75.0
    assert data["no_op"]["recap"]["spark-1"]["ok"] == 248
    assert data["targets"] == {
        "no_op_s": 20.0,
        "first_answer_over_vllm_start": 1.5,
        "profile_change_over_full": 0.5,
    }
    assert data["profile_change_over_full"] is None  # no change walked with --full


def test_the_profile_change_is_held_against_the_same_change_walked_in_full() -> None:
    limited = result()
    limited.profile_change_full = Run(seconds=200.0, recap=parse_recap(RECAP))
    assert limited.profile_change_ratio == 110.0 / 200.0
    assert json.loads(limited.to_json())["profile_change_over_full"] == 0.55
    text = render_markdown(limited)
    assert "| profile change with `--full` (every task walked) | 200.0 s | |" in text
    assert "| **profile change / the same with --full** | 0.6 x | < 0.5 (not met) |" in text
    assert "| profile change --full | spark-1 | 248 | 0 | 435 |" in text
    limited.profile_change_full = Run(seconds=230.0, recap={})
    assert "| 0.5 x | < 0.5 (met) |" in render_markdown(limited)
    assert "| n/a | < 0.5 (not met) |" in render_markdown(result())


def test_the_report_says_which_target_is_met() -> None:
    met = render_markdown(result())
    assert "| **first answer / vLLM's own start** | 1.2 x | <= 1.5 (met) |" in met
    assert "| **no-op `llmfleet up`** | 12.0 s | <= 20 s (met) |" in met
    assert "| no-op | spark-1 | 248 | 0 | 435 |" in met
    missed = render_markdown(result(first_answer=200.0, no_op=150.0))
    assert "2.7 x | <= 1.5 (not met)" in missed
    assert "150.0 s | <= 20 s (not met)" in missed
    assert "n/a" in render_markdown(result(first_answer=None))


def test_the_runs_find_llmfleet_beside_this_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    # make bench runs .venv/bin/llmfleet without the venv on PATH: llmfleet up and the
    # ansible-playbook it starts must still come from this environment.
    monkeypatch.setenv("PATH", "/usr/bin")
    env = orchestration._tool_env("llmfleet-lab")
    assert env["PATH"].split(os.pathsep) == [str(Path(sys.executable).parent), "/usr/bin"]
    assert env["LLMFLEET_LAB"] == "llmfleet-lab"


def test_the_walked_no_op_run_is_reported_beside_the_early_stop() -> None:
    walked = result()
    walked.no_op_full = Run(seconds=91.7, recap=parse_recap(RECAP))
    text = render_markdown(walked)
    assert "| no-op `llmfleet up --full` (every task walked) | 91.7 s | |" in text
    assert "| no-op --full | spark-1 | 248 | 0 | 435 |" in text
    assert "| no-op `llmfleet up --full` (every task walked) | n/a | |" in render_markdown(result())


def test_vllm_is_restarted_only_where_its_unit_is(monkeypatch: pytest.MonkeyPatch) -> None:
    # On the Ray path only the head has llmfleet-vllm.service; rank 1 is a worker of Ray's.
    loaded = {"lab-spark-1": "loaded\n", "lab-spark-2": "not-found\n"}

    def exec_in(container: str, *cmd: str, **_: object) -> object:
        return type("Done", (), {"stdout": loaded[container]})()

    monkeypatch.setattr(orchestration.podman, "exec_in", exec_in)
    assert orchestration._vllm_units_on(["lab-spark-1", "lab-spark-2"]) == ["lab-spark-1"]
