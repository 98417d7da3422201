"""Parsers of launchctl print, launchctl list and sysctl vm.swapusage, on what a Mac Studio
prints."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.filter.macos import (
    FilterModule,
    launchd_job,
    launchd_loaded,
    launchd_service,
    macos_swap,
    python_version_problems,
)

LABEL = "com.llmfleet.vllm-mlx"
LAUNCHCTL_LIST = (
    "PID\tStatus\tLabel\n"
    "-\t0\tcom.apple.SafariHistoryServiceAgent\n"
    "612\t0\tcom.apple.Finder\n"
    "48211\t0\tcom.llmfleet.vllm-mlx\n"
    "-\t-9\tcom.llmfleet.claude-code-router\n"
)


def test_a_running_job() -> None:
    assert launchd_job(LAUNCHCTL_LIST, LABEL) == {
        "label": LABEL,
        "loaded": True,
        "running": True,
        "pid": 48211,
        "last_exit_status": 0,
    }


def test_a_job_that_exited_by_a_signal_is_loaded_without_a_process() -> None:
    job = launchd_job(LAUNCHCTL_LIST, "com.llmfleet.claude-code-router")
    assert (job["loaded"], job["running"], job["pid"], job["last_exit_status"]) == (
        True,
        False,
        None,
        -9,
    )


def test_a_job_launchd_does_not_list_is_not_loaded() -> None:
    assert launchd_job(LAUNCHCTL_LIST.replace(LABEL, "com.example.other"), LABEL)["loaded"] is False
    # A label that only starts like ours is another job.
    assert launchd_job("1\t0\tcom.llmfleet.vllm-mlx-old\n", LABEL)["loaded"] is False


# `launchctl print system/com.llmfleet.vllm-mlx` of a running LaunchDaemon, as macOS 15 prints
# it (shortened): nested blocks carry "=>" pairs and values that must not be read as the
# service's own.
PRINT_RUNNING = """system/com.llmfleet.vllm-mlx = {
\tactive count = 1
\tpath = /Library/LaunchDaemons/com.llmfleet.vllm-mlx.plist
\ttype = LaunchDaemon
\tstate = running

\tprogram = /Users/dev/.local/share/llmfleet/vllm-mlx/bin/python
\targuments = {
\t\t/Users/dev/.local/share/llmfleet/vllm-mlx/bin/python
\t\tserve
\t}

\tworking directory = /Users/dev
\tstdout path = /Users/dev/Library/Logs/llmfleet/vllm-mlx.log
\tenvironment = {
\t\tHOME => /Users/dev
\t\tpid = 99
\t}

\tdomain = system
\tusername = dev
\truns = 2
\tpid = 48211
\timmediate reason = speculative
\tlast exit code = (never exited)
}
"""


def printed(stdout: str, rc: int = 0, stderr: str = "", item: str = "") -> dict:
    return {"rc": rc, "stdout": stdout, "stderr": stderr, "item": item}


def test_a_running_service_from_launchctl_print() -> None:
    assert launchd_service(printed(PRINT_RUNNING), LABEL) == {
        "label": LABEL,
        "loaded": True,
        "running": True,
        "state": "running",
        "pid": 48211,
        "last_exit_status": None,
    }


@pytest.mark.parametrize(
    ("lines", "status"),
    [
        ("\tlast exit code = 1\n", 1),
        ("\tlast exit code = 78: EX_CONFIG\n", 78),
        ("\tlast exit code = 0\n", 0),
        ("\tlast exit code = (never exited)\n", None),
        ("\tlast exit code = 0\n\tlast terminating signal = Killed: 9\n", -9),
    ],
)
def test_a_loaded_service_without_a_process_keeps_how_it_last_ended(
    lines: str, status: int
) -> None:
    text = f"system/{LABEL} = {{\n\tstate = not running\n\truns = 3\n{lines}}}\n"
    service = launchd_service(printed(text), LABEL)
    assert (service["loaded"], service["running"], service["state"]) == (True, False, "not running")
    assert (service["pid"], service["last_exit_status"]) == (None, status)


def test_a_service_the_domain_does_not_have_is_not_loaded() -> None:
    missing = printed("", 113, f'Could not find service "{LABEL}" in domain for system')
    assert launchd_service(missing, LABEL) == {
        "label": LABEL,
        "loaded": False,
        "running": False,
        "state": None,
        "pid": None,
        "last_exit_status": None,
    }


def test_launchctl_that_could_not_answer_is_an_error_not_a_service_missing() -> None:
    with pytest.raises(AnsibleFilterError, match=r"rc 1\): Operation not permitted"):
        launchd_service(printed("", 1, "Operation not permitted\n"), LABEL)


def test_the_loaded_targets_are_those_launchctl_printed() -> None:
    gui, user = f"gui/501/{LABEL}", f"user/501/{LABEL}"
    text = f"{gui} = {{\n\tstate = running\n\tpid = 612\n}}\n"
    results = [printed(text, item=gui), printed("", 113, "Could not find service", item=user)]
    assert launchd_loaded(results) == [gui]
    assert launchd_loaded([printed("", 113, item=gui), printed("", 113, item=user)]) == []
    # Nobody logged in at the screen: no gui/ domain. A skipped item (no old plist): nothing.
    no_domain = printed("", 112, "Could not find domain for port", item=gui)
    assert launchd_loaded([no_domain, {"skipped": True, "item": user}]) == []
    with pytest.raises(AnsibleFilterError, match="rc 1"):
        launchd_loaded([printed("", 1, "Operation not permitted", item=gui)])


@pytest.mark.parametrize(
    ("text", "total", "used"),
    [
        ("total = 2048.00M  used = 1034.25M  free = 1013.75M  (encrypted)", 2048, 1034.25),
        ("vm.swapusage: total = 0.00M  used = 0.00M  free = 0.00M  (encrypted)", 0, 0),
        ("total = 3.00G  used = 1.50G  free = 1.50G  (encrypted)", 3072, 1536),
    ],
)
def test_swap_usage(text: str, total: float, used: float) -> None:
    assert macos_swap(text) == {
        "total_bytes": int(total * 1024**2),
        "used_bytes": int(used * 1024**2),
    }


def test_swap_usage_that_is_not_one_names_what_it_read() -> None:
    with pytest.raises(AnsibleFilterError, match="no swap usage in 'sysctl: unknown oid'"):
        macos_swap("sysctl: unknown oid\n")


def test_the_filters_are_registered() -> None:
    assert set(FilterModule().filters()) == {
        "launchd_job",
        "launchd_loaded",
        "launchd_service",
        "macos_swap",
        "python_version_problems",
    }


def ran(stdout: str, rc: int = 0, stderr: str = "") -> dict:
    return {"rc": rc, "stdout": stdout, "stderr": stderr}


@pytest.mark.parametrize("stdout", ["(3, 12)\n", "(3, 10)", "3.13"])
def test_a_recent_python_passes(stdout: str) -> None:
    assert python_version_problems(ran(stdout), "3.10", "mac", "mlx_server_python", "x") == []


def test_the_command_line_tools_python_is_refused_with_how_to_get_another() -> None:
    [problem] = python_version_problems(
        ran("(3, 9)\n"), "3.10", "mac-studio-1", "mlx_server_python", "python3"
    )
    assert problem.startswith("mac-studio-1: mlx_server_python is 'python3', Python 3.9 there;")
    assert "Python 3.10 or newer" in problem
    assert "brew install python@3.12" in problem and "uv python install 3.12" in problem


@pytest.mark.parametrize(
    ("result", "said"),
    [
        (ran("", 127, "/bin/sh: python3.12: command not found"), "command not found"),
        ({"rc": 2, "msg": "[Errno 2] No such file or directory"}, "No such file"),
        (ran("Python 3.12.1"), "no output"),
    ],
)
def test_a_python_that_does_not_run_is_refused(result: dict, said: str) -> None:
    [problem] = python_version_problems(result, "3.10", "mac", "mlx_server_python", "py")
    assert "did not run there" in problem and said in problem


def test_the_version_filter_is_registered() -> None:
    assert FilterModule().filters()["python_version_problems"] is python_version_problems
