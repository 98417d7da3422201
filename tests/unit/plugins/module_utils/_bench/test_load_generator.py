"""module_utils/_bench/load_generator: scenarios, the plan, progress, and the engine against
the fake server (tests/unit/plugins/fake_llm_server.py).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench import (
    load_generator as _load_generator,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._http import (
    chat_client as _chat_client,
)

from tests.unit.plugins.fake_llm_server import API_KEY, FAIL_BODY, MODEL, FakeLlmServer, free_port

# Words of the calibration prompt: its nonce, 500 filler words, "Continue the text."
CALIBRATION_PROMPT_WORDS = 1 + _load_generator.CALIBRATION_WORDS + 3


def scenario(name: str = "s", **values: Any) -> dict[str, Any]:
    base = {
        "name": name,
        "concurrency": 1,
        "requests": 2,
        "prompt_tokens": 32,
        "max_tokens": 4,
        "warmup": False,
    }
    base.update(values)
    return base


def test_validate_scenarios() -> None:
    assert _load_generator.validate_scenarios([scenario("a"), scenario("b")]) == []
    assert _load_generator.validate_scenarios([]) == ["scenarios must list at least one scenario"]
    problems = _load_generator.validate_scenarios(
        [
            scenario("a", concurrency=0),
            scenario("a"),
            scenario("", requests=-1),
            scenario("c", max_tokens=True, prompt_tokens=None),
        ]
    )
    assert problems == [
        "scenario 'a': concurrency must be a positive integer, got 0",
        "scenario name 'a' is used more than once",
        "scenario 3 has no name",
        "scenario 3: requests must be a positive integer, got -1",
        "scenario 'c': prompt_tokens must be a positive integer, got None",
        "scenario 'c': max_tokens must be a positive integer, got True",
    ]


def test_write_progress_replaces_the_file(tmp_path: Path) -> None:
    path = tmp_path / "progress.json"
    _load_generator.write_progress(str(path), {"done": 1})
    _load_generator.write_progress(str(path), {"done": 2})
    assert json.loads(path.read_text()) == {"done": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["progress.json"]


def test_plan_has_no_metrics() -> None:
    result = _load_generator.plan("http://h:1", "m", [scenario("a", warmup=True)], ignore_eos=False)
    assert result == {
        "url": "http://h:1",
        "model": "m",
        "api": "openai-chat",
        "started": None,
        "finished": None,
        "ignore_eos": False,
        "tokens_per_word": None,
        "calibration": None,
        "scenarios": [
            {
                "name": "a",
                "kind": "requests",
                "warmup": True,
                "concurrency": 1,
                "requests": 2,
                "prompt_tokens_target": 32,
                "max_tokens": 4,
            }
        ],
    }


# ---------------------------------------------------------------------------
# the engine against the fake server
# ---------------------------------------------------------------------------
def test_benchmark_end_to_end(fake_server: Callable[..., FakeLlmServer], tmp_path: Path) -> None:
    server = fake_server()
    progress = tmp_path / "progress.json"
    result = _load_generator.run_benchmark(
        server.url,
        MODEL,
        [
            scenario("warmup", warmup=True, requests=2, max_tokens=2),
            scenario("c3", concurrency=3, requests=9, prompt_tokens=64, max_tokens=8),
        ],
        api_key=API_KEY,
        progress_file=str(progress),
        seed=5,
    )
    assert result["url"] == server.url
    assert result["model"] == MODEL
    assert result["api"] == "openai-chat"
    assert result["ignore_eos"] is True
    assert result["started"].endswith("Z")
    assert result["finished"] >= result["started"]
    assert result["calibration"] == {
        "words": _load_generator.CALIBRATION_WORDS,
        "prompt_tokens": CALIBRATION_PROMPT_WORDS,
    }
    assert result["tokens_per_word"] == round(
        CALIBRATION_PROMPT_WORDS / _load_generator.CALIBRATION_WORDS, 4
    )
    warmup, main = result["scenarios"]
    assert warmup["warmup"] is True
    assert (warmup["ok"], warmup["output_tokens"]) == (2, 4)
    assert main["warmup"] is False
    assert (main["concurrency"], main["requests"], main["max_tokens"]) == (3, 9, 8)
    assert main["prompt_tokens_target"] == 64
    assert (main["ok"], main["errors"], main["error_samples"]) == (9, 0, [])
    # ignore_eos: every request made exactly max_tokens
    assert main["output_tokens"] == 9 * 8
    # the prompt the server counted is close to the target (the nonce and suffix add 4 words)
    assert main["prompt_tokens_per_request"] == pytest.approx(64, abs=6)
    assert main["prompt_tokens"] == pytest.approx(9 * main["prompt_tokens_per_request"])
    # The server sleeps 50 ms before the first token (sent with the role chunk), then 10 ms
    # before each of the 7 others. The lower bounds on TTFT,
    # latency and duration follow from those sleeps; the others leave room for a busy
    # 2-core machine.
    ttft, tpot, latency = main["ttft_s"], main["tpot_s"], main["latency_s"]
    assert 0.0499 <= ttft["min"] <= ttft["p50"] <= ttft["p90"] <= ttft["max"] < 1.0
    assert ttft["p50"] < 0.5
    assert 0.008 <= tpot["p50"] < 0.1
    assert latency["min"] >= 0.1199
    assert latency["mean"] - ttft["mean"] >= 0.05
    assert 5 < main["decode_tokens_per_s"] <= 150
    # three rounds of three requests, each at least 120 ms
    assert 0.3599 <= main["duration_s"] < 5.0
    assert main["output_tokens_per_s"] == pytest.approx(72 / main["duration_s"], rel=1e-3)
    assert main["requests_per_s"] == pytest.approx(9 / main["duration_s"], rel=1e-3)
    # concurrency was bounded, and reached
    assert server.max_in_flight == 3
    # what was sent: calibration + 2 + 9 requests, every prompt unique, nonce first
    assert len(server.bodies) == 12
    prompts = [b["messages"][0]["content"] for b in server.bodies]
    assert len({p.split()[0] for p in prompts}) == 12
    calibration, *counted = server.bodies
    assert calibration["max_tokens"] == 1
    assert len(calibration["messages"][0]["content"].split()) == CALIBRATION_PROMPT_WORDS
    for body in counted:
        assert body["model"] == MODEL
        assert body["stream"] is True
        assert body["stream_options"] == {"include_usage": True}
        assert body["ignore_eos"] is True
        assert body["temperature"] == 0
    assert all(h["authorization"] == f"Bearer {API_KEY}" for h in server.headers)
    assert all(h["connection"] == "close" for h in server.headers)
    # the progress file after the last request
    final = json.loads(progress.read_text())
    elapsed = final.pop("elapsed_s")
    assert final == {
        "scenario": "c3",
        "scenario_index": 2,
        "scenarios": 2,
        "done": 9,
        "requests": 9,
        "errors": 0,
    }
    assert 0 < elapsed <= main["duration_s"] + 0.01


def test_progress_after_every_request(
    fake_server: Callable[..., FakeLlmServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = fake_server(ttft=0.0, token_delay=0.0)
    written: list[dict[str, Any]] = []
    monkeypatch.setattr(_load_generator, "write_progress", lambda _path, data: written.append(data))
    _load_generator.run_benchmark(
        server.url,
        MODEL,
        [scenario("a", requests=2), scenario("b", concurrency=2, requests=3)],
        api_key=API_KEY,
        progress_file="/unused",
    )
    assert [(p["scenario"], p["scenario_index"], p["done"]) for p in written] == [
        ("a", 1, 0),
        ("a", 1, 1),
        ("a", 1, 2),
        ("b", 2, 0),
        ("b", 2, 1),
        ("b", 2, 2),
        ("b", 2, 3),
    ]
    assert {(p["scenarios"], p["errors"]) for p in written} == {(2, 0)}
    assert [p["requests"] for p in written] == [2, 2, 2, 3, 3, 3, 3]


@pytest.mark.parametrize("framing", ["chunked", "length", "eof"])
def test_every_body_framing(fake_server: Callable[..., FakeLlmServer], framing: str) -> None:
    server = fake_server(framing=framing, ttft=0.01, token_delay=0.0)
    result = _load_generator.run_benchmark(
        server.url, MODEL, [scenario(max_tokens=5)], api_key=API_KEY, seed=1
    )
    (only,) = result["scenarios"]
    assert (only["ok"], only["errors"], only["output_tokens"]) == (2, 0, 10)
    assert only["ttft_s"]["min"] >= 0.009


def test_without_usage_counts_chunks(fake_server: Callable[..., FakeLlmServer]) -> None:
    server = fake_server(usage=False, ttft=0.0, token_delay=0.0)
    result = _load_generator.run_benchmark(
        server.url, MODEL, [scenario(max_tokens=6)], api_key=API_KEY
    )
    assert result["calibration"] == {"words": 500, "prompt_tokens": None}
    assert result["tokens_per_word"] == _load_generator.DEFAULT_TOKENS_PER_WORD
    (only,) = result["scenarios"]
    assert (only["ok"], only["output_tokens"], only["prompt_tokens"]) == (2, 12, 0)
    assert only["prompt_tokens_per_request"] is None
    # 32 tokens at the assumed 1.2 tokens per word: 27 filler words
    assert len(server.bodies[1]["messages"][0]["content"].split()) == 1 + 27 + 3


def test_without_ignore_eos_the_model_stops(fake_server: Callable[..., FakeLlmServer]) -> None:
    server = fake_server(eos_after=3, ttft=0.0, token_delay=0.0)
    result = _load_generator.run_benchmark(
        server.url, MODEL, [scenario(max_tokens=20)], api_key=API_KEY, ignore_eos=False
    )
    assert result["ignore_eos"] is False
    assert result["scenarios"][0]["output_tokens"] == 2 * 3
    assert all("ignore_eos" not in body for body in server.bodies)


def test_server_errors_are_counted(fake_server: Callable[..., FakeLlmServer]) -> None:
    # requests are numbered on arrival: the calibration is 1, then every third fails
    server = fake_server(fail_when=lambda n, _body: n % 3 == 0, ttft=0.0, token_delay=0.001)
    result = _load_generator.run_benchmark(
        server.url, MODEL, [scenario(concurrency=4, requests=8)], api_key=API_KEY
    )
    (only,) = result["scenarios"]
    assert (only["ok"], only["errors"]) == (5, 3)
    assert only["error_samples"] == [f"HTTP 500: {FAIL_BODY}"]
    assert only["output_tokens"] == 5 * 4
    assert server.statuses.count(500) == 3


def test_wrong_key_is_counted_as_errors(fake_server: Callable[..., FakeLlmServer]) -> None:
    server = fake_server()
    client = _chat_client.Client(server.url, MODEL, api_key="wrong", timeout=5)
    result = asyncio.run(
        _load_generator.run_scenario(client, scenario(concurrency=2, requests=4), 1.0, "run1")
    )
    assert (result["ok"], result["errors"]) == (0, 4)
    assert result["error_samples"] == ['HTTP 401: {"error": "Unauthorized"}']
    assert result["ttft_s"]["p50"] is None
    assert server.statuses == [401] * 4


@pytest.mark.parametrize(
    ("framing", "message"),
    [
        ("chunked", "ConnectionError: connection closed inside a chunked body"),
        ("eof", "the stream ended before [DONE]"),
    ],
)
def test_cut_streams_are_errors(
    fake_server: Callable[..., FakeLlmServer], framing: str, message: str
) -> None:
    server = fake_server(cut_after=2, framing=framing, ttft=0.0, token_delay=0.0)
    client = _chat_client.Client(server.url, MODEL, api_key=API_KEY, timeout=5)
    result = asyncio.run(_load_generator.run_scenario(client, scenario(requests=2), 1.0, "run1"))
    assert (result["ok"], result["errors"]) == (0, 2)
    assert result["error_samples"] == [message]
    assert result["output_tokens"] == 0


def test_timeouts_are_errors(fake_server: Callable[..., FakeLlmServer]) -> None:
    server = fake_server(ttft=5.0)
    client = _chat_client.Client(server.url, MODEL, api_key=API_KEY, timeout=0.1)
    result = asyncio.run(
        _load_generator.run_scenario(client, scenario(concurrency=2, requests=2), 1.0, "run1")
    )
    assert (result["ok"], result["errors"]) == (0, 2)
    assert result["error_samples"] == ["timed out after 0.1 s"]
    # The server would take 5 s to the first token: the run ends at the client's timeout, not
    # the server's answer (a wide margin, the test runs beside lab work on 2 cores).
    assert 0.1 <= result["duration_s"] < 2.5


@pytest.fixture
def self_signed(tmp_path: Path) -> ssl.SSLContext:
    """A server context with a self-signed certificate for 127.0.0.1."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("needs the openssl command to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=llmfleet-test",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


def test_https(fake_server: Callable[..., FakeLlmServer], self_signed: ssl.SSLContext) -> None:
    server = fake_server(tls=self_signed, ttft=0.0, token_delay=0.0)
    assert server.url.startswith("https://")
    # a self-signed certificate is refused unless validate_certs is off
    with pytest.raises(_load_generator.BenchError, match="CERTIFICATE_VERIFY_FAILED"):
        _load_generator.run_benchmark(server.url, MODEL, [scenario()], api_key=API_KEY)
    result = _load_generator.run_benchmark(
        server.url, MODEL, [scenario()], api_key=API_KEY, validate_certs=False
    )
    assert (result["scenarios"][0]["ok"], result["scenarios"][0]["output_tokens"]) == (2, 8)
    assert server.headers[-1]["host"] == f"127.0.0.1:{server.port}"


def test_unreachable_server_fails_the_calibration() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(_load_generator.BenchError) as info:
        _load_generator.run_benchmark(url, MODEL, [scenario()])
    message = str(info.value)
    assert f"{url}/v1/chat/completions" in message
    assert "ConnectionRefusedError" in message
    assert info.value.url == url


def test_refused_key_fails_the_calibration(fake_server: Callable[..., FakeLlmServer]) -> None:
    server = fake_server()
    with pytest.raises(_load_generator.BenchError, match=r"failed: HTTP 401: .*Unauthorized"):
        _load_generator.run_benchmark(server.url, MODEL, [scenario()], api_key="wrong")
    assert server.statuses == [401]


def test_invalid_input_is_refused_before_sending() -> None:
    with pytest.raises(_load_generator.BenchError) as info:
        _load_generator.run_benchmark(
            "ftp://x", MODEL, [scenario("a"), scenario("a")], request_timeout=0
        )
    message = str(info.value)
    assert message.startswith("url must be an http:// or https:// URL")
    assert "scenario name 'a' is used more than once" in message
    assert "request_timeout must be a positive number of seconds, got 0" in message


def finished(name: str, errors: int, samples: list[str], warmup: bool = False) -> dict[str, Any]:
    return {
        "name": name,
        "warmup": warmup,
        "requests": 4,
        "errors": errors,
        "error_samples": samples,
    }


def test_errors_failure_counts_measured_scenarios_only() -> None:
    benchmark = {
        "scenarios": [
            finished("warmup", 2, ["HTTP 500: a"], warmup=True),
            finished("c1", 0, []),
            finished("c4", 1, ["HTTP 500: a"]),
            finished("c8", 2, ["HTTP 500: a", "timed out after 5 s"]),
        ]
    }
    assert _load_generator.errors_failure(benchmark) == {
        "msg": "3 of 8 requests failed in c4, c8: HTTP 500: a | timed out after 5 s",
        "errors": 3,
        "error_samples": ["HTTP 500: a", "timed out after 5 s"],
    }
    assert _load_generator.errors_failure({"scenarios": [finished("w", 1, ["x"], True)]}) is None


def test_run_warnings_name_the_guess_and_every_scenario_with_errors() -> None:
    benchmark = {
        "calibration": {"words": 500, "prompt_tokens": None},
        "tokens_per_word": 1.2,
        "scenarios": [finished("c1", 0, []), finished("c4", 1, ["HTTP 500: a"])],
    }
    assert _load_generator.run_warnings(benchmark) == [
        "the server reported no usage.prompt_tokens; prompts were sized with an assumed "
        "1.2 tokens per word",
        "scenario c4: 1 of 4 requests failed: HTTP 500: a",
    ]
    benchmark["calibration"]["prompt_tokens"] = 600
    benchmark["scenarios"] = [finished("c1", 0, [])]
    assert _load_generator.run_warnings(benchmark) == []
