"""Commands that other distributions add to ``llmfleet``.

Each entry point of the group ``llmfleet.commands`` names a Typer app, added under the entry
point's name. The lab (the distribution llmfleet-lab, ``lab/pyproject.toml``) adds ``llmfleet
lab`` this way, so the product's wheel holds none of it; the checkout's ``make venv``
installs both.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from importlib import metadata

import typer

GROUP = "llmfleet.commands"


def add_command_plugins(
    app: typer.Typer, entry_points: Iterable[metadata.EntryPoint] | None = None
) -> list[str]:
    """Add the command of each entry point of :data:`GROUP` (all installed ones unless
    ``entry_points`` is given) to ``app``, by name; return the names added. One that does not
    load, or is no Typer app, is left out with a warning on stderr: a broken plugin must not
    take the product's own commands with it."""
    found = metadata.entry_points(group=GROUP) if entry_points is None else entry_points
    added = []
    for entry in sorted(found, key=lambda entry: entry.name):
        # Whatever a plugin raises as it loads (a missing dependency, its own bug).
        try:
            command = entry.load()
        except Exception as exc:
            _warn(entry, str(exc))
            continue
        if not isinstance(command, typer.Typer):
            _warn(entry, "not a Typer app")
            continue
        app.add_typer(command, name=entry.name)
        added.append(entry.name)
    return added


def _warn(entry: metadata.EntryPoint, why: str) -> None:
    print(f"warning: command {entry.name} ({entry.value}) not loaded: {why}", file=sys.stderr)
