"""What the ``llmfleet`` commands share: their common options, ``-e`` parsing, and how a
command that cannot start says why (exit 1)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from llmfleet.declared_variables import DeclaredVariables
from llmfleet.inventory_files import load as load_vars_file
from llmfleet.run_outcome import ExitCode

_err = Console(stderr=True)


def error(message: str) -> None:
    _err.print(f"[bold red]error:[/bold red] {escape(message)}", soft_wrap=True, highlight=False)


def warn(message: str) -> None:
    _err.print(
        f"[bold yellow]warning:[/bold yellow] {escape(message)}", soft_wrap=True, highlight=False
    )


def fail(message: str, code: ExitCode = ExitCode.NOT_STARTED) -> typer.Exit:
    error(message)
    return typer.Exit(int(code))


_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_extra_vars(values: list[str], declared: DeclaredVariables) -> list[dict[str, Any] | Path]:
    """Turn ``-e`` values into run_playbook's ``extravars``, keeping their order.

    ``KEY=VALUE`` (one pair; the value is a string, as with ansible, but an int, a float, a
    bool, a list or a dict where ``declared`` says KEY is one), ``@FILE`` (YAML or JSON file)
    or a JSON object (``'{"vllm_port": 8001}'``), both passed as they are. Raises
    ``ValueError`` on anything else, or on a value that is not of its declared type.
    """
    out: list[dict[str, Any] | Path] = []
    for raw in values:
        value = raw.strip()
        if value.startswith("@"):
            path = Path(value[1:]).expanduser()
            if not path.is_file():
                raise ValueError(f"extra-vars file not found: {value[1:]}")
            out.append(path)
        elif value.startswith("{"):
            try:
                obj = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"extra-vars is not valid JSON: {exc}") from exc
            if not isinstance(obj, dict):
                raise ValueError("extra-vars JSON must be an object")
            out.append(obj)
        else:
            key, sep, val = raw.partition("=")
            key = key.strip()
            if not sep or not _VAR_NAME.match(key):
                raise ValueError(f"extra-vars {raw!r} is not KEY=VALUE, @FILE or a JSON object")
            try:
                out.append({key: declared.typed(key, val)})
            except ValueError as exc:
                raise ValueError(f"-e {exc}") from None
    return out


def extra_var_names(extravars: list[dict[str, Any] | Path]) -> list[str]:
    """The names the parsed ``-e`` values set, in order: a mapping's keys and a file's top-level
    keys (none from a file that is not a mapping, e.g. one encrypted whole by ansible-vault)."""
    names: list[str] = []
    for item in extravars:
        found = load_vars_file(item) if isinstance(item, Path) else item
        if isinstance(found, dict):
            names += [str(name) for name in found]
    return names


# ansible-runner's records of the runs, in the collection (git ignores artifacts/).
RUNS_FOLDER = "artifacts/runs"

# Options that `up` and `bench` share.
InventoryOption = Annotated[
    Path,
    typer.Option(
        "-i",
        "--inventory",
        help="Inventory file or directory (e.g. [cyan]inventory/sparks[/cyan]).",
        show_default=False,
    ),
]
LimitOption = Annotated[
    str | None,
    typer.Option("--limit", "-l", help="Only these hosts/groups (ansible pattern)."),
]
ExtraVarsOption = Annotated[
    list[str] | None,
    typer.Option(
        "-e",
        "--extra-vars",
        help="[cyan]KEY=VALUE[/cyan], [cyan]@FILE[/cyan] (YAML/JSON) or a JSON object; "
        "repeatable, later ones win. A VALUE becomes a number, a boolean, a list ([cyan]a,b[/cyan] "
        "or [cyan]\\[a, b][/cyan]) or a dict where KEY is declared one (a role's argument spec, "
        "[cyan]meta/collection_variables.yml[/cyan]), else stays a string; a KEY with the "
        "collection's or a role's prefix that nothing declares is warned about.",
        show_default=False,
    ),
]
VerboseOption = Annotated[
    int,
    typer.Option(
        "-v", "--verbose", count=True, help="More ansible output (-vvv for connection debug)."
    ),
]
ArtifactsOption = Annotated[
    Path | None,
    typer.Option(
        "--artifacts",
        metavar="DIR",
        help="Where ansible-runner's record of each run (job events, output) is kept, a folder "
        "per run ([cyan]<UTC time>-<playbook>[/cyan]), owner-only (0700), secrets hidden "
        f"[default: [cyan]{RUNS_FOLDER}[/cyan] in the collection].",
        show_default=False,
    ),
]
JsonOption = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print the result as JSON on stdout (exit code, ansible's rc, per host "
        "ok/changed/failed/unreachable, failures, the run's artifacts folder, reports, what the "
        "comparison with the last full run said of each host); the "
        "progress goes to stderr. Nothing on stdout when the run cannot start (exit 1).",
    ),
]
PlainOption = Annotated[
    bool,
    typer.Option("--plain", help="One log line per task instead of the live table (CI)."),
]
FullOption = Annotated[
    bool,
    typer.Option("--full", help="Walk every task even when no host changed since the last run."),
]
