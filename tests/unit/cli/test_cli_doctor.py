"""``llmfleet doctor``'s screen, JSON and exit code from what playbooks/doctor.yml writes (the
playbook runs against the lab in tests/lab/test_lab_operate.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from llmfleet import doctor as doctor_module
from llmfleet.cli import app
from llmfleet.run_outcome import RunResult

ROOT = Path(__file__).resolve().parents[3]
runner = CliRunner()
OK = {"check": "swap", "title": "swap is off", "host": "spark-1", "status": "ok",
      "evidence": "no swap", "fix": None}  # fmt: skip
PROBLEM = {"check": "link_rate", "title": "fabric links up at full rate", "host": "spark-2",
           "status": "problem", "evidence": "enP2p1s0f1np1 down (rail down)",
           "fix": "reseat the cable"}  # fmt: skip


@pytest.fixture
def run_doctor(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("LLMFLEET_HOME", str(ROOT))
    monkeypatch.setenv("COLUMNS", "200")

    def run(findings: list[dict[str, Any]], *args: str, columns: int = 200) -> Any:
        # The playbook judges nothing when llmfleet reads its findings: the run is fine.
        monkeypatch.setenv("COLUMNS", str(columns))
        result = RunResult(rc=0, status="successful")
        report = {"findings": findings, "evidence": [{"host": "spark-1"}]}
        monkeypatch.setattr(doctor_module, "run_doctor_playbook", lambda *_a: (result, report))
        return runner.invoke(app, ["doctor", "-i", str(ROOT / "inventory" / "sparks"), *args])

    return run


def test_a_problem_is_shown_first_with_its_fix_and_exits_2(run_doctor: Any) -> None:
    result = run_doctor([OK, PROBLEM])
    assert result.exit_code == 2
    out = result.output
    assert out.index("PROBLEM") < out.index("\nok ")
    assert "enP2p1s0f1np1 down (rail down)" in out and "reseat the cable" in out
    assert "1 problem(s), 1 check(s) passed, 0 skipped" in out


def test_a_healthy_cluster_exits_0_and_the_json_has_the_evidence(run_doctor: Any) -> None:
    assert run_doctor([OK]).exit_code == 0
    data = json.loads(run_doctor([OK], "--json").stdout)
    assert data["findings"] == [OK]
    assert data["evidence"] == [{"host": "spark-1"}]


def test_seventeen_findings_fit_an_80_column_terminal_a_line_each(run_doctor: Any) -> None:
    long = "memory free 15.26 of 119.67 GiB with 80.1 GiB of page cache, which the run drops"
    findings = [
        {**OK, "check": f"check_{n}", "title": f"check number {n} of the doctor", "evidence": long}
        for n in range(16)
    ] + [{**PROBLEM, "evidence": long}]
    result = run_doctor(findings, columns=80)
    assert result.exit_code == 2
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80, result.output
    # Header and rule, a line per finding, the problem's evidence and fix, the count.
    assert len(lines) <= 2 + 17 + 2 + 1 + 2, result.output
    # The problem's whole evidence and fix are under the table.
    flat = " ".join(result.output.split())
    assert f"PROBLEM spark-2: fabric links up at full rate: {long}" in flat, result.output
    assert "fix: reseat the cable" in flat
