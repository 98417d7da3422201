"""modules/llm_benchmark: against the fake OpenAI-compatible server, in-process and through
`ansible`. The server is ``FakeLlmServer`` of tests/unit/plugins/fake_llm_server.py."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.modules import llm_benchmark

from tests.unit.plugins.conftest import ansible_adhoc
from tests.unit.plugins.fake_llm_server import (
    API_KEY,
    FAIL_BODY,
    MODEL,
    FakeLlmServer,
    free_port,
)

RunModule = Callable[..., tuple[int, dict[str, Any]]]
StartServer = Callable[..., FakeLlmServer]

METRIC_KEYS = {
    "ok",
    "errors",
    "error_samples",
    "duration_s",
    "requests_per_s",
    "ttft_s",
    "tpot_s",
    "latency_s",
    "prompt_tokens",
    "prompt_tokens_per_request",
    "output_tokens",
    "output_tokens_per_s",
    "decode_tokens_per_s",
}
PLAN_KEYS = {
    "name", "kind", "warmup", "concurrency", "requests", "prompt_tokens_target", "max_tokens"
}  # fmt: skip
SCENARIOS = [
    {"name": "warmup", "warmup": True, "requests": 1, "prompt_tokens": 16, "max_tokens": 2},
    {"name": "c2", "concurrency": 2, "requests": 4, "prompt_tokens": 48, "max_tokens": 5},
]


def args(server: FakeLlmServer, **more: Any) -> dict[str, Any]:
    return {"url": server.url, "model": MODEL, "api_key": API_KEY, "scenarios": SCENARIOS, **more}


def test_runs_the_scenarios(
    fake_server: StartServer,
    run_module: RunModule,
    tmp_path: Path,
) -> None:
    server = fake_server(token_delay=0.005)
    progress = tmp_path / "progress.json"
    rc, result = run_module(llm_benchmark, args(server, progress_file=str(progress)))
    assert rc == 0, result
    assert result["changed"] is False
    # none of its own warnings (module warnings are process-wide: other tests' may linger)
    warnings = json.dumps(result.get("warnings", []))
    assert "requests failed" not in warnings
    assert "usage.prompt_tokens" not in warnings
    bench = result["benchmark"]
    assert set(bench) == {
        "url",
        "model",
        "api",
        "started",
        "finished",
        "ignore_eos",
        "tokens_per_word",
        "calibration",
        "scenarios",
    }
    assert (bench["url"], bench["model"], bench["api"]) == (server.url, MODEL, "openai-chat")
    assert bench["ignore_eos"] is True
    warmup, c2 = bench["scenarios"]
    assert set(c2) == PLAN_KEYS | METRIC_KEYS
    assert (warmup["name"], warmup["warmup"], warmup["concurrency"]) == ("warmup", True, 1)
    assert (c2["name"], c2["warmup"], c2["requests"], c2["max_tokens"]) == ("c2", False, 4, 5)
    assert (c2["ok"], c2["errors"], c2["output_tokens"]) == (4, 0, 20)
    assert c2["ttft_s"]["p50"] >= 0.045
    assert server.max_in_flight == 2
    assert re.fullmatch(
        r"warmup \(warm-up\): 1/1 ok, TTFT p50 \d+\.\d{3} s, \d+\.\d output tok/s; "
        r"c2: 4/4 ok, TTFT p50 \d+\.\d{3} s, \d+\.\d output tok/s",
        result["msg"],
    ), result["msg"]
    assert json.loads(progress.read_text())["done"] == 4
    # the key is never echoed back
    assert API_KEY not in json.dumps(result)


def test_check_mode_sends_nothing(
    fake_server: StartServer,
    run_module: RunModule,
) -> None:
    server = fake_server()
    rc, result = run_module(llm_benchmark, args(server, _ansible_check_mode=True))
    assert rc == 0, result
    assert result["changed"] is False
    assert server.headers == []
    assert result["msg"] == f"check mode: would send 5 requests in 2 scenarios to {server.url}"
    bench = result["benchmark"]
    assert (bench["started"], bench["finished"], bench["tokens_per_word"]) == (None, None, None)
    assert [set(s) for s in bench["scenarios"]] == [PLAN_KEYS, PLAN_KEYS]
    assert bench["scenarios"][1] == {
        "name": "c2",
        "kind": "requests",
        "warmup": False,
        "concurrency": 2,
        "requests": 4,
        "prompt_tokens_target": 48,
        "max_tokens": 5,
    }


def test_check_mode_still_validates(run_module: RunModule) -> None:
    rc, result = run_module(
        llm_benchmark,
        {
            "url": "localhost:8000",
            "model": MODEL,
            "scenarios": [{"name": "a", "requests": 0}],
            "_ansible_check_mode": True,
        },
    )
    assert rc == 1
    assert "url must be an http:// or https:// URL" in result["msg"]
    assert "scenario 'a': requests must be a positive integer, got 0" in result["msg"]


def test_scenario_defaults(
    fake_server: StartServer,
    run_module: RunModule,
) -> None:
    server = fake_server()
    rc, result = run_module(
        llm_benchmark,
        {**args(server), "scenarios": [{"name": "d", "requests": 1}], "_ansible_check_mode": True},
    )
    assert rc == 0, result
    assert result["benchmark"]["scenarios"] == [
        {
            "name": "d",
            "kind": "requests",
            "warmup": False,
            "concurrency": 1,
            "requests": 1,
            "prompt_tokens_target": 512,
            "max_tokens": 128,
        }
    ]


def test_api_key_from_the_environment(
    fake_server: StartServer,
    run_module: RunModule,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = fake_server(ttft=0.0, token_delay=0.0)
    monkeypatch.setenv("LLMFLEET_API_KEY", API_KEY)
    module_args = args(server)
    del module_args["api_key"]
    rc, result = run_module(llm_benchmark, module_args)
    assert rc == 0, result
    assert server.statuses == [200] * 6
    assert {h["authorization"] for h in server.headers} == {f"Bearer {API_KEY}"}


def test_wrong_key_fails_naming_the_url(
    fake_server: StartServer,
    run_module: RunModule,
) -> None:
    server = fake_server()
    rc, result = run_module(llm_benchmark, args(server, api_key="not-the-key"))
    assert rc == 1
    assert result["msg"] == (
        f"the calibration request to {server.url}/v1/chat/completions failed: "
        'HTTP 401: {"error": "Unauthorized"}'
    )
    assert server.statuses == [401]


def test_unreachable_server_fails_naming_the_url(run_module: RunModule) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    rc, result = run_module(
        llm_benchmark, {"url": url, "model": MODEL, "scenarios": [{"name": "a", "requests": 1}]}
    )
    assert rc == 1
    assert result["msg"].startswith(f"the calibration request to {url}/v1/chat/completions failed")
    assert "Connect call failed" in result["msg"] or "Connection refused" in result["msg"]
    assert result["url"] == url


@pytest.mark.parametrize(
    ("scenarios", "needle"),
    [
        ([{"name": "a", "requests": 1}, {"name": "a", "requests": 2}], "used more than once"),
        ([{"name": "a", "requests": 1, "concurrency": 0}], "concurrency must be a positive"),
        ([{"name": "a", "requests": 1, "max_tokens": -5}], "max_tokens must be a positive"),
        ([{"name": "a"}], "requests"),  # required by the argument spec
        ([{"name": "a", "requests": 1, "temperature": 1}], "temperature"),  # unknown option
        ([], "at least one scenario"),
    ],
)
def test_invalid_scenarios_fail(
    run_module: RunModule, scenarios: list[dict[str, Any]], needle: str
) -> None:
    rc, result = run_module(
        llm_benchmark, {"url": "http://127.0.0.1:1", "model": MODEL, "scenarios": scenarios}
    )
    assert rc == 1
    assert needle in result["msg"]


def test_missing_progress_directory_fails_before_sending(
    fake_server: StartServer,
    run_module: RunModule,
    tmp_path: Path,
) -> None:
    server = fake_server()
    missing = tmp_path / "absent" / "progress.json"
    rc, result = run_module(llm_benchmark, args(server, progress_file=str(missing)))
    assert rc == 1
    assert f"the directory {tmp_path / 'absent'} does not exist" in result["msg"]
    assert server.headers == []


def fail_max_tokens(max_tokens: int) -> Callable[[int, dict[str, Any]], bool]:
    return lambda _n, body: body["max_tokens"] == max_tokens


def test_errors_warn_without_fail_on_errors(
    fake_server: StartServer,
    run_module: RunModule,
) -> None:
    server = fake_server(fail_when=fail_max_tokens(5), ttft=0.0, token_delay=0.0)
    rc, result = run_module(llm_benchmark, args(server))
    assert rc == 0, result
    c2 = result["benchmark"]["scenarios"][1]
    assert (c2["ok"], c2["errors"]) == (0, 4)
    assert f"scenario c2: 4 of 4 requests failed: HTTP 500: {FAIL_BODY}" in json.dumps(
        result["warnings"]
    )


def test_fail_on_errors(
    fake_server: StartServer,
    run_module: RunModule,
) -> None:
    server = fake_server(fail_when=fail_max_tokens(5), ttft=0.0, token_delay=0.0)
    rc, result = run_module(llm_benchmark, args(server, fail_on_errors=True))
    assert rc == 1
    assert result["msg"] == f"4 of 4 requests failed in c2: HTTP 500: {FAIL_BODY}"
    assert result["errors"] == 4
    assert result["error_samples"] == [f"HTTP 500: {FAIL_BODY}"]
    # the benchmark comes back with the failure
    assert [s["errors"] for s in result["benchmark"]["scenarios"]] == [0, 4]


def test_warmup_errors_do_not_fail(
    fake_server: StartServer,
    run_module: RunModule,
) -> None:
    server = fake_server(fail_when=fail_max_tokens(2), ttft=0.0, token_delay=0.0)
    rc, result = run_module(llm_benchmark, args(server, fail_on_errors=True))
    assert rc == 0, result
    warmup, c2 = result["benchmark"]["scenarios"]
    assert (warmup["errors"], c2["errors"]) == (1, 0)
    assert "scenario warmup: 1 of 1 requests failed" in json.dumps(result["warnings"])


def test_end_to_end_through_ansible(fake_server: StartServer) -> None:
    server = fake_server(ttft=0.02, token_delay=0.002)
    module_args = {
        "url": server.url,
        "model": MODEL,
        "scenarios": [{"name": "c2", "concurrency": 2, "requests": 4, "max_tokens": 3}],
    }
    status, result = ansible_adhoc(
        "llmfleet.cluster.llm_benchmark",
        json.dumps(module_args),
        env={"LLMFLEET_API_KEY": API_KEY},
    )
    assert status == "SUCCESS", result
    assert result["changed"] is False
    (c2,) = result["benchmark"]["scenarios"]
    assert (c2["ok"], c2["output_tokens"]) == (4, 12)
    assert c2["ttft_s"]["min"] >= 0.015
    assert server.max_in_flight == 2
