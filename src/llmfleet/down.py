"""``llmfleet down``: stop and remove what the collection runs on the serving hosts, keeping
their last logs first (``playbooks/down.yml``).

The logs of every host land in ``artifacts/down/<UTC time>/`` in the collection (owner-only):
one JSON document per host as ``playbooks/logs.yml`` writes it, and ``logs.txt``, every host's
entries merged in time order.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from llmfleet.cli_options import (
    ExtraVarsOption,
    InventoryOption,
    JsonOption,
    LimitOption,
    PlainOption,
    VerboseOption,
    fail,
)
from llmfleet.log_entries import merged, plain_line
from llmfleet.playbook_files import start
from llmfleet.run_outcome import ExitCode, result_summary
from llmfleet.runner import RunnerError, run_playbook

DOWN_FOLDER = "artifacts/down"


def logs_folder(root: Path, now: float) -> Path:
    """A new owner-only folder for this run's logs: ``artifacts/down/<UTC time>``."""
    folder = root / DOWN_FOLDER / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    return folder


def keep_merged_logs(folder: Path) -> Path | None:
    """Write ``logs.txt``: every host's kept entries merged in time order (None when no host
    wrote any)."""
    documents = [
        json.loads(path.read_text(encoding="utf-8")) for path in sorted(folder.glob("*.json"))
    ]
    if not documents:
        return None
    width = max(len(document["host"]) for document in documents)
    target = folder / "logs.txt"
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        for entry in merged(documents):
            handle.write(plain_line(entry, width) + "\n")
    return target


def down(  # noqa: PLR0917 - typer maps parameters to options
    inventory: InventoryOption,
    limit: LimitOption = None,
    purge: Annotated[
        bool,
        typer.Option(
            "--purge",
            help="Also remove the configuration, environment and secret files and the firewall "
            "the collection wrote.",
        ),
    ] = False,
    purge_network: Annotated[
        bool,
        typer.Option(
            "--purge-network",
            help="Also remove the CX7 netplan file the collection wrote: the fabric addresses "
            "go (the next [cyan]llmfleet up[/cyan] sets them again).",
        ),
    ] = False,
    monitoring: Annotated[
        bool,
        typer.Option("--monitoring", help="Also stop and disable Prometheus and node_exporter."),
    ] = False,
    check: Annotated[
        bool, typer.Option("--check", help="Dry run: report what would stop, stop nothing.")
    ] = False,
    extra_vars: ExtraVarsOption = None,
    verbose: VerboseOption = 0,
    plain: PlainOption = False,
    as_json: JsonOption = False,
) -> None:
    """Stop and remove what the collection runs."""
    root, extravars = start(inventory, extra_vars)
    folder = logs_folder(root, time.time())
    settings: dict[str, Any] = {
        "llmfleet_logs_dir": str(folder),
        "llmfleet_down_purge": purge,
        "llmfleet_down_purge_network": purge_network,
        "llmfleet_down_monitoring": monitoring,
    }
    try:
        result = run_playbook(
            root / "playbooks" / "down.yml",
            inventory,
            limit=limit,
            check=check,
            # Ours first: the user's -e still wins.
            extravars=[settings, *extravars],
            verbosity=verbose,
            console=Console(stderr=as_json),
            plain=True if plain else None,
            root=root,
        )
    except RunnerError as exc:
        raise fail(str(exc)) from None
    except KeyboardInterrupt:
        raise fail("interrupted", ExitCode.INTERRUPTED) from None
    kept = keep_merged_logs(folder)
    if as_json:
        summary = {"inventory": str(inventory), "logs": str(kept) if kept else None}
        typer.echo(json.dumps({**summary, **result_summary(result)}, indent=2))
    elif kept:
        Console().print(f"The last logs: {escape(str(kept))}", highlight=False, soft_wrap=True)
    raise typer.Exit(int(result.exit_code))
