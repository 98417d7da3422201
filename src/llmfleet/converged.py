"""``llmfleet up``'s early stop: before it walks ``site.yml``, one call per host
(``playbooks/converged.yml``) says whether every host is as the last full run left it.

"As it left it" is what ``llmfleet.cluster.converged_state`` compares: the same inputs (the
collection, the variables, the groups), the same boot, every file, unit, container, package and
kernel setting that run managed in the state it left them, every readiness check it waited on
passing, and every host's record coming from that one run. Any other answer, a host that does
not answer included, walks ``site.yml`` as before, and says why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from rich.console import Console
from rich.text import Text

from llmfleet.reach import walk_tags
from llmfleet.run_outcome import ExitCode, RunResult
from llmfleet.runner import run_playbook

CHECK_PLAYBOOK = "playbooks/converged.yml"
# The extra variable that names the run whose record a limited walk extends
# (playbooks/converged_record.yml).
WALK_FROM = "__llmfleet_converged_walk_from"
# How many of the reasons are printed before "and N more".
REASONS_SHOWN = 8


def verdict(result: RunResult) -> tuple[str | None, list[str]]:
    """The run every host's record comes from when all are as it left them, else None; and
    the reasons, a line each (``host: why``)."""
    hosts = sorted(set(result.stats) | set(result.converged))
    if not hosts:
        return None, ["no host of the inventory answered the comparison"]
    reasons: list[str] = []
    runs: set[str] = set()
    for host in hosts:
        answer = result.converged.get(host)
        if answer is None:
            reasons.append(f"{host}: did not answer")
            continue
        reasons += [f"{host}: {change}" for change in answer.get("changes") or []]
        if not answer.get("converged") and not answer.get("changes"):
            reasons.append(f"{host}: not as the last full run left it")
        runs.add(str(answer.get("run") or ""))
    if not reasons and len(runs) > 1:
        reasons.append("the hosts' records come from different runs: " + ", ".join(sorted(runs)))
    if reasons or result.exit_code != ExitCode.OK:
        return None, reasons or [f"the comparison ended with exit code {int(result.exit_code)}"]
    return runs.pop(), []


@dataclass(frozen=True)
class Walk:
    """What ``llmfleet up`` walks: the tags a change reaches and the run whose record the
    walk extends, or everything (``tags`` None)."""

    tags: list[str] | None = None
    extends: str = ""
    variables: list[str] = field(default_factory=list)


def variables_only(result: RunResult) -> tuple[str, list[str]] | None:
    """The run every host's record comes from and the variables that changed since, when
    nothing else did on any host (no other input, reboot, item or readiness check); else
    None."""
    runs: set[str] = set()
    variables: set[str] = set()
    hosts = set(result.stats) | set(result.converged)
    if not hosts or result.exit_code != ExitCode.OK:
        return None
    for host in hosts:
        answer = result.converged.get(host) or {}
        parts = list(answer.get("changed_inputs") or [])
        # Only the inputs' line: nothing else differs (the module's compare says it first).
        if len(answer.get("changes") or []) != bool(parts):
            return None
        if not all(part.startswith("var:") for part in parts):
            return None
        variables |= {part[4:] for part in parts}
        runs.add(str(answer.get("run") or ""))
    if len(runs) != 1 or not variables or "" in runs:
        return None
    return runs.pop(), sorted(variables)


def scope(root: Path, result: RunResult) -> Walk:
    """What to walk after the comparison ``result`` found changes: the tags the changed
    variables reach (llmfleet.reach) when nothing but variables changed, else everything."""
    found = variables_only(result)
    if found is None:
        return Walk()
    run, variables = found
    tags = walk_tags(root, variables)
    return Walk(tags, run, variables) if tags is not None else Walk(variables=variables)


def unchanged(
    root: Path, inventory: Path, *, console: Console, **run_options: Any
) -> RunResult | Walk:
    """Ask every host whether it is as the last full run left it (``run_options``: what
    run_playbook is given besides); print the answer. The comparison's result when nothing
    changed (the caller stops there), else what to walk (:func:`scope`)."""
    result = run_playbook(
        root / CHECK_PLAYBOOK,
        inventory,
        console=console,
        root=root,
        quiet=True,
        recap=False,
        **run_options,
    )
    run, reasons = verdict(result)
    if run is not None:
        hosts = ", ".join(sorted(result.converged))
        console.print(
            Text(
                f"Nothing changed since the last full run ({run}) on {hosts}: every file, unit "
                f"and container as it left them, every readiness check passing "
                f"({result.elapsed:.1f} s). llmfleet up --full walks every task.",
                style="green",
            ),
            soft_wrap=True,
        )
        return result
    walk = scope(root, result)
    console.print(Text("Walking site.yml, since the last full run:", style="bold"))
    for line in reasons[:REASONS_SHOWN]:
        console.print(Text(f"  {line}"), soft_wrap=True, highlight=False)
    if len(reasons) > REASONS_SHOWN:
        console.print(Text(f"  and {len(reasons) - REASONS_SHOWN} more"), highlight=False)
    if walk.tags is not None:
        console.print(
            Text(
                f"Only variables changed, and nothing else since run {walk.extends}: walking "
                f"the tasks they reach (--tags {','.join(walk.tags) or 'always'}), the checks "
                "of the whole inventory included. llmfleet up --full walks every task.",
                style="bold",
            ),
            soft_wrap=True,
        )
    elif walk.variables:
        console.print(
            Text(
                "Walking every task: a changed variable reaches what no tag bounds "
                f"({', '.join(walk.variables[:REASONS_SHOWN])})."
            ),
            soft_wrap=True,
        )
    return walk


class Ran(NamedTuple):
    """The playbook that ran last, its result, and the ``--tags`` it was limited to (given,
    or those a change of variables reaches; None when it walked every task)."""

    playbook: Path
    result: RunResult
    tags: str | None


def run_unless_unchanged(
    playbook: Path,
    inventory: Path,
    *,
    ask: bool,
    extravars: Mapping[str, Any] | Sequence[Mapping[str, Any] | Path] | None,
    console: Console,
    plain: bool | None,
    verbosity: int,
    root: Path,
    **options: Any,
) -> Ran:
    """Run ``playbook``; with ``ask``, the comparison first, which is the whole run when no
    host changed, and limits the run to the tags a change reaches when only variables
    changed."""
    # What the comparison and the playbook are both given.
    shared: dict[str, Any] = {"extravars": extravars, "verbosity": verbosity, "plain": plain}
    if ask:
        walk = unchanged(root, inventory, console=console, **shared)
        if isinstance(walk, RunResult):
            return Ran(root / CHECK_PLAYBOOK, walk, None)
        if walk.tags is not None:
            options["tags"] = ",".join(walk.tags or ["always"])
            shared["extravars"] = [*_as_sequence(extravars), {WALK_FROM: walk.extends}]
    result = run_playbook(playbook, inventory, console=console, root=root, **shared, **options)
    return Ran(playbook, result, options.get("tags"))


def _as_sequence(
    extravars: Mapping[str, Any] | Sequence[Mapping[str, Any] | Path] | None,
) -> list[Mapping[str, Any] | Path]:
    if extravars is None:
        return []
    if isinstance(extravars, Mapping):
        return [extravars]
    return list(extravars)
