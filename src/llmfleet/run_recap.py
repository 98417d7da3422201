"""The end of a run: the per-host recap (a table, or lines in plain mode), the failures
in one line each, and a one-line verdict."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from llmfleet.run_display import count_text, format_elapsed
from llmfleet.run_outcome import NO_HOSTS, ExitCode, RunResult


def _recap_lines(result: RunResult, console: Console) -> None:
    width = max(len(h) for h in result.stats)
    console.print(Text("== RECAP", style="bold"), soft_wrap=True)
    for host, s in result.stats.items():
        console.print(
            f"{host:<{width}} : ok={s.ok} changed={s.changed} unreachable={s.unreachable} "
            f"failed={s.failed} skipped={s.skipped} rescued={s.rescued} ignored={s.ignored}",
            soft_wrap=True,
            highlight=False,
            markup=False,
        )


def _recap_table(result: RunResult) -> Table:
    table = Table(title="PLAY RECAP", box=box.ROUNDED, title_style="bold")
    table.add_column("host", style="bold")
    for name in ("ok", "changed", "unreachable", "failed", "skipped", "rescued", "ignored"):
        table.add_column(name, justify="right")
    for host, s in result.stats.items():
        bad = s.failed or s.unreachable
        table.add_row(
            Text(host, style="red" if bad else "green"),
            count_text(s.ok, "green"),
            count_text(s.changed, "yellow"),
            count_text(s.unreachable, "bold red"),
            count_text(s.failed, "bold red"),
            count_text(s.skipped, "cyan"),
            count_text(s.rescued, "magenta"),
            count_text(s.ignored, "dim"),
        )
    return table


def _verdict(result: RunResult) -> Text:
    code = result.exit_code
    took = format_elapsed(result.elapsed)
    if code is ExitCode.OK:
        return Text(f"OK: all hosts done in {took}", style="bold green")
    if code is ExitCode.HOST_FAILED:
        hosts = ", ".join(result.failed_hosts) or "?"
        return Text(f"FAILED: task failures on {hosts} (after {took})", style="bold red")
    if code is ExitCode.UNREACHABLE:
        hosts = ", ".join(result.unreachable_hosts)
        return Text(f"UNREACHABLE: {hosts} (after {took})", style="bold red")
    if code is ExitCode.PARSE_ERROR:
        return Text("ERROR: ansible could not parse the playbook or inventory", style="bold red")
    if code is ExitCode.INTERRUPTED:
        return Text(
            "INTERRUPTED: ansible was stopped mid-run; hosts may be half-configured. "
            "Re-run the same command (the playbooks are idempotent).",
            style="bold yellow",
        )
    if result.status == NO_HOSTS:
        why = (
            "no play had a host: the inventory is empty, or none of its groups is one the "
            "playbook plays (sparks, gh200, mac_studios...); for the lab, `llmfleet lab up` first"
        )
    else:
        why = f"ansible-playbook exited with rc={result.rc} ({result.status})"
    return Text(f"ERROR: {why}", style="bold red")


def render_recap(result: RunResult, console: Console, *, plain: bool) -> None:
    """Print the per-host recap, the failures in one line each, and a one-line verdict."""
    if result.stats:
        if plain:
            _recap_lines(result, console)
        else:
            console.print(_recap_table(result))
    for f in result.failures:
        what = "unreachable" if f.unreachable else f"task {f.task!r}"
        console.print(
            Text.assemble(("  - ", "dim"), (f.host, "bold"), f": {what}: ", (f.msg, "red")),
            soft_wrap=True,
        )
    console.print(_verdict(result), soft_wrap=True)
