"""Run a playbook through ansible-runner and show its progress.

Two renderings of the same event stream:

- **live** (a terminal): a rich Live table, one row per host with its ok / changed / failed /
  skipped / unreachable counts and the task it is on, under a header with the play and the
  elapsed time. A failing task is printed at once, above the table.
- **plain** (CI logs, ``--plain``, or when stdout is not a terminal): one line per finished task
  per host (``[spark-1] ok: Task name``), failures followed by their details.

Failure details are the module's ``msg``, its ``rc`` and the last lines of ``stderr`` /
``stdout`` / ``module_stderr`` / ``module_stdout``. Module arguments (``invocation``) are never
shown, and a ``no_log`` result only ever shows ansible's "censored" notice.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from types import FrameType
from typing import Any

import ansible_runner  # type: ignore[import-untyped]
from rich import box
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from llmfleet.paths import ansible_env, collection_root

TAIL_LINES = 20
# Tasks whose message is meant for the user (reports): shown in both display modes.
DEBUG_ACTIONS = frozenset({"debug", "ansible.builtin.debug", "ansible.legacy.debug"})
# Asserts with a success_msg are reports too ("Ray at ...: 2 nodes"); their default is not.
ASSERT_ACTIONS = frozenset({"assert", "ansible.builtin.assert", "ansible.legacy.assert"})
ASSERT_DEFAULT_MSG = "All assertions passed"
MAX_ITEM_FAILURES = 3
OUTPUT_KEYS: tuple[str, ...] = ("stderr", "stdout", "module_stderr", "module_stdout")
NO_LOG_NOTICE = "output hidden: no_log: true is set on this task"


class ExitCode(IntEnum):
    """Exit codes of ``llmfleet up`` (and of any command that runs a playbook)."""

    OK = 0
    NOT_STARTED = 1
    HOST_FAILED = 2
    UNREACHABLE = 3
    PARSE_ERROR = 4
    INTERRUPTED = 130


def exit_code_for(  # noqa: PLR0911 - a decision table reads best as early returns
    *, rc: int | None, status: str, failed_hosts: int, unreachable_hosts: int
) -> ExitCode:
    """Map an ansible run's outcome to the CLI's exit code.

    ``rc`` is ansible-playbook's return code (None when it never ran), ``status`` ansible-runner's
    (``successful``, ``failed``, ``canceled``, ``timeout``...), the host counts come from the
    recap. ansible-playbook returns 4 both for a parse error and for unreachable hosts, so the
    recap decides: hosts that failed a task win over unreachable ones, and rc 4 with neither is
    a playbook/inventory parse error. Any other non-zero rc means the run did not get going.
    """
    if status == "canceled" or rc in (99, 130, -int(signal.SIGINT)):
        return ExitCode.INTERRUPTED
    if rc == 0 and status == "successful":
        return ExitCode.OK
    if failed_hosts > 0:
        return ExitCode.HOST_FAILED
    if unreachable_hosts > 0:
        return ExitCode.UNREACHABLE
    if rc in (2, 8):  # RUN_FAILED_HOSTS, RUN_FAILED_BREAK_PLAY
        return ExitCode.HOST_FAILED
    if rc == 4:
        return ExitCode.PARSE_ERROR
    return ExitCode.NOT_STARTED


class RunnerError(RuntimeError):
    """The run could not start (missing playbook or inventory, ansible-runner refused)."""


@dataclass
class HostStats:
    """One host's line of the play recap (ansible semantics: ``ok`` includes ``changed``)."""

    ok: int = 0
    changed: int = 0
    unreachable: int = 0
    failed: int = 0
    skipped: int = 0
    rescued: int = 0
    ignored: int = 0


# playbook_on_stats keys -> HostStats fields
_STATS_KEYS: dict[str, str] = {
    "ok": "ok",
    "changed": "changed",
    "dark": "unreachable",
    "failures": "failed",
    "skipped": "skipped",
    "rescued": "rescued",
    "ignored": "ignored",
}


@dataclass(frozen=True)
class Failure:
    """A task that failed (not ignored) on a host, or a host that was unreachable."""

    host: str
    task: str
    msg: str
    play: str = ""
    role: str = ""
    unreachable: bool = False


@dataclass
class RunResult:
    """What a playbook run came to."""

    rc: int
    status: str
    stats: dict[str, HostStats] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    elapsed: float = 0.0

    @property
    def failed_hosts(self) -> list[str]:
        hosts = {h for h, s in self.stats.items() if s.failed > 0}
        hosts |= {f.host for f in self.failures if not f.unreachable}
        return sorted(hosts)

    @property
    def unreachable_hosts(self) -> list[str]:
        hosts = {h for h, s in self.stats.items() if s.unreachable > 0}
        hosts |= {f.host for f in self.failures if f.unreachable}
        return sorted(hosts)

    @property
    def exit_code(self) -> ExitCode:
        return exit_code_for(
            rc=self.rc,
            status=self.status,
            failed_hosts=len(self.failed_hosts),
            unreachable_hosts=len(self.unreachable_hosts),
        )


# --------------------------------------------------------------------------- failure details


def _tail(text: str, n: int = TAIL_LINES) -> list[str]:
    lines = text.rstrip("\n").splitlines()
    return lines[-n:]


def is_censored(res: Mapping[str, Any]) -> bool:
    """True for a result ansible hid because of ``no_log``."""
    return bool(res.get("_ansible_no_log")) or "censored" in res


def result_details(res: Mapping[str, Any], *, tail: int = TAIL_LINES) -> tuple[str, list[Text]]:
    """The message of a task result and the lines worth printing under it.

    Only ``msg``, ``rc`` and the tails of the output keys are used: never ``invocation`` or any
    other key (module arguments may hold secrets). A censored result yields the notice only.
    """
    if is_censored(res):
        censored = res.get("censored")
        return (str(censored) if censored else NO_LOG_NOTICE), []
    raw_msg = res.get("msg", "")
    msg = raw_msg if isinstance(raw_msg, str) else json.dumps(raw_msg, default=str)
    lines: list[Text] = []
    rc = res.get("rc")
    if isinstance(rc, int) and rc != 0:
        lines.append(Text.assemble(("rc: ", "bold"), str(rc)))
    for key in OUTPUT_KEYS:
        value = res.get(key)
        if not isinstance(value, str) or not value.strip():
            continue
        if key.endswith("stdout") and value.strip() == msg.strip():
            continue
        out = _tail(value, tail)
        total = len(value.rstrip("\n").splitlines())
        label = f"{key} (last {len(out)} of {total} lines):" if total > len(out) else f"{key}:"
        lines.append(Text(label, style="bold"))
        lines.extend(Text("  | " + line, style="dim") for line in out)
    results = res.get("results")
    if isinstance(results, list):
        failed_items = [r for r in results if isinstance(r, Mapping) and r.get("failed")]
        for item in failed_items[:MAX_ITEM_FAILURES]:
            label = item.get("_ansible_item_label", item.get("item", "?"))
            if is_censored(item):
                label = "(censored)"
            item_msg, item_lines = result_details(item, tail=tail)
            lines.append(Text.assemble(("item ", "bold"), f"{label}: ", (item_msg, "red")))
            lines.extend(Text("  ") + line for line in item_lines)
        if len(failed_items) > MAX_ITEM_FAILURES:
            lines.append(Text(f"... and {len(failed_items) - MAX_ITEM_FAILURES} more failed items"))
    return msg, lines


# --------------------------------------------------------------------------- run state


@dataclass
class _HostRow:
    stats: HostStats = field(default_factory=HostStats)
    task: str = ""
    state: str = "running"


def _fmt_elapsed(seconds: float) -> str:
    s = int(seconds)
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def _task_label(data: Mapping[str, Any]) -> str:
    task = str(data.get("task") or data.get("task_action") or "?")
    role = data.get("role")
    return f"{role} : {task}" if role else task


def _num(n: int, style: str) -> Text:
    return Text(str(n), style=style if n else "dim")


class _Progress:
    """Consumes ansible-runner events; prints failures and (in plain mode) task lines."""

    def __init__(
        self,
        console: Console,
        *,
        plain: bool,
        verbosity: int,
        status: Callable[[], str | None] | None = None,
    ) -> None:
        self.console = console
        self.plain = plain
        self.verbosity = verbosity
        # What a long task reports of itself (a benchmark's progress), shown under the table
        # and, in plain mode, on each retry of the task that waits for it.
        self.status = status
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.play = ""
        self.task = ""
        self.hosts: dict[str, _HostRow] = {}
        self.failures: list[Failure] = []
        self.final_stats: dict[str, HostStats] | None = None
        self.output_tail: deque[str] = deque(maxlen=40)
        self.handler_error: str | None = None
        self.cancel_requested = False
        self.ansible_pid: int | None = None
        self._pending: list[RenderableType] = []
        self._cancel_announced = False

    # -- output helpers

    def _print(self, *renderables: RenderableType) -> None:
        # Queued, and printed by handle() once the lock is released: with a Live display,
        # console.print re-renders the live table (__rich__ takes the lock) under Live's own
        # lock, which its refresh thread takes before calling __rich__.
        self._pending.extend(renderables)

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        for r in pending:
            self.console.print(r, soft_wrap=True, highlight=False)

    def should_cancel(self) -> bool:
        """ansible-runner's cancel_callback (polled about once a second, in the main thread)."""
        if self.cancel_requested and not self._cancel_announced:
            self._cancel_announced = True
            self.console.print(
                Text("interrupt: stopping ansible (Ctrl-C again to abort at once)", "bold yellow")
            )
        return self.cancel_requested

    def _host(self, name: str) -> _HostRow:
        row = self.hosts.get(name)
        if row is None:
            row = self.hosts[name] = _HostRow()
        return row

    # -- event handling (called by ansible-runner for each event, in the main thread)

    def handle(self, event: dict[str, Any]) -> bool:
        try:
            with self.lock:
                self._handle(event)
        except Exception as exc:  # a display bug must not abort the ansible run
            if self.handler_error is None:
                self.handler_error = f"{type(exc).__name__}: {exc}"
                self._pending.append(Text(f"llmfleet: display error ignored: {exc!r}", "yellow"))
        self._flush()
        return True

    def _handle(self, event: dict[str, Any]) -> None:
        kind = str(event.get("event", ""))
        data: dict[str, Any] = event.get("event_data") or {}
        if kind.startswith("playbook_on_"):
            self._on_playbook_event(kind, event, data)
        elif kind in ("warning", "verbose", "error"):
            self._on_output_event(kind, str(event.get("stdout", "")))
        elif data.get("host") and (kind.startswith("runner_on_") or kind == "runner_retry"):
            self._on_host_event(kind, str(data["host"]), data)

    def _on_playbook_event(self, kind: str, event: dict[str, Any], data: dict[str, Any]) -> None:
        if kind == "playbook_on_start" and isinstance(event.get("pid"), int):
            self.ansible_pid = int(event["pid"])
        elif kind == "playbook_on_play_start":
            self.play = str(data.get("play") or data.get("name") or "")
            if self.plain:
                self._print(Text(f"== PLAY: {self.play}", style="bold"))
        elif kind in ("playbook_on_task_start", "playbook_on_handler_task_start"):
            self.task = _task_label(data)
        elif kind == "playbook_on_stats":
            self.final_stats = _stats_from_event(data)
        elif kind == "playbook_on_no_hosts_matched":
            self._print(Text(f"warning: no hosts matched in play {self.play!r}", style="yellow"))

    def _on_output_event(self, kind: str, stdout: str) -> None:
        text = Text.from_ansi(stdout.strip())
        if not text.plain.strip():
            return
        if kind == "warning":
            text.stylize("yellow")
            self._print(text)
            return
        # ansible's own lines outside task results: -v chatter, and errors before any play
        self.output_tail.append(text.plain)
        if self.verbosity > 0:
            self._print(text)

    def _on_host_event(self, kind: str, host: str, data: dict[str, Any]) -> None:
        row = self._host(host)
        label = _task_label(data)
        res: dict[str, Any] = data.get("res") or {}
        st = row.stats
        if kind == "runner_on_start":
            row.task = label
            row.state = "running" if row.state == "done" else row.state
            return
        if kind == "runner_retry":
            attempts, retries = res.get("attempts", "?"), res.get("retries", "?")
            row.task = f"{label} (retry {attempts}/{retries})"
            if self.plain:
                status = self.status() if self.status else None
                detail = f": {status}" if status else ""
                self._print(Text(f"[{host}] retrying ({attempts}/{retries}): {label}{detail}"))
            return
        if kind == "runner_on_ok":
            st.ok += 1
            changed = bool(res.get("changed"))
            st.changed += int(changed)
            word, style = ("changed", "yellow") if changed else ("ok", "green")
            self._line(host, word, label, style)
            action = data.get("task_action")
            if action in DEBUG_ACTIONS or (
                action in ASSERT_ACTIONS and res.get("msg") != ASSERT_DEFAULT_MSG
            ):
                self._debug_message(host, res)
        elif kind == "runner_on_skipped":
            st.skipped += 1
            self._line(host, "skipping", label, "cyan")
        elif kind == "runner_on_failed" and data.get("ignore_errors"):
            st.ok += 1
            st.ignored += 1
            st.changed += int(bool(res.get("changed")))
            msg, _ = result_details(res)
            self._line(host, "failed (ignored)", f"{label}: {msg}", "dim")
        elif kind == "runner_on_failed":
            st.failed += 1
            row.state = "failed"
            self._failure(host, data, res, unreachable=False)
        elif kind == "runner_on_unreachable":
            st.unreachable += 1
            row.state = "unreachable"
            self._failure(host, data, res, unreachable=True)
        else:  # runner_on_async_*, runner_on_no_hosts ...
            return
        row.task = label

    def _debug_message(self, host: str, res: Mapping[str, Any]) -> None:
        """What a playbook chose to show the user (debug tasks, assert success messages),
        in both display modes."""
        if is_censored(res) or "msg" not in res:
            return
        msg = res["msg"]
        lines = [str(item) for item in msg] if isinstance(msg, list) else str(msg).splitlines()
        self._print(*(Text.assemble((f"[{host}] ", "bold"), line) for line in lines))

    def _line(self, host: str, word: str, label: str, style: str) -> None:
        if self.plain:
            self._print(Text.assemble(f"[{host}] ", (f"{word}:", style), f" {label}"))

    def _failure(
        self, host: str, data: Mapping[str, Any], res: Mapping[str, Any], *, unreachable: bool
    ) -> None:
        task = str(data.get("task") or data.get("task_action") or "?")
        role = str(data.get("role") or "")
        play = str(data.get("play") or self.play)
        msg, detail = result_details(res)
        self.failures.append(
            Failure(host=host, task=task, msg=msg, play=play, role=role, unreachable=unreachable)
        )
        word = "UNREACHABLE" if unreachable else "FAILED"
        head = Text.assemble((f"[{host}] ", "bold"), (f"{word}:", "bold red"), f" {task}")
        where = Text.assemble(("  play: ", "bold"), play)
        if role:
            where.append_text(Text.assemble(("  role: ", "bold"), role))
        body = [Text.assemble(("  msg: ", "bold"), (msg or "(no message)", "red"))]
        body += [Text("  ") + line for line in detail]
        self._print(head, where, *body)

    # -- live rendering

    def __rich__(self) -> RenderableType:
        with self.lock:
            header = Text.assemble(
                ("PLAY ", "bold"),
                (self.play or "(starting)", "bold cyan"),
                ("  ·  ", "dim"),
                (_fmt_elapsed(time.monotonic() - self.started), "bold"),
            )
            if self.task:
                header.append_text(Text.assemble(("  ·  task: ", "dim"), self.task))
            if self.cancel_requested:
                header.append("  ·  stopping (Ctrl-C again to force)", style="bold yellow")
            table = Table(box=box.SIMPLE_HEAD, expand=False, pad_edge=False)
            table.add_column("host", style="bold", no_wrap=True)
            for name in ("ok", "changed", "failed", "skipped", "unreach."):
                table.add_column(name, justify="right")
            table.add_column("task", overflow="ellipsis", no_wrap=True, max_width=70)
            for host, row in self.hosts.items():
                s = row.stats
                host_style = {"failed": "red", "unreachable": "red"}.get(row.state, "")
                table.add_row(
                    Text(host, style=host_style),
                    _num(s.ok, "green"),
                    _num(s.changed, "yellow"),
                    _num(s.failed, "bold red"),
                    _num(s.skipped, "cyan"),
                    _num(s.unreachable, "bold red"),
                    Text(row.task, style="dim"),
                )
            status = self.status() if self.status else None
            parts: list[RenderableType] = [header]
            if self.hosts:
                parts.append(table)
            if status:
                parts.append(Text(status, style="bold"))
            return Group(*parts)


def _stats_from_event(data: Mapping[str, Any]) -> dict[str, HostStats]:
    stats: dict[str, HostStats] = {}
    hosts: set[str] = set()
    for key in (*_STATS_KEYS, "processed"):
        value = data.get(key)
        if isinstance(value, Mapping):
            hosts.update(str(h) for h in value)
    for host in sorted(hosts):
        hs = HostStats()
        for key, attr in _STATS_KEYS.items():
            value = data.get(key)
            if isinstance(value, Mapping):
                setattr(hs, attr, int(value.get(host, 0)))
        stats[host] = hs
    return stats


# --------------------------------------------------------------------------- recap


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
            _num(s.ok, "green"),
            _num(s.changed, "yellow"),
            _num(s.unreachable, "bold red"),
            _num(s.failed, "bold red"),
            _num(s.skipped, "cyan"),
            _num(s.rescued, "magenta"),
            _num(s.ignored, "dim"),
        )
    return table


def _verdict(result: RunResult) -> Text:
    code = result.exit_code
    took = _fmt_elapsed(result.elapsed)
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
    return Text(
        f"ERROR: ansible-playbook exited with rc={result.rc} ({result.status})", style="bold red"
    )


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


# --------------------------------------------------------------------------- running


@contextlib.contextmanager
def _sigint_to_cancel(progress: _Progress) -> Iterator[None]:
    """First Ctrl-C asks ansible-runner to stop the run; a second one raises KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        # no printing here: the handler may interrupt the main thread inside a console.print
        if progress.cancel_requested:
            _kill_group(progress.ansible_pid)
            raise KeyboardInterrupt
        progress.cancel_requested = True

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _kill_group(pid: int | None) -> None:
    """SIGKILL ansible-playbook's process group (its own session, never ours)."""
    if pid is None:
        return
    with contextlib.suppress(OSError):
        group = os.getpgid(pid)
        if group != os.getpgrp():
            os.killpg(group, signal.SIGKILL)


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
) -> RunResult:
    """Run ``playbook`` against ``inventory`` and return what happened.

    ``extravars`` is a mapping, or a sequence of mappings and ``Path``\\ s (YAML/JSON files)
    applied in order, later ones winning as with repeated ``-e``. ``plain`` defaults to "stdout
    is not a terminal". ``root`` (the collection root, for ``ANSIBLE_CONFIG`` and the working
    directory) defaults to :func:`llmfleet.paths.collection_root`. ``status``, when given, is
    polled for a line of progress of its own (shown live, or on task retries in plain mode).
    ``artifacts``, when given, keeps ansible-runner's record of the run (its job events and
    output, under a folder per run) in that directory, created owner-only (0700).

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

    progress = _Progress(console, plain=plain, verbosity=verbosity, status=status)
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
        if artifacts is not None:
            artifacts = artifacts.expanduser().resolve()
            artifacts.mkdir(mode=0o700, parents=True, exist_ok=True)
            artifacts.chmod(0o700)
            kwargs["artifact_dir"] = str(artifacts)

        with _sigint_to_cancel(progress):
            if plain:
                r = _start(kwargs)
            else:
                with Live(progress, console=console, refresh_per_second=4, transient=True):
                    r = _start(kwargs)

    rc = r.rc if isinstance(r.rc, int) else 1
    stats = progress.final_stats
    if stats is None:
        stats = {h: row.stats for h, row in progress.hosts.items()}
    result = RunResult(
        rc=rc,
        status=str(r.status),
        stats=stats,
        failures=list(progress.failures),
        elapsed=time.monotonic() - progress.started,
    )
    # ansible stopped before playing (parse error, bad option...): show what it said, unless
    # -v already printed it as it came
    stopped_early = progress.final_stats is None and verbosity == 0
    if stopped_early and result.exit_code not in (ExitCode.OK, ExitCode.INTERRUPTED):
        for line in progress.output_tail:
            console.print(Text(line, style="red"), soft_wrap=True, highlight=False)
    render_recap(result, console, plain=plain)
    return result


def _start(kwargs: dict[str, Any]) -> Any:
    try:
        return ansible_runner.run(**kwargs)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # ansible-runner's ConfigurationError and friends
        raise RunnerError(f"ansible-runner could not start the run: {exc}") from exc
