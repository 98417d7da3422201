"""What the commands share: their start (the inventory, the collection, ``-e`` typed as the
collection declares its variables), and for those that read the cluster (``plan``, ``status``,
``logs``, ``doctor``) a playbook run that writes JSON files into a folder of this machine's the
command then reads, and how a host's failure is told."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from llmfleet.cli_options import (
    RUNS_FOLDER,
    error,
    extra_var_names,
    fail,
    parse_extra_vars,
    warn,
)
from llmfleet.declared_variables import DeclaredVariables
from llmfleet.inventory_files import variable_names
from llmfleet.paths import CollectionNotFound, collection_root
from llmfleet.run_outcome import RunResult
from llmfleet.runner import RunnerError, run_playbook
from llmfleet.vault_check import vault_problem


def start(
    inventory: Path, extra_vars: list[str] | None, *, strict: bool = False
) -> tuple[Path, list[dict[str, Any] | Path]]:
    """The collection and the parsed ``-e`` values, typed as the collection declares them; exit 1
    saying why when one is wrong, or when the inventory holds vaulted values and no vault
    password is given (:mod:`llmfleet.vault_check`). A name with a declared prefix that
    nothing declares (a typo), given with ``-e`` or in the inventory's files, is warned about,
    or with ``strict`` refused (exit 1)."""
    if not inventory.exists():
        raise fail(f"inventory not found: {inventory} (pass an inventory file or directory)")
    try:
        root = collection_root()
        declared = DeclaredVariables.load(root)
        extravars = parse_extra_vars(extra_vars or [], declared)
    except (CollectionNotFound, ValueError) as exc:
        raise fail(str(exc)) from None
    problem = vault_problem(inventory, root / "ansible.cfg")
    if problem:
        raise fail(f"{inventory}: {problem}")
    typos = [f"-e {typo.message()}" for typo in declared.undeclared(extra_var_names(extravars))]
    typos += _inventory_typos(inventory, declared)
    for message in typos:
        (error if strict else warn)(message)
    if strict and typos:
        raise fail("--strict: -e and the inventory may only set variables the collection declares")
    return root, extravars


def _inventory_typos(inventory: Path, declared: DeclaredVariables) -> list[str]:
    """Each variable of the inventory's files with a declared prefix that nothing declares,
    with its file and the closest declared name."""
    found = variable_names(inventory)
    unknown = {typo.name: typo for typo in declared.undeclared(name for _, name in found)}
    return [f"{path}: {unknown[name].message()}" for path, name in found if name in unknown]


def run_collecting(
    root: Path,
    playbook: str,
    inventory: Path,
    *,
    extravars: list[dict[str, Any] | Path],
    folder_variable: str,
    limit: str | None = None,
    verbosity: int = 0,
    plain: bool | None = None,
) -> tuple[RunResult, dict[str, Any]]:
    """Run ``playbooks/<playbook>.yml`` (one line of progress on stderr, the task stream with
    ``-v`` and in the run's artifacts) with ``folder_variable`` naming a new private folder; its
    result and the JSON files it wrote there, by file stem. Exit 1 when the run cannot
    start."""
    with tempfile.TemporaryDirectory(prefix=f"llmfleet-{playbook}-") as folder:
        try:
            result = run_playbook(
                root / "playbooks" / f"{playbook}.yml",
                inventory,
                limit=limit,
                extravars=[*extravars, {folder_variable: folder}],
                verbosity=verbosity,
                console=Console(stderr=True),
                plain=plain,
                root=root,
                artifacts=root / RUNS_FOLDER,
                quiet=True,
                recap=False,
            )
        except RunnerError as exc:
            raise fail(str(exc)) from None
        written = {
            path.stem: json.loads(path.read_text(encoding="utf-8"))
            for path in sorted(Path(folder).glob("*.json"))
        }
    return result, written


def print_failures(result: RunResult) -> None:
    """Each host's failure, one line on stderr: the host, the task, the reason."""
    console = Console(stderr=True)
    for failure in result.failures:
        console.print(
            f"[red]{escape(failure.host)}[/red]: {escape(failure.task)}: {escape(failure.msg)}",
            soft_wrap=True,
            highlight=False,
        )
