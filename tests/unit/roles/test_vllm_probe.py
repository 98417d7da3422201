"""roles/vllm_server/files/llmfleet-vllm-probe: the serving probe's state machine (warm-up after
a start, probes, heals and their bound), what it records, and its HTTP client against a real
server that answers like vLLM."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._node.deployment_history import (
    current_state,
    parse_history,
)

SCRIPT = Path(__file__).resolve().parents[3] / "roles/vllm_server/files/llmfleet-vllm-probe"


def load() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("llmfleet_vllm_probe", str(SCRIPT))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


probe_script = load()

METRICS = """\
# HELP vllm:generation_tokens_total Number of generation tokens processed.
vllm:generation_tokens_total{engine="0",model_name="m"} 120.0
vllm:prompt_tokens_total{engine="0",model_name="m"} 4000.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 7.0
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 3.0
vllm:num_requests_running{engine="0",model_name="m"} 2.0
"""


def test_progress_sums_the_counters_that_grow_while_the_engine_works() -> None:
    assert probe_script.progress(METRICS) == 120 + 4000 + 7 + 3
    assert probe_script.progress("") == 0


def test_a_failure_reason_comes_from_vllms_error_body() -> None:
    body = json.dumps({"error": {"message": "EngineCore encountered an issue.", "code": 500}})
    assert probe_script.failure_reason(500, body) == "HTTP 500: EngineCore encountered an issue."
    assert probe_script.failure_reason(502, "bad gateway") == "HTTP 502: bad gateway"
    assert probe_script.failure_reason(503, "") == "HTTP 503"


class FakeHttp:
    """vLLM's API as the probe sees it: /health, /metrics and the requests' answers."""

    def __init__(self) -> None:
        self.health = 200
        self.answer: tuple[int | None, str] = (200, "{}")
        self.counters = 0.0
        self.grow_while_asked = 0.0
        self.posts: list[str] = []

    def get(self, path: str, timeout: float) -> tuple[int | None, str]:
        if path == "/health":
            return self.health, ""
        return 200, f"vllm:generation_tokens_total {self.counters}\n"

    def post(self, path: str, body: dict[str, Any], timeout: float) -> tuple[int | None, str]:
        self.posts.append(path)
        self.counters += self.grow_while_asked
        return self.answer


class FakeSupervisor:
    def __init__(self) -> None:
        self.start = "invocation-1"
        self.running = True
        self.restarts = 0
        self.restarted = 0
        # What the probe did to vLLM, in order ("kill", "restart").
        self.actions: list[str] = []

    def describe(self) -> str:
        return "llmfleet-vllm.service"

    def started_epoch(self) -> int:
        return 1_000_000

    def state(self) -> tuple[str | None, bool, int | None]:
        return self.start, self.running, self.restarts

    def restart(self) -> tuple[bool, str]:
        self.restarted += 1
        self.start = f"invocation-after-heal-{self.restarted}"
        self.actions.append("restart")
        return True, ""

    def kill(self) -> tuple[bool, str]:
        self.actions.append("kill")
        return True, ""


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def parts(tmp_path: Path) -> tuple[Any, FakeHttp, FakeSupervisor, Clock, Path]:
    history = tmp_path / "history.json"
    entry = {
        "time": "2026-11-26T10:00:00Z",
        "action": "up",
        "from": None,
        "to": {"profile": "tiny_lab", "image": None},
        "outcome": "ok",
        "reason": None,
    }
    history.write_text(json.dumps({"version": 1, "entries": [entry]}))
    config = {
        **probe_script.DEFAULTS,
        "url": "http://127.0.0.1:8000",
        "model": "m",
        "unit": "llmfleet-vllm.service",
        "state_file": str(tmp_path / "state.json"),
        "history_file": str(history),
    }
    http, supervisor, clock = FakeHttp(), FakeSupervisor(), Clock()
    probe = probe_script.Probe(config, http, supervisor, clock=clock)
    return probe, http, supervisor, clock, history


def test_a_start_counts_as_ready_once_both_apis_answered_the_warm_up(parts) -> None:
    probe, http, _supervisor, _clock, _history = parts
    http.health = 503
    probe.step()
    assert probe.phase == "starting" and http.posts == []
    http.health = 200
    probe.step()
    assert probe.phase == "ready"
    assert http.posts == ["/v1/chat/completions", "/v1/messages"]
    probe.step()
    assert http.posts[-1] == "/v1/chat/completions"
    assert probe.document()["ready_since"] is not None


def test_failures_in_a_row_heal_the_group_and_record_why(parts, capsys) -> None:
    probe, http, supervisor, _clock, history = parts
    probe.step()
    http.answer = (502, json.dumps({"error": {"message": "upstream closed"}}))
    probe.step()
    probe.step()
    assert probe.phase == "failing" and supervisor.restarted == 0
    probe.step()
    # Killed first: an engine that stopped answering does not stop when asked either, and
    # the restart would wait out the stop script's timeout (20 s of the matrix's wedged case).
    assert supervisor.actions == ["kill", "restart"]
    reason = "3 requests in a row got no answer (last: HTTP 502: upstream closed)"
    assert probe.document()["last_heal"]["reason"] == reason
    assert f"healing: {reason}: restarting llmfleet-vllm.service" in capsys.readouterr().out
    entries = parse_history(history.read_text())
    assert entries[-1]["action"] == "heal" and entries[-1]["reason"] == reason
    # What serves is unchanged by a heal.
    assert current_state(entries) == ({"profile": "tiny_lab", "image": None}, False)
    # The new start warms up again before it counts as ready.
    http.answer = (200, "{}")
    probe.step()
    assert probe.phase == "ready"


def test_an_engine_that_vllm_says_is_dead_is_healed_at_once(parts) -> None:
    """A rank left (rebooted): rank 0 answers /health and fails every request with a 500
    naming the dead engine; waiting for more failures would only fail more users."""
    probe, http, supervisor, _clock, _history = parts
    probe.step()
    http.answer = (500, json.dumps({"error": {"message": "EngineCore encountered an issue."}}))
    probe.step()
    # A dead engine answers, and stops when asked: restarted, not killed.
    assert supervisor.actions == ["restart"]
    assert probe.heals[-1]["reason"] == (
        "vLLM's engine is dead (HTTP 500: EngineCore encountered an issue.)"
    )


def test_users_traffic_since_the_last_probe_stands_for_the_probes_request(parts) -> None:
    """A group whose counters moved (users' requests made tokens) is not asked again: its
    users' per-group counts (a benchmark's shares) hold no probe requests."""
    probe, http, _supervisor, _clock, _history = parts
    probe.step()
    probe.step()
    asked = len(http.posts)
    http.counters += 40  # users' requests, between two probes
    probe.step()
    assert len(http.posts) == asked and probe.last_probe["traffic"] is True
    probe.step()  # nothing moved since: the probe asks
    assert len(http.posts) == asked + 1


def test_a_slow_answer_while_the_engine_makes_progress_is_busy_not_wedged(parts) -> None:
    probe, http, supervisor, _clock, _history = parts
    probe.step()
    http.answer = (None, "no answer within 30 s")
    http.grow_while_asked = 5
    for _ in range(5):
        probe.step()
    assert probe.phase == "ready" and supervisor.restarted == 0
    assert probe.last_probe["busy"] is True
    http.grow_while_asked = 0
    for _ in range(3):
        probe.step()
    assert supervisor.restarted == 1


def test_heals_stop_after_the_limit_of_heals_that_did_not_bring_it_back(parts, capsys) -> None:
    probe, http, supervisor, clock, _history = parts
    probe.step()
    http.answer = (500, "{}")
    for _ in range(30):
        clock.now += 10
        probe.step()
    # Each heal's new start fails its warm-up: 3 heals, then it gives up.
    assert supervisor.restarted == 3
    assert probe.phase == "given up"
    out = capsys.readouterr().out
    assert out.count("not healing again: 3 heals in a row did not bring vLLM back") == 1
    # A probe that answers again resumes it, and starts the count again.
    http.answer = (200, "{}")
    probe.step()
    assert probe.phase == "ready"
    http.answer = (500, "{}")
    for _ in range(3):
        probe.step()
    assert supervisor.restarted == 4


def test_heals_that_work_are_not_bounded(parts) -> None:
    """A fault that each heal repairs (a wedge now and then) is healed however often."""
    probe, http, supervisor, _clock, _history = parts
    probe.step()
    for heals in range(1, 6):
        http.answer = (500, "{}")
        for _ in range(3):
            probe.step()
        assert supervisor.restarted == heals
        http.answer = (200, "{}")
        probe.step()
        assert probe.phase == "ready"


def test_a_restart_by_the_supervisor_after_a_failure_is_recorded_with_that_failure(parts) -> None:
    """vLLM fails the probe's request and exits by itself; systemd starts it again
    (NRestarts grows)."""
    probe, http, supervisor, _clock, history = parts
    probe.step()
    http.answer = (503, json.dumps({"error": {"message": "Service Unavailable"}}))
    probe.step()
    supervisor.start, supervisor.restarts = "invocation-2", 1
    http.health = 503
    probe.step()
    assert probe.phase == "starting" and supervisor.restarted == 0
    heal = probe.document()["last_heal"]
    assert heal["by"] == "supervisor"
    assert heal["reason"] == "vLLM exited and was started again (HTTP 503: Service Unavailable)"
    assert parse_history(history.read_text())[-1]["action"] == "heal"


def test_a_start_that_never_answers_health_is_healed_after_the_start_timeout(parts) -> None:
    probe, http, supervisor, clock, _history = parts
    http.health = 503
    probe.step()
    clock.now += probe.config["start_timeout"] + 1
    probe.step()
    assert supervisor.restarted == 1
    assert "did not answer /health 1800 s after it started" in probe.heals[-1]["reason"]


def test_ready_is_said_only_for_the_start_the_probe_saw(parts) -> None:
    probe, _http, supervisor, _clock, _history = parts
    probe.step()
    probe.step()
    probe.save()
    assert probe_script.ready(probe.config, supervisor)[0] is True
    supervisor.start = "invocation-2"
    assert probe_script.ready(probe.config, supervisor) == (
        False,
        "the probe has not seen this start of vLLM yet",
    )
    supervisor.running = False
    assert probe_script.ready(probe.config, supervisor)[0] is False


def test_heals_survive_a_restart_of_the_probe(parts) -> None:
    probe, http, _supervisor, _clock, _history = parts
    probe.step()
    http.answer = (500, "{}")
    for _ in range(3):
        probe.step()
    probe.save()
    again = probe_script.Probe(probe.config, http, FakeSupervisor())
    assert again.document()["last_heal"] == probe.document()["last_heal"]


def test_no_history_no_record() -> None:
    assert probe_script.history_with_heal(None, 0, "why") is None
    assert probe_script.history_with_heal({"version": 1, "entries": "x"}, 0, "why") is None


class Vllm(BaseHTTPRequestHandler):
    """Answers like vLLM: the key on /v1, /health and /metrics open."""

    def do_GET(self) -> None:
        self.reply(200, "ok" if self.path == "/health" else METRICS)

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        body = json.loads(self.rfile.read(length))
        if self.headers.get("Authorization") != "Bearer the-key":
            self.reply(401, json.dumps({"error": {"message": "Unauthorized"}}))
        elif body.get("max_tokens") != 1 and self.path == "/v1/chat/completions":
            self.reply(400, json.dumps({"error": {"message": "expected one token"}}))
        else:
            self.reply(200, json.dumps({"choices": [{"text": "OK"}]}))

    def reply(self, status: int, text: str) -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_args: object) -> None:
        pass


def test_the_http_client_sends_the_key_as_bearer_and_one_token() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Vllm)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        http = probe_script.Http(url, "the-key")
        assert http.get("/health", 5)[0] == 200
        assert http.post("/v1/chat/completions", probe_script.probe_body("m"), 5)[0] == 200
        wrong = probe_script.Http(url, "other")
        status, text = wrong.post("/v1/chat/completions", probe_script.probe_body("m"), 5)
        assert probe_script.failure_reason(status, text) == "HTTP 401: Unauthorized"
        closed = probe_script.Http("http://127.0.0.1:9", "the-key")
        assert closed.post("/v1/chat/completions", {}, 2)[1].startswith("connection failed")
    finally:
        server.shutdown()


def meminfo(available_kib: int, total_kib: int = 8 * 1024 * 1024, free_kib: int = 1) -> str:
    return (
        f"MemTotal:       {total_kib} kB\n"
        f"MemFree:        {free_kib} kB\n"
        f"MemAvailable:   {available_kib} kB\n"
    )


@pytest.fixture
def guarded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, Clock, list[int]]:
    drops: list[int] = []
    monkeypatch.setattr(probe_script, "drop_page_cache", lambda: drops.append(1))
    config = {
        **probe_script.DEFAULTS,
        "url": "http://127.0.0.1:8000",
        "model": "m",
        "state_file": str(tmp_path / "state.json"),
        "history_file": str(tmp_path / "history.json"),
        "memory_floor_percent": 3,
    }
    supervisor, clock = FakeSupervisor(), Clock()
    probe = probe_script.Probe(config, FakeHttp(), supervisor, clock=clock)
    probe.step()
    return probe, supervisor, clock, drops


def test_the_memory_guard_kills_vllm_under_the_floor_once_per_interval(guarded, capsys) -> None:
    probe, supervisor, clock, _drops = guarded
    # 3% of 8 GiB is 251,658 KiB.
    assert probe.guard_memory(meminfo(300_000, free_kib=300_000)) is False
    assert probe.guard_memory(meminfo(200_000)) is True
    assert supervisor.actions.count("kill") == 1
    assert probe.guard_memory(meminfo(100_000)) is False
    # systemd starts vLLM again: the guard's heal, not a crash of its own.
    supervisor.start, supervisor.restarts = "invocation-2", 1
    probe.step()
    assert len(probe.heals) == 1
    clock.now += probe.config["interval"]
    assert probe.guard_memory(meminfo(100_000)) is True
    heal = probe.document()["last_heal"]
    assert heal["by"] == "memory guard"
    assert heal["reason"].startswith("the host ran out of memory (MemAvailable 0.10 of 8.00 GiB")
    assert "vLLM killed to keep the host up" in capsys.readouterr().out
    # Off: never.
    probe.config["memory_floor_percent"] = 0
    clock.now += 60
    assert probe.guard_memory(meminfo(1)) is False


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"unit": "llmfleet-vllm.service"},
         [["systemctl", "kill", "--signal=KILL", "llmfleet-vllm.service"]]),
        ({"container": "llmfleet-vllm", "engine": "podman"},
         [["podman", "kill", "--signal", "KILL", "llmfleet-vllm"]]),
        # vLLM exec'd in the Ray head container: the unit holds only the exec's client, so
        # vLLM's processes in the container are killed first (else they kept the memory
        # through the stop's 20 s of grace).
        ({"unit": "llmfleet-vllm.service",
          "kill_command": ["llmfleet-vllm-stop", "--container", "llmfleet-ray", "--timeout", "0"]},
         [["llmfleet-vllm-stop", "--container", "llmfleet-ray", "--timeout", "0"],
          ["systemctl", "kill", "--signal=KILL", "llmfleet-vllm.service"]]),
    ],
)  # fmt: skip
def test_the_kill_reaches_vllms_processes_where_they_run(
    config: dict[str, Any], expected: list[list[str]]
) -> None:
    calls: list[list[str]] = []

    def runner(argv: list[str]) -> tuple[int, str, str]:
        calls.append(argv)
        return 0, "", ""

    assert probe_script.Supervisor(config, runner).kill() == (True, "")
    assert calls == expected


def test_a_kill_in_the_container_that_fails_is_said_and_goes_no_further() -> None:
    calls: list[list[str]] = []

    def runner(argv: list[str]) -> tuple[int, str, str]:
        calls.append(argv)
        return 5, "FAILED: cannot ask docker about container llmfleet-ray\n", ""

    config = {"unit": "llmfleet-vllm.service", "kill_command": ["llmfleet-vllm-stop"]}
    ok, why = probe_script.Supervisor(config, runner).kill()
    assert (ok, why) == (False, "FAILED: cannot ask docker about container llmfleet-ray")
    assert calls == [["llmfleet-vllm-stop"]]


def test_free_memory_under_the_floor_first_gets_the_page_cache_back(guarded, capsys) -> None:
    """On unified memory the GPU's allocations need free memory: a page cache that ate it is
    dropped (once a minute at most), and nothing is killed while it is still available."""
    probe, supervisor, clock, drops = guarded
    assert probe.guard_memory(meminfo(4_000_000, free_kib=100_000)) is False
    assert probe.guard_memory(meminfo(4_000_000, free_kib=100_000)) is False
    assert (len(drops), supervisor.actions.count("kill")) == (1, 0)
    assert "is under the floor of 3%: page cache dropped" in capsys.readouterr().out
    clock.now += 60
    probe.guard_memory(meminfo(4_000_000, free_kib=100_000))
    assert len(drops) == 2


def test_memory_left_reads_meminfo() -> None:
    assert probe_script.memory_left(meminfo(1024, 2048, 512)) == (
        512 * 1024,
        1024 * 1024,
        2048 * 1024,
    )
    assert probe_script.memory_left("MemTotal: 5 kB\n") is None


def test_the_verdict_says_ready_only_while_vllm_answers_and_names_its_start(parts) -> None:
    probe, http, _supervisor, _clock, _history = parts
    assert probe_script.verdict(probe) == (503, {"phase": "down", "start": None, "started": None})
    probe.step()
    assert probe_script.verdict(probe) == (
        200,
        {"phase": "ready", "start": "invocation-1", "started": 1_000_000},
    )
    http.health = 503  # vLLM stopped since the last probe
    assert probe_script.verdict(probe)[0] == 503
    http.health = 200
    http.answer = (None, "no answer within 20 s")
    probe.step()
    status, document = probe_script.verdict(probe)
    assert (status, document["phase"]) == (503, "failing")
    assert document["last_failure"] == "no answer within 20 s"


def test_an_engines_start_time_is_read_to_the_second() -> None:
    assert probe_script.iso_epoch("2026-11-26T22:35:10.123456789Z") == 1795732510
    assert probe_script.iso_epoch("2026-11-26T23:35:10+01:00") == 1795732510
    assert probe_script.iso_epoch("not a time") is None
