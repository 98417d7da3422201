"""Run a playbook through ansible-runner: its arguments, the run, and what it came to.

What the user sees while it runs is ``run_display`` (live or plain), at the end
``run_recap``; Ctrl-C is ``run_cancel``; the outcome and its exit code ``run_outcome``.
"""

from __future__ import annotations

import json
import os
import shlex
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import ansible_runner  # type: ignore[import-untyped]
from rich.console import Console
from rich.live import Live
from rich.text import Text

from llmfleet.paths import ansible_env, collection_root
from llmfleet.run_artifacts import make_private_folder, run_ident, scrub, secret_values
from llmfleet.run_cancel import sigint_to_cancel
from llmfleet.run_display import RunProgress
from llmfleet.run_outcome import NO_HOSTS, ExitCode, RunResult
from llmfleet.run_recap import render_recap

# How many runs' records a folder of artifacts keeps (ansible-runner's rotate_artifacts).
RUNS_KEPT = 200


class RunnerError(RuntimeError):
    """The run could not start (missing playbook or inventory, ansible-runner refused)."""


def _extravar_args(
    extravars: Mapping[str, Any] | Sequence[Mapping[str, Any] | Path] | None, workdir: Path
) -> list[str]:
    """``-e @file`` arguments, in order; inline variables go to files so no value is on argv."""
    if extravars is None:
        return []
    items: Sequence[Mapping[str, Any] | Path]
    items = [extravars] if isinstance(extravars, Mapping) else extravars
    args: list[str] = []
    for i, item in enumerate(items):
        if isinstance(item, Path):
            path = item.expanduser().resolve()
            if not path.is_file():
                raise RunnerError(f"extra-vars file not found: {item}")
        else:
            if not item:
                continue
            path = workdir / f"extravars-{i:02d}.json"
            path.write_text(json.dumps(dict(item)), encoding="utf-8")
            path.chmod(0o600)
        args += ["-e", f"@{path}"]
    return args


def run_playbook(
    playbook: Path,
    inventory: Path,
    *,
    limit: str | None = None,
    tags: str | None = None,
    skip_tags: str | None = None,
    extravars: Mapping[str, Any] | Sequence[Mapping[str, Any] | Path] | None = None,
    check: bool = False,
    diff: bool = False,
    verbosity: int = 0,
    console: Console,
    plain: bool | None = None,
    root: Path | None = None,
    status: Callable[[], str | None] | None = None,
    artifacts: Path | None = None,
    quiet: bool = False,
    recap: bool = True,
) -> RunResult:
    """Run ``playbook`` against ``inventory`` and return what happened.

    ``extravars`` is a mapping, or a sequence of mappings and ``Path``\\ s (YAML/JSON files)
    applied in order, later ones winning as with repeated ``-e``. ``plain`` defaults to "stdout
    is not a terminal". ``root`` (the collection root, for ``ANSIBLE_CONFIG`` and the working
    directory) defaults to :func:`llmfleet.paths.collection_root`. ``status``, when given, is
    polled for a line of progress of its own (shown live, or on task retries in plain mode).
    ``artifacts``, when given, keeps ansible-runner's record of the run (its job events and
    output) in a folder of its own in that directory (``<UTC time>-<playbook>``, see
    :func:`llmfleet.run_artifacts.run_ident`), both owner-only (0700) and scrubbed of
    secrets (:func:`llmfleet.run_artifacts.scrub`); ``RunResult.artifacts`` names it.
    ``quiet`` (a command whose product is a table): one line of progress instead of the task
    stream (see :class:`llmfleet.run_display.RunProgress`). Without ``recap``, the recap is
    printed only when a host failed (the command prints its own table).

    Raises :class:`RunnerError` when the run cannot start.
    """
    playbook = playbook.expanduser().resolve()
    inventory = inventory.expanduser().resolve()
    if not playbook.is_file():
        raise RunnerError(f"playbook not found: {playbook}")
    if not inventory.exists():
        raise RunnerError(f"inventory not found: {inventory}")
    if root is None:
        root = collection_root()
    if plain is None:
        plain = not console.is_terminal

    progress = RunProgress(console, plain=plain, verbosity=verbosity, status=status, quiet=quiet)
    with tempfile.TemporaryDirectory(prefix="llmfleet-run-") as tmp:
        workdir = Path(tmp)
        cmdline = _extravar_args(extravars, workdir)
        cmdline += [flag for flag, on in (("--check", check), ("--diff", diff)) if on]
        envdir = workdir / "env"
        envdir.mkdir()
        # check the cancel flag every second rather than every 5 (ansible-runner's default)
        (envdir / "settings").write_text(json.dumps({"pexpect_timeout": 1}), encoding="utf-8")
        optional = {"limit": limit, "tags": tags, "skip_tags": skip_tags, "verbosity": verbosity}
        kwargs: dict[str, Any] = {
            "private_data_dir": str(workdir),
            "project_dir": str(root),
            "playbook": str(playbook),
            "inventory": str(inventory),
            "envvars": ansible_env(root, tty=console.is_terminal and not plain),
            "quiet": True,
            "event_handler": progress.handle,
            "cancel_callback": progress.should_cancel,
            **{k: v for k, v in optional.items() if v},
        }
        if cmdline:
            kwargs["cmdline"] = shlex.join(cmdline)
        run_folder = _keep_artifacts(kwargs, artifacts, playbook)

        try:
            with sigint_to_cancel(progress):
                if plain:
                    r = _start(kwargs)
                else:
                    with Live(progress, console=console, refresh_per_second=4, transient=True):
                        r = _start(kwargs)
        finally:
            if run_folder is not None:
                scrub(run_folder, keep_env=kwargs["envvars"], secrets=secret_values(os.environ))

    result = RunResult(
        rc=r.rc if isinstance(r.rc, int) else 1,
        status=_status(str(r.status), progress),
        stats=progress.final_stats or {h: row.stats for h, row in progress.hosts.items()},
        failures=list(progress.failures),
        elapsed=time.monotonic() - progress.started,
        artifacts=run_folder,
        reports=list(progress.reports),
        converged=dict(progress.converged),
    )
    # ansible stopped before playing (parse error, bad option...): show what it said, unless
    # -v already printed it as it came
    stopped_early = progress.final_stats is None and verbosity == 0
    if stopped_early and result.exit_code not in (ExitCode.OK, ExitCode.INTERRUPTED):
        for line in progress.output_tail:
            console.print(Text(line, style="red"), soft_wrap=True, highlight=False)
    if recap or result.exit_code != ExitCode.OK:
        render_recap(result, console, plain=plain)
    return result


def _status(status: str, progress: RunProgress) -> str:
    """ansible-runner's status of the run, but :data:`NO_HOSTS` for a success whose recap
    names no host: no play had one, and nothing was done."""
    return NO_HOSTS if status == "successful" and progress.final_stats == {} else status


def _keep_artifacts(kwargs: dict[str, Any], artifacts: Path | None, playbook: Path) -> Path | None:
    """Point ansible-runner at a folder of this run's own under ``artifacts``; that folder."""
    if artifacts is None:
        return None  # ansible-runner writes them in the temporary folder, removed after
    artifacts = make_private_folder(artifacts)
    kwargs["artifact_dir"] = str(artifacts)
    # The oldest go once there are more (status and doctor keep theirs too).
    kwargs["rotate_artifacts"] = RUNS_KEPT
    ident = run_ident(artifacts, playbook)
    kwargs["ident"] = ident
    return artifacts / ident


def _start(kwargs: dict[str, Any]) -> Any:
    try:
        return ansible_runner.run(**kwargs)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # ansible-runner's ConfigurationError and friends
        raise RunnerError(f"ansible-runner could not start the run: {exc}") from exc
