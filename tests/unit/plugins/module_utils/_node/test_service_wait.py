"""service_wait: ready, broken (the process exited while waiting) and timeout, with the
reason line pulled out of the log."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._node.service_wait import (
    Probe,
    Supervisor,
    reason_line,
    wait,
)

TP3_REASON = (
    "ValueError: Total number of attention heads (2) must be divisible by tensor parallel size (3)."
)
VLLM_TP3_LOG = f"""\
INFO 11-23 03:20:01 [api_server.py:1885] vLLM API server version 0.32.0
INFO 11-23 03:20:02 [config.py:812] This model supports multiple tasks
(APIServer pid=311) Traceback (most recent call last):
(APIServer pid=311)   File "/opt/vllm/bin/vllm", line 8, in <module>
(APIServer pid=311) {TP3_REASON}
"""


class FakeHost:
    """systemctl/journalctl/docker answers scripted per poll."""

    def __init__(self, states: list[str], log: str = VLLM_TP3_LOG) -> None:
        self.states = states
        self.log = log
        self.calls: list[list[str]] = []

    def run(self, argv: list[str]) -> tuple[int, str, str]:
        self.calls.append(argv)
        if argv[:2] == ["systemctl", "show"] or argv[1:3] == ["container", "inspect"]:
            state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
            return 0, state, ""
        if argv[0] == "journalctl" or argv[1] == "logs":
            return 0, self.log, ""
        if argv[0] == "ray":
            return 0, " 1 node_a\n 1 node_b\n", ""
        raise AssertionError(argv)


def unit(active: str, sub: str, restarts: int = 0) -> str:
    return (
        f"ActiveState={active}\nSubState={sub}\nNRestarts={restarts}\n"
        "ExecMainStatus=1\nResult=exit-code\n"
    )


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def run_wait(
    host: FakeHost,
    probe: Probe,
    supervisor: Supervisor | None = None,
    timeout: float = 60,
    restarts_allowed: int = 0,
) -> dict:
    clock = Clock()
    return wait(
        supervisor or Supervisor(unit="llmfleet-vllm.service"),
        probe,
        timeout=timeout,
        delay=2,
        run=host.run,
        restarts_allowed=restarts_allowed,
        clock=clock,
        wall=lambda: 1_700_000_000.0,
        sleep=clock.sleep,
    )


NEVER_READY = Probe(command=["ray", "status"], pattern=r"^\s*1 node_", min_matches=3)


def test_a_unit_waiting_to_restart_is_broken_at_once_with_the_reason() -> None:
    host = FakeHost([unit("active", "running"), unit("activating", "auto-restart", 1)])
    result = run_wait(host, NEVER_READY)
    assert result["state"] == "broken"
    assert result["elapsed"] == 0.0  # the first poll after the exit, not the timeout
    assert result["reason"] == (TP3_REASON)
    assert result["supervisor"] == (
        "unit llmfleet-vllm.service (activating/auto-restart, last exit status 1, result exit-code)"
    )
    journal = next(call for call in host.calls if call[0] == "journalctl")
    assert journal[:5] == [
        "journalctl",
        "--unit",
        "llmfleet-vllm.service",
        "--since",
        "@1699999999",
    ]


def test_a_restart_between_two_polls_counts_as_an_exit() -> None:
    host = FakeHost(
        [unit("active", "running", 2), unit("active", "running", 2), unit("active", "running", 3)]
    )
    result = run_wait(host, NEVER_READY)
    assert result["state"] == "broken"
    assert result["attempts"] == 2


def test_a_manual_restart_passing_by_is_not_an_exit() -> None:
    states = [
        unit("active", "running"),
        unit("deactivating", "stop-sigterm"),
        unit("inactive", "dead"),
    ]
    states += [unit("activating", "start"), unit("active", "running")]
    host = FakeHost(states)
    result = run_wait(host, NEVER_READY, timeout=20)
    assert result["state"] == "timeout"
    assert result["attempts"] == 11


def test_inactive_on_two_polls_is_an_exit() -> None:
    host = FakeHost([unit("active", "running"), unit("inactive", "dead")])
    assert run_wait(host, NEVER_READY)["state"] == "broken"


def test_a_failed_unit_is_broken() -> None:
    host = FakeHost([unit("active", "running"), unit("failed", "failed")])
    assert run_wait(host, NEVER_READY)["state"] == "broken"


@pytest.mark.parametrize(
    ("status", "state"),
    [("restarting 1 1", "broken"), ("running 4 0", "broken"), ("exited 3 137", "broken")],
)
def test_containers_are_watched_through_the_engine(status: str, state: str) -> None:
    host = FakeHost(["running 3 0", status])
    result = run_wait(host, NEVER_READY, Supervisor(container="llmfleet-vllm", engine="podman"))
    assert result["state"] == state
    assert host.calls[0][:3] == ["podman", "container", "inspect"]
    # The reason is looked for in more of the log than the result shows (log_lines).
    assert ["podman", "logs", "--tail", "1000", "llmfleet-vllm"] in host.calls


class JoiningLater(FakeHost):
    """A Ray node whose container exits (its start timed out on a busy head), is restarted
    by the engine and then joins: the probe lists both nodes after the restart."""

    def __init__(self, states: list[str], ready_after: int) -> None:
        super().__init__(states)
        self.probes = 0
        self.ready_after = ready_after

    def run(self, argv: list[str]) -> tuple[int, str, str]:
        if argv[0] == "ray":
            self.probes += 1
            nodes = 2 if self.probes > self.ready_after else 1
            return 0, " 1 node_a\n" * nodes, ""
        return super().run(argv)


RAY_CONTAINER = Supervisor(container="llmfleet-ray")
TWO_NODES = Probe(command=["ray", "status"], pattern=r"^\s*1 node_", min_matches=2)


def test_a_restart_the_wait_allows_is_waited_through() -> None:
    host = JoiningLater(
        ["running 0 0", "running 0 0", "restarting 1 1", "running 1 0", "running 1 0"],
        ready_after=4,
    )
    result = run_wait(host, TWO_NODES, RAY_CONTAINER, restarts_allowed=2)
    assert (result["state"], result["restarts"], result["attempts"]) == ("ready", 1, 5)


def test_one_exit_more_than_allowed_is_broken_with_the_count() -> None:
    host = JoiningLater(["running 0 0", "restarting 1 1", "running 2 0", "restarting 3 1"], 99)
    result = run_wait(host, TWO_NODES, RAY_CONTAINER, restarts_allowed=2)
    assert (result["state"], result["restarts"]) == ("broken", 3)
    assert result["reason"] == TP3_REASON


def test_a_unit_systemd_gave_up_on_is_broken_whatever_the_allowance() -> None:
    host = FakeHost([unit("active", "running"), unit("failed", "failed")])
    assert run_wait(host, NEVER_READY, restarts_allowed=5)["state"] == "broken"


def test_a_command_probe_counts_matching_lines() -> None:
    host = FakeHost([unit("active", "running")])
    probe = Probe(command=["ray", "status"], pattern=r"^\s*1 node_", min_matches=2)
    result = run_wait(host, probe)
    assert result == {
        "state": "ready",
        "elapsed": 0.0,
        "attempts": 1,
        "restarts": 0,
        "probe": "2 of 2 lines match '^\\\\s*1 node_'",
    }


@pytest.fixture
def health_server() -> Iterator[str]:
    answers = iter([503, 200])

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            assert self.headers["Authorization"] == "Bearer k"
            self.send_response(next(answers, 200))
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/health"
    server.shutdown()


def test_an_url_probe_waits_for_200(health_server: str) -> None:
    host = FakeHost([unit("active", "running")])
    result = run_wait(host, Probe(url=health_server, headers={"Authorization": "Bearer k"}))
    assert result["state"] == "ready"
    assert result["attempts"] == 2


def test_a_refused_connection_keeps_waiting_until_the_timeout() -> None:
    host = FakeHost([unit("active", "running")])
    result = run_wait(host, Probe(url="http://127.0.0.1:9/health"), timeout=6)
    assert result["state"] == "timeout"
    assert "refused" in str(result["probe"]).lower()


RAY_WORKER_LOG = """\
(APIServer pid=477) WARNING 11-27 01:34:23 [system_utils.py:255] Found ulimit of 1024 and failed \
to automatically increase. This can cause fd limit errors like `OSError: [Errno 24] Too many open \
files`. Consider increasing with ulimit -n
(EngineCore pid=506) ERROR 11-27 01:34:39 [core.py:1510] EngineCore failed to start.
(EngineCore pid=506) ERROR 11-27 01:34:39 [core.py:1510] ray.exceptions.RayTaskError(\
FileNotFoundError): ray::RayWorkerProc.initialize_worker() (pid=163, ip=192.168.100.12)
(EngineCore pid=506) ERROR 11-27 01:34:39 [core.py:1510] FileNotFoundError: [Errno 2] No such \
file or directory: '/etc/x.yaml'
(EngineCore pid=506) ERROR 11-27 01:34:39 [ray_executor_v2.py:574] ray.exceptions.\
ActorHandleNotFoundError: Failed to find a corresponding actor handle for 187e86466f666dc8
    raise RuntimeError(
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
"""


@pytest.mark.parametrize(
    ("log", "reason"),
    [
        (
            VLLM_TP3_LOG,
            TP3_REASON,
        ),
        (
            "a\nERROR 11-23 [core.py:1] EngineCore failed to start.\nshutting down\n",
            "ERROR 11-23 [core.py:1] EngineCore failed to start.",
        ),
        ("RuntimeError: first\nlater\nKeyError: 'x'\n", "KeyError: 'x'"),
        ("just stopped\n", "just stopped"),
        (
            "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
            "  Value error, User-specified max_model_len (262144) is greater than the derived"
            " max_model_len. [type=value_error, input_value=ArgsKwargs((), {}), input_type=Args]\n"
            "    For further information visit https://errors.pydantic.dev/2.14/v/value_error\n",
            "ValueError: User-specified max_model_len (262144) is greater than the derived"
            " max_model_len.",
        ),
        (
            "usage: vllm serve [model_tag] [options]\n"
            "vllm serve: error: argument --kv-cache-dtype: invalid choice: 'fp4'\n",
            "vllm serve: error: argument --kv-cache-dtype: invalid choice: 'fp4'",
        ),
        # vLLM's Ray executor in the lab: a warning that quotes an error, then the worker's
        # root cause, then the generic line that points above it.
        (RAY_WORKER_LOG, "FileNotFoundError: [Errno 2] No such file or directory: '/etc/x.yaml'"),
        (
            "WARNING 11-27 [system_utils.py:255] Found ulimit of 1024. This can cause fd limit"
            " errors like `OSError: [Errno 24] Too many open files`. Consider increasing\n"
            "(Worker pid=1) ERROR [core.py:1512] RuntimeError: Worker failed with error"
            " 'CppCompileError: C++ compile error'\n"
            '(Worker pid=1)   warnings.warn(f"Can\'t find Python.h in /usr/include")\n',
            "RuntimeError: Worker failed with error 'CppCompileError: C++ compile error'",
        ),
        ("", ""),
    ],
)
def test_reason_line(log: str, reason: str) -> None:
    assert reason_line(log) == reason


def test_a_start_refused_before_the_wait_began_is_read_further_back() -> None:
    """vLLM in the Ray head container refused its arguments and exited 0.1 s into the wait:
    its own line was older than the wait, and the journal since then held systemd's lines
    alone. The reason is the process's line, read further back."""
    systemd_only = (
        "llmfleet-vllm.service: Main process exited, code=exited, status=2/INVALIDARGUMENT\n"
        "llmfleet-vllm.service: Failed with result 'exit-code'."
    )
    refused = "vllm: error: unrecognized arguments: --llmfleet-lab-broken\n" + systemd_only

    class Journal(FakeHost):
        def run(self, argv: list[str]) -> tuple[int, str, str]:
            if argv[0] == "journalctl":
                self.calls.append(argv)
                return 0, refused if argv[4] == "@1699999939" else systemd_only, ""
            return super().run(argv)

    host = Journal([unit("activating", "auto-restart", 1)])
    result = run_wait(host, NEVER_READY)
    assert result["state"] == "broken"
    assert result["reason"] == "vllm: error: unrecognized arguments: --llmfleet-lab-broken"
    # What is shown is the log since the wait began.
    assert result["log"].startswith("llmfleet-vllm.service: Main process exited")


def test_systemd_lines_are_the_reason_only_when_the_process_said_nothing() -> None:
    failed = "llmfleet-vllm.service: Failed with result 'exit-code'."
    assert reason_line(f"vllm: error: unrecognized arguments: x\n{failed}") == (
        "vllm: error: unrecognized arguments: x"
    )
    assert reason_line(failed) == failed


REFUSED = "vllm: error: unrecognized arguments: --llmfleet-lab-broken"


class LateJournal(FakeHost):
    """A unit that exited at once, whose journal holds ``before`` for four reads and ``after``
    from the fifth on (journald writes a unit's last lines a moment after it exited)."""

    def __init__(self, before: str, after: str) -> None:
        super().__init__([unit("activating", "auto-restart", 1)])
        self.before, self.after, self.reads = before, after, 0

    def run(self, argv: list[str]) -> tuple[int, str, str]:
        if argv[0] == "journalctl":
            self.reads += 1
            return 0, self.after if self.reads > 4 else self.before, ""
        return super().run(argv)


def test_a_log_journald_has_not_written_yet_is_read_again() -> None:
    """The usage error of a broken image, found 0.1 s into the wait under load: the journal
    held nothing of the process yet (CI, 2026-11-27). The log is read again until it says
    why, for a few seconds."""
    host = LateJournal(before="", after=REFUSED)
    result = run_wait(host, NEVER_READY)
    assert result["reason"] == REFUSED
    assert result["log"] == REFUSED


def test_a_line_before_the_process_is_not_its_reason_while_the_journal_is_late() -> None:
    """The ExecStartPre's own line was in the journal before the usage error (2026-11-28):
    it was taken for the reason, and the wait said "port 8000 is free"."""
    stopped = "port 8000 is free"
    host = LateJournal(before=stopped, after=f"{stopped}\n{REFUSED}")
    result = run_wait(host, NEVER_READY)
    assert result["reason"] == REFUSED


def test_a_process_that_said_nothing_is_not_waited_for_long() -> None:
    host = FakeHost([unit("activating", "auto-restart", 1)], log="")
    clock = Clock()
    result = wait(
        Supervisor(unit="llmfleet-vllm.service"),
        NEVER_READY,
        timeout=60,
        delay=2,
        run=host.run,
        clock=clock,
        wall=lambda: 1_700_000_000.0,
        sleep=clock.sleep,
    )
    assert result["state"] == "broken"
    assert result["reason"] == ""
    assert 5 <= clock.now <= 6
