"""vLLM in Docker: supervised, configured from serve.yaml, the key only in a root-only file."""

from __future__ import annotations

import json
import time

import pytest

KEY = "molecule-test-key-1234"
URL = "http://127.0.0.1:8000"


@pytest.fixture
def api(host):
    if host.backend.get_hostname() != "molecule-spark-1":
        pytest.skip("vLLM runs on molecule-spark-1 only")
    return host


def status(host, path: str, *headers: str, body: str | None = None) -> int:
    cmd = "curl -s -o /dev/null -w '%%{http_code}' -m 120"
    args: list[str] = []
    for header in headers:
        cmd += " -H %s"
        args.append(header)
    if body is not None:
        cmd += " -H 'content-type: application/json' -d %s"
        args.append(body)
    # curl prints 000 and exits non-zero while nothing listens (a restart in progress).
    return int(host.check_output(cmd + " %s || true", *args, URL + path))


def inspect(host) -> dict:
    return json.loads(host.check_output("docker inspect llmfleet-vllm"))[0]


def test_container_is_supervised_and_never_removed(api) -> None:
    info = inspect(api)
    assert info["State"]["Running"] is True
    assert info["HostConfig"]["RestartPolicy"]["Name"] == "always"
    assert info["HostConfig"]["AutoRemove"] is False
    assert info["Config"]["Entrypoint"] == ["vllm"]
    assert info["Config"]["Cmd"] == ["serve", "--config", "/etc/llmfleet/vllm/serve.yaml"]
    # Every stop and restart waits vllm_server_stop_timeout (20 s), then SIGKILL.
    assert info["Config"]["StopTimeout"] == 20


def test_the_stop_script_finds_the_port_held_by_the_running_vllm(api) -> None:
    """The role's restart checks the port free before the container starts again: while
    vLLM runs the check must see its listener, name it and fail."""
    stop = api.file("/usr/local/sbin/llmfleet-vllm-stop")
    assert (stop.user, stop.mode) == ("root", 0o755)
    check = api.run("/usr/local/sbin/llmfleet-vllm-stop --port 8000 --timeout 1 --port-wait 0")
    assert check.rc == 4, check.stdout + check.stderr
    assert "FAILED: port 8000 is still in use" in check.stdout and "vllm" in check.stdout


def test_options_come_from_serve_yaml(api) -> None:
    serve = api.file("/etc/llmfleet/vllm/serve.yaml")
    assert serve.mode == 0o600
    assert api.file("/etc/llmfleet/vllm").mode == 0o700
    content = serve.content_string
    for line in (
        "model: /opt/models/llmfleet-tiny",
        "served-model-name: llmfleet-tiny",
        "enable-auto-tool-choice: true",
        "tool-call-parser: hermes",
        "host: 0.0.0.0",
        "port: 8000",
    ):
        assert line in content.splitlines()
    assert "nnodes" not in content and "headless" not in content


def test_api_key_only_in_a_root_only_file(api) -> None:
    env_file = api.file("/etc/llmfleet/private/vllm.env")
    assert (env_file.user, env_file.mode) == ("root", 0o600)
    assert f"VLLM_API_KEY={KEY}" in env_file.content_string.splitlines()
    assert api.file("/etc/llmfleet/private").mode == 0o700
    assert not api.file("/etc/llmfleet/vllm/vllm.env").exists
    assert KEY not in api.file("/etc/llmfleet/vllm/serve.yaml").content_string
    assert KEY not in " ".join(inspect(api)["Args"])
    cmdlines = api.check_output("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' || true")
    assert "vllm serve" in cmdlines and KEY not in cmdlines


def test_both_apis_answer_with_the_key_and_refuse_without(api) -> None:
    bearer = f"Authorization: Bearer {KEY}"
    chat = json.dumps(
        {"model": "llmfleet-tiny", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    )
    assert status(api, "/v1/chat/completions", bearer, body=chat) == 200
    assert status(api, "/v1/messages", bearer, "anthropic-version: 2023-06-01", body=chat) == 200
    assert status(api, "/v1/chat/completions", body=chat) == 401
    assert status(api, "/v1/messages", "anthropic-version: 2023-06-01", body=chat) == 401


def probe_state(host) -> dict:
    return json.loads(host.file("/var/lib/llmfleet/vllm-probe.json").content_string)


def test_the_serving_probe_has_seen_it_answer_and_answers_the_gateways_check(api) -> None:
    assert api.service("llmfleet-vllm-probe").is_running
    state = probe_state(api)
    assert state["phase"] == "ready", state
    assert state["warmup_seconds"] > 0
    # Its verdict, where a gateway checks the group: no key needed, none served.
    verdict = api.check_output("curl -s -w ' %%{http_code}' %s", "http://127.0.0.1:8009/health")
    assert verdict.endswith(" 200") and json.loads(verdict[:-4]) == {"phase": "ready"}
    assert (
        api.run("/usr/local/sbin/llmfleet-vllm-probe --ready /etc/llmfleet/vllm/probe.json").rc == 0
    )
    # The kernel's first victim when memory runs out (the container's processes); the probe,
    # among the last. A lab node lacks CAP_SYS_RESOURCE, which lowering a score needs: systemd
    # is told -500 (on a host it applies it), the process keeps 0 here.
    assert inspect(api)["HostConfig"]["OomScoreAdj"] == 500
    pid = inspect(api)["State"]["Pid"]
    assert api.check_output("cat /proc/%s/oom_score_adj", str(pid)) == "500"
    told = api.check_output("systemctl show -p OOMScoreAdjust --value llmfleet-vllm-probe")
    assert told == "-500"


def test_killed_server_comes_back_by_itself(api) -> None:
    before = inspect(api)["RestartCount"]
    seen = probe_state(api)
    heals = len(seen["heals"])
    # From the node: the container's PID 1 ignores SIGKILL sent from inside it.
    api.check_output("kill -9 %s", str(inspect(api)["State"]["Pid"]))
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        time.sleep(5)
        state = probe_state(api)
        # The probe saw this new start (its start differs) and it answered its warm-up.
        restarted = inspect(api)["RestartCount"] > before and state["start"] != seen["start"]
        if restarted and state["phase"] == "ready":
            break
    else:
        raise AssertionError("vLLM did not come back within 300 s of being killed")
    # The probe saw Docker start it again, recorded why (the node's history too, where the
    # play keeps one: the lab test reads it), and warmed the new start up before saying ready.
    state = probe_state(api)
    assert len(state["heals"]) == heals + 1, state
    assert state["last_heal"]["by"] == "supervisor"
    assert state["last_heal"]["reason"].startswith("vLLM exited and was started again")
    assert status(api, "/health") == 200
