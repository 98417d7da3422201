"""What a playbook run came to: per-host recap counts, failures, and the CLI's exit code."""

from __future__ import annotations

import signal
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any


class ExitCode(IntEnum):
    """Exit codes of ``llmfleet up`` (and of any command that runs a playbook)."""

    OK = 0
    NOT_STARTED = 1
    HOST_FAILED = 2
    UNREACHABLE = 3
    PARSE_ERROR = 4
    INTERRUPTED = 130


# The status of a run that ansible ended with success without a host in any play (an empty
# inventory, or one whose groups are none of those the playbook plays): nothing was done.
NO_HOSTS = "no_hosts"


def exit_code_for(  # noqa: PLR0911 - a decision table reads best as early returns
    *, rc: int | None, status: str, failed_hosts: int, unreachable_hosts: int
) -> ExitCode:
    """Map an ansible run's outcome to the CLI's exit code.

    ``rc`` is ansible-playbook's return code (None when it never ran), ``status`` ansible-runner's
    (``successful``, ``failed``, ``canceled``, ``timeout``...; :data:`NO_HOSTS` when it played on
    no host, which is no success), the host counts come from the
    recap. ansible-playbook returns 4 both for a parse error and for unreachable hosts, so the
    recap decides: hosts that failed a task win over unreachable ones, and rc 4 with neither is
    a playbook/inventory parse error. Any other non-zero rc means the run did not get going.
    """
    if status == "canceled" or rc in (99, 130, -int(signal.SIGINT)):
        return ExitCode.INTERRUPTED
    if status == NO_HOSTS:
        return ExitCode.NOT_STARTED
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
    # ansible-runner's record of the run (None when it was not kept)
    artifacts: Path | None = None
    # files the run reported writing on the controller (bench_report's JSON, markdown, PNG)
    reports: list[str] = field(default_factory=list)
    # per host, what llmfleet.cluster.converged_state said: converged, changes, run
    converged: dict[str, dict[str, Any]] = field(default_factory=dict)

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


def stats_from_event(data: Mapping[str, Any]) -> dict[str, HostStats]:
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


def result_summary(result: RunResult) -> dict[str, Any]:
    """The run as ``--json`` prints it: exit code, ansible's rc and status, per host its
    recap counts, the failures, ansible-runner's record of the run, the reports and what the
    comparison with the last full run said of each host."""
    return {
        "exit_code": int(result.exit_code),
        "rc": result.rc,
        "status": result.status,
        "elapsed_s": round(result.elapsed, 3),
        "hosts": {host: asdict(stats) for host, stats in result.stats.items()},
        "failed_hosts": result.failed_hosts,
        "unreachable_hosts": result.unreachable_hosts,
        "failures": [asdict(failure) for failure in result.failures],
        "artifacts": None if result.artifacts is None else str(result.artifacts),
        "reports": list(result.reports),
        # what the comparison with the last full run said of each host (llmfleet up)
        "converged": dict(result.converged),
    }
