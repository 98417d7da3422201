# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Wait for a service to be ready while watching its supervisor: the logic of the
service_wait module, free of AnsibleModule so unit tests call it directly.

A service is ready when its probe succeeds (an HTTP URL answering 200, or a command whose
output has enough matching lines). It is broken when its process exits while we wait: a
systemd unit that enters ``auto-restart`` or ``failed`` or whose ``NRestarts`` grows, a
container that is not running or whose ``RestartCount`` grows. Broken ends the wait at once
with the end of its log and the line that says why (the last ``SomethingError: ...``), unless
the wait lets the supervisor restart the process a few times (``restarts_allowed``: a process
whose start can fail for a passing reason, as a Ray node that timed out joining a busy head).
"""

from __future__ import annotations

import re
import time
import urllib.error
from collections.abc import Callable
from dataclasses import dataclass, field

from ansible.module_utils.urls import ConnectionError as UrlConnectionError
from ansible.module_utils.urls import open_url

# "ValueError: Total number of attention heads (2) must be divisible by ...", also when a
# logger prefixes it ("(EngineCore pid=12) ERROR ... RuntimeError: ..."); pydantic's
# "  Value error, User-specified max_model_len ... [type=value_error, ...]" under its
# ValidationError; argparse's "vllm serve: error: argument --kv-cache-dtype: invalid ...".
_REASON = re.compile(r"\b([A-Z][A-Za-z0-9_]*(?:Error|Exception|Exit)): (.+)$")
_PYDANTIC = re.compile(r"^Value error, (.+?)(?: \[type=.*)?$")
_USAGE = re.compile(r"^(\S+(?: \S+)?: error: .+)$")
_FATAL = re.compile(r"\b(?:ERROR|FATAL|CRITICAL|Fatal|fatal)\b")
# Lines that only quote an error (a warning that names one) or point at another line (vLLM's
# "See root cause above"), and errors that follow from the first one (Ray's actors already
# gone when the engine shuts down): never the reason while another line is.
_NOT_A_REASON = re.compile(
    r"\bWARNING\b|warnings\.warn|root cause above|stack trace \(above\)|ActorHandleNotFoundError"
)

# systemd's own lines about the unit ("llmfleet-vllm.service: Failed with result
# 'exit-code'."): the reason only when the process said nothing.
_SUPERVISOR_LINE = re.compile(r"^\S+\.service: ")
# When the process stopped before the wait began (a start refused at once), its own lines
# are older than the wait: the log is read again this much further back.
EARLIER_S = 60
# journald writes a unit's last lines a moment after systemd has seen the process exit (more
# under load: a usage error found 0.1 s into a wait left the log empty, 2026-11-27): a log
# whose reason names no error is read again for this long.
LOG_SETTLE_S = 5.0
LOG_SETTLE_DELAY_S = 0.5

Run = Callable[[list[str]], tuple[int, str, str]]
# How much of the log the reason is looked for in (at least what is shown).
REASON_LOG_LINES = 1000

# Container states: created/running/paused are alive; "restarting" means it exited and the
# engine is about to start it again.
_CONTAINER_PHASES = {
    "running": "running",
    "created": "starting",
    "paused": "running",
    "restarting": "failed",
}


def _unit_phase(active: str, sub: str) -> str:
    """``running``; ``starting`` (a start or a stop under way, e.g. a manual restart);
    ``failed`` (the process exited: systemd waits to restart it, or gave up); ``stopped``
    (inactive, which a manual restart passes through)."""
    if sub == "auto-restart" or active == "failed":
        return "failed"
    if active == "active":
        return "running"
    if active in ("activating", "deactivating", "reloading"):
        return "starting"
    return "stopped"


@dataclass
class Supervisor:
    """What supervises the process: a systemd unit, or a container of an engine."""

    unit: str | None = None
    container: str | None = None
    engine: str = "docker"
    log_lines: int = 60

    def describe(self) -> str:
        if self.unit:
            return f"unit {self.unit}"
        return f"{self.engine} container {self.container}"

    def state(self, run: Run) -> dict[str, str]:
        """The supervisor's view: ``phase`` (see _unit_phase), ``restarts``, ``detail``, and
        for a unit ``final`` (non-empty when systemd gave up restarting it)."""
        if self.unit:
            rc, out, err = run(
                [
                    "systemctl",
                    "show",
                    self.unit,
                    "--property=ActiveState,SubState,NRestarts,ExecMainStatus,Result",
                ]
            )
            props = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
            if rc != 0:
                return {"phase": "stopped", "restarts": "0", "detail": (err or out).strip()}
            active, sub = props.get("ActiveState", "?"), props.get("SubState", "?")
            return {
                "phase": _unit_phase(active, sub),
                # systemd gave up restarting it (or was never asked to).
                "final": "yes" if active == "failed" else "",
                "restarts": props.get("NRestarts", "0") or "0",
                "detail": (
                    f"{active}/{sub}, last exit status {props.get('ExecMainStatus', '?')},"
                    f" result {props.get('Result', '?')}"
                ),
            }
        rc, out, err = run(
            [
                self.engine,
                "container",
                "inspect",
                "--format",
                "{{.State.Status}} {{.RestartCount}} {{.State.ExitCode}}",
                str(self.container),
            ]
        )
        fields = out.split()
        if rc != 0 or len(fields) < 3:
            return {
                "phase": "stopped",
                "restarts": "0",
                "detail": (err or out).strip() or "no such container",
            }
        return {
            "phase": _CONTAINER_PHASES.get(fields[0], "stopped"),
            "restarts": fields[1],
            "detail": f"{fields[0]}, exit code {fields[2]}, {fields[1]} restart(s)",
        }

    def log(self, run: Run, since: float, lines: int | None = None) -> str:
        """The log since ``since``: its last ``lines`` lines (default: log_lines)."""
        count = str(self.log_lines if lines is None else lines)
        if self.unit:
            argv = [
                "journalctl",
                "--unit",
                self.unit,
                "--since",
                f"@{int(since) - 1}",
                "--lines",
                count,
                "--no-pager",
                "--output",
                "cat",
            ]
        else:
            argv = [self.engine, "logs", "--tail", count, str(self.container)]
        _rc, out, err = run(argv)
        return (out + err).strip()


def reason_line(log: str) -> str:
    """The line of ``log`` that says why the process stopped: the last exception line, else
    the last line naming an error, else the last line; lines that only quote or point at an
    error count only when nothing else does."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    return _error_line(lines) or (lines[-1] if lines else "")


def _error_line(lines: list[str]) -> str:
    """The reason among ``lines`` that names an error (an exception, a usage error, a fatal
    line); empty when none does."""
    reasons = [
        line
        for line in lines
        if not _NOT_A_REASON.search(line) and not _SUPERVISOR_LINE.match(line)
    ]
    return _reason_among(reasons) or _reason_among(lines)


def _reason_among(lines: list[str]) -> str:
    for line in reversed(lines):
        match = _PYDANTIC.match(line)
        if match:
            return f"ValueError: {match[1]}"
        match = _USAGE.match(line) or _REASON.search(line)
        if match:
            return match[0] if match.re is _USAGE else f"{match[1]}: {match[2]}"
    for line in reversed(lines):
        if _FATAL.search(line):
            return line
    return ""


@dataclass
class Probe:
    """When the service counts as ready."""

    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    command: list[str] | None = None
    pattern: str | None = None
    min_matches: int = 1

    def check(self, run: Run) -> tuple[bool, str]:  # noqa: PLR0911 - one return per outcome
        if self.url:
            # http(s) only: the module refuses other schemes.
            try:
                with open_url(self.url, headers=self.headers, timeout=5) as response:
                    return response.status == 200, f"HTTP {response.status}"
            except urllib.error.HTTPError as error:
                return False, f"HTTP {error.code}"
            except (OSError, ValueError, UrlConnectionError) as error:
                return False, str(getattr(error, "reason", error))
        if self.command:
            rc, out, err = run(self.command)
            if rc != 0:
                said = (err or out).strip().splitlines()
                return False, said[-1] if said else f"exit {rc}"
            if self.pattern:
                count = sum(1 for line in out.splitlines() if re.search(self.pattern, line))
                return (
                    count >= self.min_matches,
                    f"{count} of {self.min_matches} lines match {self.pattern!r}",
                )
            return True, "exit 0"
        return True, "no probe"


def wait(
    supervisor: Supervisor,
    probe: Probe,
    *,
    timeout: float,
    delay: float,
    run: Run,
    restarts_allowed: int = 0,
    clock: Callable[[], float] = time.monotonic,
    wall: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, object]:
    """Poll ``probe`` until it succeeds (``ready``), the supervised process stops
    (``broken``) or ``timeout`` seconds pass (``timeout``). The result says which, how long
    it took, what the probe said last and, when not ready, the log and its reason line.
    Up to ``restarts_allowed`` exits that the supervisor restarts are waited through (the
    result's ``restarts`` counts them); one more, or a supervisor that gave up, is broken."""
    started = clock()
    started_wall = wall()
    first = supervisor.state(run)
    baseline = int(first["restarts"] or 0)
    attempts = 0
    stopped_polls = 0
    restarts_seen = 0
    last = ""
    while True:
        attempts += 1
        ready, last = probe.check(run)
        if ready:
            return {
                "state": "ready",
                "elapsed": round(clock() - started, 1),
                "attempts": attempts,
                "restarts": restarts_seen,
                "probe": last,
            }
        state = supervisor.state(run)
        stopped_polls = stopped_polls + 1 if state["phase"] == "stopped" else 0
        # Exits seen: the restarts since the wait began, or one waiting for its restart (the
        # most seen: a container created again starts its count at 0).
        exits = max(int(state["restarts"] or 0) - baseline, int(state["phase"] == "failed"))
        restarts_seen = max(restarts_seen, exits)
        # Inactive once is a manual restart passing by; twice in a row, the process is gone.
        if exits > restarts_allowed or state.get("final") or stopped_polls >= 2:
            outcome = "broken"
        elif clock() - started >= timeout:
            outcome = "timeout"
        else:
            sleep(delay)
            continue
        return {
            "state": outcome,
            "elapsed": round(clock() - started, 1),
            "attempts": attempts,
            "restarts": exits,
            "probe": last,
            "supervisor": f"{supervisor.describe()} ({state['detail']})",
            **_log_and_reason(supervisor, started_wall, run, clock, sleep),
        }


def _said_why(reason: str) -> bool:
    return bool(reason) and not _SUPERVISOR_LINE.match(reason)


def _names_an_error(reason: str) -> bool:
    """Whether ``reason`` names an error. Until it does, a unit's log may still lack the
    process's last lines: an ExecStartPre's own line ("port 8000 is free") was taken for the
    reason of a usage error that journald had not written yet (2026-11-28)."""
    return bool(_error_line([reason]))


def _log_and_reason(
    supervisor: Supervisor,
    started_wall: float,
    run: Run,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> dict[str, str]:
    """The end of the log since the wait began (``log``) and the line that says why
    (``reason``). A unit's log that names no error is read again for LOG_SETTLE_S."""
    settle_until = clock() + LOG_SETTLE_S
    while True:
        log, reason = _read_reason(supervisor, started_wall, run)
        named = _names_an_error(reason)
        if not supervisor.unit or named or clock() >= settle_until:
            break
        sleep(LOG_SETTLE_DELAY_S)
    shown = supervisor.log_lines
    return {
        "log": "\n".join(log.splitlines()[-shown:]) if shown > 0 else "",
        "reason": reason,
    }


def _read_reason(supervisor: Supervisor, started_wall: float, run: Run) -> tuple[str, str]:
    """The log since the wait began and its reason line. The reason is looked for in more of
    the log than is shown: under vLLM's Ray executor the root cause comes a few hundred lines
    before the end (every worker's traceback)."""
    log = supervisor.log(run, started_wall, lines=max(supervisor.log_lines, REASON_LOG_LINES))
    reason = reason_line(log)
    if supervisor.unit and not _said_why(reason):
        earlier = reason_line(supervisor.log(run, started_wall - EARLIER_S, lines=REASON_LOG_LINES))
        reason = earlier or reason
    return log, reason
