"""``llmfleet doctor``: read-only checks of a live cluster, each finding with its evidence and
the fix (``playbooks/doctor.yml``; the checks are the filter ``llmfleet.cluster.doctor_findings``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from llmfleet.cli_options import ExtraVarsOption, InventoryOption, LimitOption, VerboseOption
from llmfleet.playbook_files import print_failures, run_collecting, start
from llmfleet.run_outcome import ExitCode, RunResult

MARKS = {
    "ok": "[green]ok[/green]",
    "problem": "[red]PROBLEM[/red]",
    "skipped": "[yellow]skipped[/yellow]",
}


def run_doctor_playbook(
    root: Path,
    inventory: Path,
    extravars: list[dict[str, Any] | Path],
    limit: str | None,
    verbosity: int,
) -> tuple[RunResult, dict[str, Any] | None]:
    """Run playbooks/doctor.yml; its result and what it wrote (None when it stopped before
    judging)."""
    result, written = run_collecting(
        root,
        "doctor",
        inventory,
        extravars=extravars,
        folder_variable="llmfleet_doctor_dir",
        limit=limit,
        verbosity=verbosity,
    )
    return result, written.get("doctor")


def findings_table(findings: list[dict[str, Any]]) -> Table:
    table = Table(show_lines=True)
    for column in ("check", "host", "", "evidence", "fix"):
        table.add_column(column)
    order = {"problem": 0, "skipped": 1, "ok": 2}
    for finding in sorted(findings, key=lambda f: order[f["status"]]):
        table.add_row(
            escape(finding["title"]),
            escape(finding["host"]),
            MARKS[finding["status"]],
            escape(finding["evidence"]),
            escape(finding["fix"] or ""),
        )
    return table


def doctor(
    inventory: InventoryOption,
    limit: LimitOption = None,
    extra_vars: ExtraVarsOption = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the findings and every host's evidence as JSON on stdout.",
        ),
    ] = False,
    verbose: VerboseOption = 0,
) -> None:
    """Check a live cluster."""
    root, extravars = start(inventory, extra_vars)
    result, report = run_doctor_playbook(root, inventory, extravars, limit, verbose)
    if report is None:
        print_failures(result)
        raise typer.Exit(int(result.exit_code) or int(ExitCode.NOT_STARTED))
    findings = report["findings"]
    problems = [f for f in findings if f["status"] == "problem"]
    if as_json:
        typer.echo(json.dumps({"inventory": str(inventory), **report}, indent=2))
    else:
        console = Console()
        console.print(findings_table(findings))
        console.print(
            f"{len(problems)} problem(s), "
            f"{sum(f['status'] == 'ok' for f in findings)} check(s) passed, "
            f"{sum(f['status'] == 'skipped' for f in findings)} skipped",
            highlight=False,
        )
    if problems:
        raise typer.Exit(int(ExitCode.HOST_FAILED))
    raise typer.Exit(int(result.exit_code))
