"""How a playbook run is shown while it goes on, from ansible-runner's event stream.

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

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from llmfleet.run_outcome import Failure, HostStats, stats_from_event

TAIL_LINES = 20
# Tasks whose message is meant for the user (reports): shown in both display modes.
DEBUG_ACTIONS = frozenset({"debug", "ansible.builtin.debug", "ansible.legacy.debug"})
# Asserts with a success_msg are reports too ("Ray at ...: 2 nodes"); their default is not.
ASSERT_ACTIONS = frozenset({"assert", "ansible.builtin.assert", "ansible.legacy.assert"})
ASSERT_DEFAULT_MSG = "All assertions passed"
# Modules whose result names files written on the controller (RunResult.reports).
REPORT_ACTIONS = frozenset({"bench_report", "llmfleet.cluster.bench_report"})
REPORT_KEYS = ("json_path", "markdown_path", "png_path")
# Modules whose result says whether a host is as the last full run left it (RunResult.converged).
CONVERGED_ACTIONS = frozenset({"converged_state", "llmfleet.cluster.converged_state"})
CONVERGED_KEYS = ("converged", "changes", "changed_inputs", "run")
MAX_ITEM_FAILURES = 3
OUTPUT_KEYS: tuple[str, ...] = ("stderr", "stdout", "module_stderr", "module_stdout")
NO_LOG_NOTICE = "output hidden: no_log: true is set on this task"


def _tail(text: str, n: int = TAIL_LINES) -> list[str]:
    lines = text.rstrip("\n").splitlines()
    return lines[-n:]


def is_censored(res: Mapping[str, Any]) -> bool:
    """True for a result ansible hid because of ``no_log``."""
    return bool(res.get("_ansible_no_log")) or "censored" in res


# ansible-core wraps an error raised while it templates a task's arguments in the chain of
# what it was doing; the filter's own sentence, which names the variable and the value, is
# the reason (a template's other errors keep the chain's last part, "Error rendering ...").
_TEMPLATING_CHAIN = re.compile(
    r"^Task failed: Finalization of task args for '[^']*' failed: "
    r"Error while resolving value for '[^']*': (?:The filter plugin '[^']*' failed: )?"
)


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
    msg = _TEMPLATING_CHAIN.sub("", msg)
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


@dataclass
class HostRow:
    stats: HostStats = field(default_factory=HostStats)
    task: str = ""
    state: str = "running"


def format_elapsed(seconds: float) -> str:
    s = int(seconds)
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def _task_label(data: Mapping[str, Any]) -> str:
    task = str(data.get("task") or data.get("task_action") or "?")
    role = data.get("role")
    return f"{role} : {task}" if role else task


def count_text(n: int, style: str) -> Text:
    return Text(str(n), style=style if n else "dim")


# Ansible's warning for a play whose hosts' group the inventory lacks.
HOST_PATTERN_MISMATCH = "Could not match supplied host pattern"


class RunProgress:
    """Consumes ansible-runner events; prints failures and (in plain mode) task lines.

    ``quiet`` (the commands whose product is a table: ``status``, ``doctor``, ``plan``,
    ``check``): one line of progress instead of the task stream, in a terminal (a line
    that goes when the run ends) and in plain mode (one line as the run starts); failures
    and warnings all the same. ``-v`` shows the stream again."""

    def __init__(
        self,
        console: Console,
        *,
        plain: bool,
        verbosity: int,
        status: Callable[[], str | None] | None = None,
        quiet: bool = False,
    ) -> None:
        self.console = console
        self.plain = plain
        self.verbosity = verbosity
        # The task stream (plays, tasks, what debug tasks say) is shown, as it comes.
        self.stream = not quiet or verbosity > 0
        # What a long task reports of itself (a benchmark's progress), shown under the table
        # and, in plain mode, on each retry of the task that waits for it.
        self.status = status
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.play = ""
        self.task = ""
        self.hosts: dict[str, HostRow] = {}
        self.failures: list[Failure] = []
        self.reports: list[str] = []
        self.converged: dict[str, dict[str, Any]] = {}
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

    def _host(self, name: str) -> HostRow:
        row = self.hosts.get(name)
        if row is None:
            row = self.hosts[name] = HostRow()
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
        if kind == "playbook_on_start":
            if isinstance(event.get("pid"), int):
                self.ansible_pid = int(event["pid"])
            if self.plain and not self.stream:
                playbook = Path(str(data.get("playbook") or "the playbook")).name
                self._print(Text(f"running {playbook} (its tasks: -v)", style="dim"))
        elif kind == "playbook_on_play_start":
            self.play = str(data.get("play") or data.get("name") or "")
            if self.plain and self.stream:
                self._print(Text(f"== PLAY: {self.play}", style="bold"))
        elif kind in ("playbook_on_task_start", "playbook_on_handler_task_start"):
            self.task = _task_label(data)
        elif kind == "playbook_on_stats":
            self.final_stats = stats_from_event(data)
        elif kind == "playbook_on_no_hosts_matched" and self.verbosity > 0:
            # A play for hosts the inventory does not have (the Macs of a Spark inventory):
            # nothing a user can do about it.
            self._print(Text(f"no hosts matched in play {self.play!r}", style="dim"))

    def _on_output_event(self, kind: str, stdout: str) -> None:
        text = Text.from_ansi(stdout.strip())
        if not text.plain.strip():
            return
        if kind == "warning":
            # A group the inventory does not have (the Macs of a Spark inventory) is nothing
            # a user can act on: shown with -v, with the play it left empty.
            if HOST_PATTERN_MISMATCH in text.plain and self.verbosity == 0:
                return
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
            self._on_retry(host, row, label, res)
            return
        if kind == "runner_on_ok":
            st.ok += 1
            changed = bool(res.get("changed"))
            st.changed += int(changed)
            word, style = ("changed", "yellow") if changed else ("ok", "green")
            self._line(host, word, label, style)
            self._warnings(host, res)
            action = data.get("task_action")
            if action in REPORT_ACTIONS:
                self.reports += [str(res[k]) for k in REPORT_KEYS if res.get(k)]
            if action in CONVERGED_ACTIONS and "converged" in res:
                self.converged[host] = {k: res.get(k) for k in CONVERGED_KEYS}
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

    def _on_retry(self, host: str, row: HostRow, label: str, res: Mapping[str, Any]) -> None:
        if res.get("progress"):
            # A transfer followed by llmfleet.cluster.transfer_progress: each attempt says
            # how far it is (it may run for hours), in the host's row or, plain, a line.
            row.task = f"{label}: {res['progress']}"
            if self.plain and self.stream:
                self._print(Text.assemble((f"[{host}] ", "bold"), str(res["progress"])))
            return
        attempts, retries = res.get("attempts", "?"), res.get("retries", "?")
        row.task = f"{label} (retry {attempts}/{retries})"
        if self.plain and self.stream:
            status = self.status() if self.status else None
            detail = f": {status}" if status else ""
            self._print(Text(f"[{host}] retrying ({attempts}/{retries}): {label}{detail}"))

    def _warnings(self, host: str, res: Mapping[str, Any]) -> None:
        """What a module warned of in a task that went on (damage it repaired, say), in
        both display modes."""
        for warning in res.get("warnings") or []:
            text = warning.get("msg", warning) if isinstance(warning, dict) else warning
            self._print(Text.assemble((f"[{host}] warning: ", "bold yellow"), str(text)))

    def _debug_message(self, host: str, res: Mapping[str, Any]) -> None:
        """What a playbook chose to show the user (debug tasks, assert success messages),
        in both display modes."""
        if is_censored(res) or "msg" not in res or not self.stream:
            return
        msg = res["msg"]
        lines = [str(item) for item in msg] if isinstance(msg, list) else str(msg).splitlines()
        self._print(*(Text.assemble((f"[{host}] ", "bold"), line) for line in lines))

    def _line(self, host: str, word: str, label: str, style: str) -> None:
        if self.plain and self.stream:
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
                (format_elapsed(time.monotonic() - self.started), "bold"),
            )
            if self.task:
                header.append_text(Text.assemble(("  ·  task: ", "dim"), self.task))
            if self.cancel_requested:
                header.append("  ·  stopping (Ctrl-C again to force)", style="bold yellow")
            if not self.stream:
                hosts = f"  ·  {len(self.hosts)} host{'s' if len(self.hosts) != 1 else ''}"
                header.append(hosts, style="dim")
                return header
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
                    count_text(s.ok, "green"),
                    count_text(s.changed, "yellow"),
                    count_text(s.failed, "bold red"),
                    count_text(s.skipped, "cyan"),
                    count_text(s.unreachable, "bold red"),
                    Text(row.task, style="dim"),
                )
            status = self.status() if self.status else None
            parts: list[RenderableType] = [header]
            if self.hosts:
                parts.append(table)
            if status:
                parts.append(Text(status, style="bold"))
            return Group(*parts)
