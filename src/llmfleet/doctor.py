"""``llmfleet doctor``: read-only checks of a live cluster, each finding with its evidence and
the fix (``playbooks/doctor.yml``; the checks are the filter ``llmfleet.cluster.doctor_findings``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
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
ORDER = {"problem": 0, "skipped": 1, "ok": 2}
# The table's check column at most (its title cut), and its evidence column at least.
CHECK_WIDTH = 28
MIN_EVIDENCE_WIDTH = 20


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


def findings_table(findings: list[dict[str, Any]], width: int) -> Table:
    """A line per finding, problems first: its status, the check, the host and its evidence
    cut to what ``width`` columns leave (a problem's whole evidence and fix are under the
    table, see print_findings)."""
    check_width = min(CHECK_WIDTH, max((len(f["title"]) for f in findings), default=5))
    host_width = max((len(f["host"]) for f in findings), default=4)
    # The status (7), the three columns before the evidence and a space between columns.
    evidence_width = max(MIN_EVIDENCE_WIDTH, width - (7 + check_width + host_width + 2 * 4))
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    table.add_column("", no_wrap=True, width=7)
    table.add_column("check", overflow="ellipsis", no_wrap=True, width=check_width)
    table.add_column("host", no_wrap=True, width=host_width)
    table.add_column("evidence", overflow="ellipsis", no_wrap=True, max_width=evidence_width)
    for finding in sorted(findings, key=lambda f: ORDER[f["status"]]):
        table.add_row(
            MARKS[finding["status"]],
            escape(finding["title"]),
            escape(finding["host"]),
            escape(finding["evidence"]),
        )
    return table


def print_findings(console: Console, findings: list[dict[str, Any]]) -> None:
    """The table, then each problem's whole evidence and its fix, then the count."""
    console.print(findings_table(findings, console.width))
    problems = [f for f in findings if f["status"] == "problem"]
    for finding in problems:
        where = escape(f"{finding['host']}: {finding['title']}")
        console.print(
            f"[red]PROBLEM[/red] [bold]{where}[/bold]: {escape(finding['evidence'])}",
            soft_wrap=False,
            highlight=False,
        )
        console.print(f"  fix: {escape(finding['fix'] or '')}", soft_wrap=False, highlight=False)
    console.print(
        f"{len(problems)} problem(s), "
        f"{sum(f['status'] == 'ok' for f in findings)} check(s) passed, "
        f"{sum(f['status'] == 'skipped' for f in findings)} skipped"
        " (every finding's evidence: --json)",
        highlight=False,
    )


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
        print_findings(Console(), findings)
    if problems:
        raise typer.Exit(int(ExitCode.HOST_FAILED))
    raise typer.Exit(int(result.exit_code))
