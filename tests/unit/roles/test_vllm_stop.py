"""roles/vllm_server/files/llmfleet-vllm-stop against real processes on this machine: a fake
vLLM that binds a TCP port, has a child and (like a vLLM still starting) ignores SIGTERM is
killed after the timeout and its port is free; a well-behaved one stops on SIGTERM; a port
held by an unrelated process fails the check, naming it; and the same stop run through a
container engine's `exec -i NAME python3 -` (a fake engine that runs it here)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "roles/vllm_server/files/llmfleet-vllm-stop"


def load() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("llmfleet_vllm_stop", str(SCRIPT))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


stop_script = load()

# The fake vLLM: listens on a port, starts a child that holds the same socket (as vLLM's
# engine process inherits its parent's descriptors) under another command line (setproctitle
# names it VLLM::EngineCore; here with the test's tag), says "<port> <child pid>", waits.
FAKE_VLLM = textwrap.dedent(
    """
    import signal, socket, subprocess, sys, time
    if sys.argv[1] == "ignore":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import signal, sys, time\\n"
         "if sys.argv[1] == 'ignore': signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
         "time.sleep(600)", sys.argv[1], "VLLM::EngineCore", sys.argv[2]],
        pass_fds=[server.fileno()],
    )
    print(server.getsockname()[1], child.pid, flush=True)
    time.sleep(600)
    """
)


class FakeVllm:
    def __init__(self, marker: str, ignore_sigterm: bool) -> None:
        self.marker = marker
        tag = marker.rsplit(maxsplit=1)[-1]
        self.title = f"VLLM::EngineCore {tag}"
        mode = "ignore" if ignore_sigterm else "obey"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", FAKE_VLLM, mode, tag, *marker.split()],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        port, child = self.proc.stdout.readline().split()
        self.port, self.child = int(port), int(child)

    def pids(self) -> list[int]:
        return [self.proc.pid, self.child]

    def close(self) -> None:
        for pid in self.pids():
            if alive(pid):
                os.kill(pid, 9)
        self.proc.wait()


def alive(pid: int) -> bool:
    """Whether PID runs (a zombie waiting for its parent does not)."""
    fields = stop_script.stat_fields(pid)
    return fields is not None and fields[0] != "Z"


@pytest.fixture
def marker(tmp_path: Path) -> str:
    return f"vllm serve --config {tmp_path}/serve.yaml"


@pytest.fixture
def stubborn(marker: str) -> Iterator[FakeVllm]:
    fake = FakeVllm(marker, ignore_sigterm=True)
    yield fake
    fake.close()


@pytest.fixture
def obedient(marker: str) -> Iterator[FakeVllm]:
    fake = FakeVllm(marker, ignore_sigterm=False)
    yield fake
    fake.close()


def run(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done, time.monotonic() - started


def test_a_vllm_ignoring_sigterm_is_killed_after_the_timeout_and_its_port_freed(stubborn) -> None:
    done, took = run("--match", stubborn.marker, "--port", str(stubborn.port), "--timeout", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert f"SIGTERM to 2 vLLM processes: {stubborn.proc.pid} (" in out
    assert "2 vLLM processes still running 2 s after SIGTERM (vllm_server_stop_timeout): " in out
    assert f"SIGKILL to {stubborn.proc.pid} (" in out
    assert f"{stubborn.child} (" in out
    assert f"port {stubborn.port} is free" in out
    assert took >= 2
    assert not any(alive(pid) for pid in stubborn.pids())
    assert stubborn.proc.wait(timeout=5) == -9


def test_a_well_behaved_vllm_stops_on_sigterm_without_sigkill(obedient) -> None:
    done, took = run("--match", obedient.marker, "--port", str(obedient.port), "--timeout", "30")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SIGTERM to 2 vLLM processes" in done.stdout
    assert "SIGKILL" not in done.stdout
    assert f"port {obedient.port} is free" in done.stdout
    assert took < 15
    assert obedient.proc.wait(timeout=5) == -15


def test_a_child_whose_parent_died_first_stays_known_by_pid_and_start_time(stubborn) -> None:
    tracker = stop_script.Tracker([stubborn.marker], [], "")
    tracker.scan()
    assert set(tracker.stopped) == set(stubborn.pids())
    os.kill(stubborn.proc.pid, 9)
    stubborn.proc.wait()
    # Re-parented and without the match in its command line: still a target.
    assert set(stop_script.wait_gone(tracker, 0.5)) == {stubborn.child}
    tracker.signal(tracker.stopped, 9)
    assert stop_script.wait_gone(tracker, 5) == {}


def test_an_orphan_a_crash_left_is_found_by_its_title(stubborn) -> None:
    """vllm serve crashed; its engine (VLLM::EngineCore) lives on, re-parented: the unit in
    the Ray head container matches the title too."""
    os.kill(stubborn.proc.pid, 9)
    stubborn.proc.wait()
    done = run("--match", stubborn.marker, "--match", stubborn.title, "--timeout", "1")[0]
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SIGTERM to 1 vLLM processes: {stubborn.child} (" in done.stdout
    assert f"SIGKILL to {stubborn.child}" in done.stdout
    assert not alive(stubborn.child)


LISTENER = (
    "import socket, time; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); "
    "print(s.getsockname()[1], flush=True); time.sleep(600)"
)


def test_a_port_held_by_an_unrelated_process_fails_the_check_and_names_it(marker: str) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", LISTENER, "unrelated-listener"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        port = int(holder.stdout.readline())
        done = run("--match", marker, "--port", str(port), "--timeout", "1", "--port-wait", "1")[0]
        assert done.returncode == stop_script.PORT_HELD
        assert "no vLLM process left" in done.stdout
        assert (
            f"FAILED: port {port} is still in use 1 s after vLLM stopped, by pid {holder.pid} "
            in done.stdout
        )
        assert f"-c {LISTENER[:40]}" in done.stdout and "vLLM cannot start there" in done.stdout
        assert holder.poll() is None  # never signalled
    finally:
        holder.kill()
        holder.wait()


def test_a_port_check_alone_touches_no_process(stubborn) -> None:
    done = run("--port", str(stubborn.port), "--timeout", "1", "--port-wait", "0.5")[0]
    assert done.returncode == stop_script.PORT_HELD
    # Both hold the socket: both are named, neither is signalled.
    assert f"by pid {stubborn.proc.pid} " in done.stdout
    assert f"pid {stubborn.child} (" in done.stdout
    assert "SIGTERM to" not in done.stdout and "no vLLM process left" not in done.stdout
    assert all(alive(pid) for pid in stubborn.pids())


def test_a_process_that_survives_sigkill_fails_the_stop(stubborn, monkeypatch, capsys) -> None:
    """A process stuck in the kernel (state D, a GPU's teardown) outlives SIGKILL: its memory
    is not free, so nothing may start. Here the signals are withheld to keep it there."""
    monkeypatch.setattr(stop_script.Tracker, "signal", lambda self, pids, signum: None)
    assert stop_script.stop([stubborn.marker], [], "", 0.3, 0.3) == stop_script.SURVIVED
    out = capsys.readouterr().out
    assert (
        "FAILED: 2 vLLM processes still there 0.3 s after SIGKILL (their memory is not free)" in out
    )
    assert str(stubborn.proc.pid) in out and str(stubborn.child) in out


def test_the_script_and_its_parents_are_never_targets(marker: str) -> None:
    """Its own command line holds the match; nothing else runs with it."""
    done = run("--match", marker, "--timeout", "1")[0]
    assert done.returncode == 0
    assert "no vLLM process left" in done.stdout


def test_processes_of_the_unit_are_found_by_their_control_group(stubborn, monkeypatch) -> None:
    members = set(stubborn.pids())
    unit = "llmfleet-vllm.service"
    monkeypatch.setattr(stop_script, "in_unit", lambda pid, name: name == unit and pid in members)
    tracker = stop_script.Tracker([], [], unit)
    tracker.scan()
    assert set(tracker.stopped) == members


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("0::/system.slice/llmfleet-vllm.service\n", True),
        ("12:pids:/system.slice/llmfleet-vllm.service\n1:name=systemd:/\n", True),
        ("0::/system.slice/llmfleet-vllm-probe.service\n", False),
        ("0::/user.slice/user-0.slice/session-3.scope\n", False),
    ],
)
def test_a_unit_is_read_from_the_control_group(text: str, found: bool) -> None:
    assert stop_script.cgroup_in_unit(text, "llmfleet-vllm.service") is found


def test_ray_actors_of_vllm_are_waited_for_and_killed_at_the_deadline(
    tmp_path: Path, capsys
) -> None:
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    actor = subprocess.Popen([sys.executable, "-c", code, f"ray::RayWorkerWrapper {tmp_path}"])
    try:
        time.sleep(0.3)
        assert stop_script.stop([], [f"ray::RayWorkerWrapper {tmp_path}"], "", 0.5, 5) == 0
        out = capsys.readouterr().out
        assert "SIGTERM to" not in out
        assert f"waiting for 1 processes that end with vLLM: {actor.pid} (" in out
        assert f"SIGKILL to {actor.pid}" in out
        assert actor.wait(timeout=5) == -9
    finally:
        if actor.poll() is None:
            actor.kill()
            actor.wait()


@pytest.fixture
def engine(tmp_path: Path) -> Path:
    """A container engine whose container runs here: `exec -i NAME CMD...` runs CMD."""
    path = tmp_path / "engine"
    path.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        '  container) [ -e "$0.stopped" ] && echo false || echo true ;;\n'
        '  exec) shift 3; exec "$@" ;;\n'
        "esac\n"
    )
    path.chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    return path


def run_with_path(engine: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{engine.parent / 'bin'}:{os.environ['PATH']}"}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


def test_in_a_container_the_stop_runs_through_exec_the_port_is_checked_here(
    stubborn, engine
) -> None:
    done = run_with_path(
        engine,
        "--engine",
        str(engine),
        "--container",
        "ray-head",
        "--match",
        stubborn.marker,
        "--port",
        str(stubborn.port),
        "--timeout",
        "1",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ray-head: SIGTERM to 2 vLLM processes" in done.stdout
    assert "ray-head: 2 vLLM processes still running 1 s after SIGTERM" in done.stdout
    assert f"port {stubborn.port} is free" in done.stdout
    assert not any(alive(pid) for pid in stubborn.pids())


def test_a_container_that_is_not_running_has_nothing_left(engine, stubborn) -> None:
    Path(f"{engine}.stopped").touch()
    done = run_with_path(
        engine, "--engine", str(engine), "--container", "ray-head", "--match", "x", "--timeout", "1"
    )
    assert done.returncode == 0
    assert "container ray-head is not running: no vLLM left in it" in done.stdout


def test_a_failed_exec_fails_with_the_engines_message(capsys) -> None:
    calls: list[list[str]] = []

    def runner(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[bytes]:
        calls.append(argv)
        if argv[1] == "container":
            return subprocess.CompletedProcess(argv, 0, "true\n", "")
        assert kwargs["input"] == SCRIPT.read_bytes()
        return subprocess.CompletedProcess(
            argv, 126, b"", b'OCI runtime exec failed: exec: "python3": not found\n'
        )

    args = stop_script.parse(
        [
            "--engine",
            "podman",
            "--container",
            "ray",
            "--match",
            "vllm",
            "--port",
            "8000",
            "--timeout",
            "20",
        ]
    )
    assert stop_script.stop_in_container(args, runner) == stop_script.CONTAINER_FAILED
    assert calls[1] == [
        "podman",
        "exec",
        "-i",
        "ray",
        "python3",
        "-",
        "--timeout",
        "20.0",
        "--kill-wait",
        "30.0",
        "--match",
        "vllm",
    ]
    assert (
        "FAILED: the stop could not run inside container ray "
        "(podman exec ... python3 - exited 126): "
        'OCI runtime exec failed: exec: "python3": not found'
    ) in capsys.readouterr().out


def test_arguments_that_name_nothing_are_refused() -> None:
    with pytest.raises(SystemExit):
        stop_script.parse(["--timeout", "5"])
    with pytest.raises(SystemExit):
        stop_script.parse(["--timeout", "5", "--unit", "u.service", "--container", "c"])


def test_listening_sockets_are_read_from_proc_net(tmp_path: Path) -> None:
    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid\n"
    tail = "00000000:00000000 00:00000000 00000000     0        0"
    (tmp_path / "tcp").write_text(
        header
        + f"   0: 00000000:1F40 00000000:0000 0A {tail} 111 1\n"
        + f"   1: 0100007F:1F40 0100007F:A000 06 {tail} 0 3\n"
        + f"   2: 0100007F:1F41 00000000:0000 0A {tail} 222 1\n"
    )
    any6 = "00000000000000000000000000000000"
    (tmp_path / "tcp6").write_text(header + f"   0: {any6}:1F40 {any6}:0000 0A {tail} 333 1\n")
    # 8000 listens twice (IPv4, IPv6); its TIME_WAIT (06) connection holds nothing.
    assert stop_script.listening_inodes(8000, str(tmp_path)) == {"111", "333"}
    assert stop_script.listening_inodes(8002, str(tmp_path)) == set()
