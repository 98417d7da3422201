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
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from llmfleet.run_outcome import ExitCode, RunResult
from llmfleet.runner import run_playbook

CHECK_PLAYBOOK = "playbooks/converged.yml"
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


def unchanged(
    root: Path, inventory: Path, *, console: Console, **run_options: Any
) -> RunResult | None:
    """Ask every host whether it is as the last full run left it (``run_options``: what
    run_playbook is given besides); print the answer. The comparison's result when nothing
    changed (the caller stops there), else None."""
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
    console.print(Text("Walking site.yml, since the last full run:", style="bold"))
    for line in reasons[:REASONS_SHOWN]:
        console.print(Text(f"  {line}"), soft_wrap=True, highlight=False)
    if len(reasons) > REASONS_SHOWN:
        console.print(Text(f"  and {len(reasons) - REASONS_SHOWN} more"), highlight=False)
    return None


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
) -> tuple[Path, RunResult]:
    """Run ``playbook``; with ``ask``, the comparison first, which is the whole run when no
    host changed. The playbook that ran last, and its result."""
    # What the comparison and the playbook are both given.
    shared: dict[str, Any] = {"extravars": extravars, "verbosity": verbosity, "plain": plain}
    if ask:
        result = unchanged(root, inventory, console=console, **shared)
        if result is not None:
            return root / CHECK_PLAYBOOK, result
    return playbook, run_playbook(
        playbook, inventory, console=console, root=root, **shared, **options
    )
