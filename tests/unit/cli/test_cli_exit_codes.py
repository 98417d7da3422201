"""The exit-code policy, as a pure function, and the RunResult that feeds it."""

from __future__ import annotations

import pytest

from llmfleet.run_outcome import (
    NO_HOSTS,
    ExitCode,
    Failure,
    HostStats,
    RunResult,
    exit_code_for,
)


@pytest.mark.parametrize(
    ("rc", "status", "failed", "unreachable", "expected"),
    [
        (0, "successful", 0, 0, ExitCode.OK),
        (2, "failed", 1, 0, ExitCode.HOST_FAILED),
        (2, "failed", 0, 0, ExitCode.HOST_FAILED),  # rc says hosts failed, no recap
        (8, "failed", 0, 0, ExitCode.HOST_FAILED),  # failed and broke the play
        (4, "failed", 0, 2, ExitCode.UNREACHABLE),  # ansible uses rc 4 for unreachable...
        (4, "failed", 0, 0, ExitCode.PARSE_ERROR),  # ...and for parse errors
        (4, "failed", 1, 1, ExitCode.HOST_FAILED),  # failures win over unreachable
        (2, "failed", 1, 3, ExitCode.HOST_FAILED),
        (1, "failed", 0, 0, ExitCode.NOT_STARTED),  # AnsibleError before any play
        (5, "failed", 0, 0, ExitCode.NOT_STARTED),  # bad options
        (127, "failed", 0, 0, ExitCode.NOT_STARTED),  # ansible-playbook not found
        (None, "failed", 0, 0, ExitCode.NOT_STARTED),
        (250, "failed", 0, 0, ExitCode.NOT_STARTED),
        (254, "canceled", 0, 0, ExitCode.INTERRUPTED),
        (254, "canceled", 2, 0, ExitCode.INTERRUPTED),  # Ctrl-C wins
        (99, "failed", 0, 0, ExitCode.INTERRUPTED),  # ansible's "user interrupted"
    ],
)
def test_exit_code_for(
    rc: int | None, status: str, failed: int, unreachable: int, expected: ExitCode
) -> None:
    assert (
        exit_code_for(rc=rc, status=status, failed_hosts=failed, unreachable_hosts=unreachable)
        is expected
    )


def test_exit_code_values_are_the_documented_ones() -> None:
    assert [int(c) for c in ExitCode] == [0, 1, 2, 3, 4, 130]


def test_run_result_counts_hosts_from_stats_and_failures() -> None:
    result = RunResult(
        rc=4,
        status="failed",
        stats={"a": HostStats(ok=1), "b": HostStats(unreachable=1)},
        failures=[Failure(host="b", task="ping", msg="no route", unreachable=True)],
    )
    assert result.failed_hosts == []
    assert result.unreachable_hosts == ["b"]
    assert result.exit_code is ExitCode.UNREACHABLE

    result.failures.append(Failure(host="a", task="t", msg="boom"))
    assert result.failed_hosts == ["a"]
    assert result.exit_code is ExitCode.HOST_FAILED


def test_a_run_that_played_on_no_host_is_no_success() -> None:
    result = RunResult(rc=0, status=NO_HOSTS)
    assert result.exit_code is ExitCode.NOT_STARTED
