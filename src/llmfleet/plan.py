"""``llmfleet plan``: the capacity plan of an inventory's launches, as a table or JSON.

``playbooks/plan.yml`` computes each plan on this machine (the filter
``llmfleet.cluster.capacity_plan``, from the profile and the inventory alone, no host is
reached) and writes it as JSON; this module runs it and prints what it wrote.
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

from llmfleet.cli_options import (
    ExtraVarsOption,
    InventoryOption,
    VerboseOption,
    fail,
)
from llmfleet.playbook_files import run_collecting, start
from llmfleet.run_outcome import ExitCode

GIB = 1024**3


def run_plan_playbook(
    root: Path, inventory: Path, extravars: list[dict[str, Any] | Path], verbosity: int
) -> tuple[ExitCode, list[dict[str, Any]]]:
    """Run playbooks/plan.yml (its progress on stderr); its exit code and the plans written."""
    result, written = run_collecting(
        root,
        "plan",
        inventory,
        extravars=extravars,
        folder_variable="llmfleet_plan_dir",
        verbosity=verbosity,
        plain=None,
    )
    return result.exit_code, list(written.values())


def plan_exit_code(plans: list[dict[str, Any]]) -> ExitCode:
    """1 when a launch cannot be planned, 2 when the layout asked for does not fit, else 0."""
    if any("error" in plan for plan in plans):
        return ExitCode.NOT_STARTED
    if any(not plan["plan"]["layout"]["fits"] for plan in plans):
        return ExitCode.HOST_FAILED
    return ExitCode.OK


def _title(entry: dict[str, Any]) -> str:
    return "{}: profile {} ({})".format(
        ", ".join(entry["hosts"]), entry["profile"], entry.get("model", "?")
    )


def _is_asked(row: dict[str, Any], asked: dict[str, Any]) -> bool:
    return (row["tensor_parallel_size"], row["pipeline_parallel_size"], row["hosts"]) == (
        asked["tensor_parallel_size"],
        asked["pipeline_parallel_size"],
        asked["hosts"],
    )


def plan_table(entry: dict[str, Any]) -> Table:
    """One launch's layouts: per GPU weights, KV bytes per token, KV cache tokens and the
    maximum concurrency at max_model_len, the layout asked for marked; a line each, legible
    at 80 columns (why a layout does not fit is under the table, see print_plans)."""
    plan = entry["plan"]
    table = Table(
        title=escape(_title(entry)),
        caption="max_model_len {:,}; * the layout asked for".format(
            plan["settings"]["max_model_len"]
        ),
        box=box.SIMPLE_HEAD,
        collapse_padding=True,
    )
    columns = ("hosts", "TP", "PP", "weights/GPU", "KV/token", "KV/GPU", "KV tokens", "max conc.")
    for column in columns:
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("fits", no_wrap=True)
    for row in plan["layouts"]:
        table.add_row(
            str(row["hosts"]) + (" *" if _is_asked(row, plan["layout"]) else ""),
            str(row["tensor_parallel_size"]),
            str(row["pipeline_parallel_size"]),
            "{:.2f} GiB".format(row["weights_per_rank_bytes"] / GIB),
            "{:,} B".format(row["kv_bytes_per_token"]),
            "{:.2f} GiB".format(row["kv_cache_bytes"] / GIB),
            "{:,}".format(row["kv_cache_tokens"]),
            "{:.2f}x".format(row["max_concurrency"]),
            "[green]yes[/green]" if row["fits"] else "[red]no[/red]",
        )
    return table


def _layout_problems(console: Console, plan: dict[str, Any]) -> None:
    """Why each layout that does not fit does not."""
    for row in plan["layouts"]:
        if not row["fits"]:
            console.print(
                "  TP {} x PP {} on {} host(s) does not fit: {}".format(
                    row["tensor_parallel_size"],
                    row["pipeline_parallel_size"],
                    row["hosts"],
                    escape("; ".join(row["problems"])),
                ),
                highlight=False,
            )


def print_plans(console: Console, plans: list[dict[str, Any]]) -> None:
    """Each launch's table, the layout asked for, why it cannot work and the assumptions."""
    for entry in plans:
        if "error" in entry:
            console.print(
                "[bold red]error:[/bold red] {}: {}".format(
                    escape(_title(entry)), escape(entry["error"])
                ),
                soft_wrap=True,
                highlight=False,
            )
            continue
        plan = entry["plan"]
        asked = plan["layout"]
        console.print(plan_table(entry))
        _layout_problems(console, plan)
        verdict = (
            "[green]fits[/green]: {:,} tokens of KV cache, {:.2f}x at max_model_len".format(
                asked["kv_cache_tokens"], asked["max_concurrency"]
            )
            if asked["fits"]
            else "[red]does not fit[/red]"
        )
        console.print(
            "Asked for: tensor parallel {} x pipeline parallel {}: {}".format(
                asked["tensor_parallel_size"], asked["pipeline_parallel_size"], verdict
            ),
            highlight=False,
        )
        for problem in entry["problems"]:
            console.print("  - " + escape(problem), soft_wrap=True, highlight=False)
        console.print("Assumptions:", highlight=False)
        for assumption in plan["assumptions"]:
            console.print("  - " + escape(assumption), soft_wrap=True, highlight=False)
        console.print()


def plan(
    inventory: InventoryOption,
    extra_vars: ExtraVarsOption = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the plans as JSON on stdout (one per launch: hosts, profile, model, "
            "plan, problems; or error).",
        ),
    ] = False,
    allowance: Annotated[
        float | None,
        typer.Option(
            "--allowance",
            min=0,
            metavar="GIB",
            help="GiB per GPU allowed for what vLLM counts besides weights and KV cache "
            "(activation peak, CUDA graphs, CUDA context, NCCL and torch buffers): "
            "[cyan]llmfleet_plan_allowance_gib[/cyan] for this plan; the planner's 2 GiB "
            "when neither is set.",
        ),
    ] = None,
    verbose: VerboseOption = 0,
) -> None:
    """Plan the KV cache of every launch of an inventory."""
    root, extravars = start(inventory, extra_vars)
    if allowance is not None:
        extravars = [*extravars, {"llmfleet_plan_allowance_gib": allowance}]
    code, plans = run_plan_playbook(root, inventory, extravars, verbose)
    if code != ExitCode.OK:
        raise typer.Exit(int(code))
    if not plans:
        raise fail(f"{inventory} has no vLLM launch to plan (no host in the sparks or gh200 group)")
    if as_json:
        typer.echo(json.dumps({"inventory": str(inventory), "plans": plans}, indent=2))
    else:
        print_plans(Console(), plans)
    raise typer.Exit(int(plan_exit_code(plans)))
