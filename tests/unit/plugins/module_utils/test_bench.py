"""module_utils/_bench: the pure helpers, and the engine against a real fake server.

``FakeLlmServer`` is shared with tests/unit/plugins/modules/test_llm_benchmark.py: an
asyncio HTTP/1.1 server on 127.0.0.1 (port 0) in its own thread that answers
``POST /v1/chat/completions`` the way vLLM does - after ``ttft`` seconds a role chunk with
empty content and the first token, then one chunk per token every ``token_delay`` seconds,
``finish_reason`` on the last, a usage chunk with empty ``choices`` (prompt tokens =
words of the messages), ``data: [DONE]`` - chunked (each SSE event split in two HTTP
chunks in the middle of its line), with Content-Length, or to EOF. It answers 401
without the right bearer key, 500 when ``fail_when`` says so, closes the connection
after ``cut_after`` tokens, and counts the most requests it had in flight at once.
With ``tls`` (an SSLContext) it speaks https.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils import _bench

MODEL = "fake-model"
API_KEY = "test-key-1234"
FAIL_BODY = "internal error: the fake engine failed"
# Words of the calibration prompt: its nonce, 500 filler words, "Continue the text."
CALIBRATION_PROMPT_WORDS = 1 + _bench.CALIBRATION_WORDS + 3


class FakeLlmServer:
    def __init__(
        self,
        *,
        api_key: str | None = API_KEY,
        ttft: float = 0.05,
        token_delay: float = 0.01,
        framing: str = "chunked",
        usage: bool = True,
        eos_after: int = 3,
        fail_when: Callable[[int, dict[str, Any]], bool] | None = None,
        cut_after: int | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.api_key = api_key
        self.ttft = ttft
        self.token_delay = token_delay
        self.framing = framing
        self.usage = usage
        self.eos_after = eos_after
        self.fail_when = fail_when
        self.cut_after = cut_after
        self.tls = tls
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.statuses: list[int] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.AbstractServer | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def start(self) -> FakeLlmServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(5)
        return self

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        assert self._server is not None
        self._server.close()
        # answers still running (a client that timed out does not wait for them)
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            request_line, *lines = head.decode("latin-1").split("\r\n")
            method, path, _version = request_line.split(" ")
            headers = {}
            for line in lines:
                if line:
                    name, _colon, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            self.headers.append(headers)
            if method != "POST" or path != "/v1/chat/completions":
                await self._plain(writer, 404, '{"error": "not found"}')
                return
            if self.api_key and headers.get("authorization") != f"Bearer {self.api_key}":
                await self._plain(writer, 401, '{"error": "Unauthorized"}')
                return
            payload = json.loads(body)
            self.bodies.append(payload)
            if self.fail_when and self.fail_when(len(self.bodies), payload):
                await self._chunked_error(writer)
                return
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                await self._stream(writer, payload)
            finally:
                self.in_flight -= 1
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            writer.close()

    async def _plain(self, writer: asyncio.StreamWriter, status: int, text: str) -> None:
        self.statuses.append(status)
        data = text.encode()
        writer.write(
            f"HTTP/1.1 {status} Nope\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
            + data
        )
        await writer.drain()

    async def _chunked_error(self, writer: asyncio.StreamWriter) -> None:
        self.statuses.append(500)
        data = FAIL_BODY.encode()
        writer.write(
            b"HTTP/1.1 500 Internal Server Error\r\nTransfer-Encoding: chunked\r\n\r\n"
            + f"{10:x}\r\n".encode()
            + data[:10]
            + f"\r\n{len(data) - 10:x}\r\n".encode()
            + data[10:]
            + b"\r\n0\r\n\r\n"
        )
        await writer.drain()

    async def _stream(self, writer: asyncio.StreamWriter, payload: dict[str, Any]) -> None:
        self.statuses.append(200)
        max_tokens = payload["max_tokens"]
        count = max_tokens if payload.get("ignore_eos") else min(max_tokens, self.eos_after)
        prompt_tokens = sum(len(m["content"].split()) for m in payload["messages"])
        framing_header = {
            "chunked": "Transfer-Encoding: chunked\r\n",
            "length": "",
            "eof": "",
        }[self.framing]
        events: list[bytes] = []

        async def send(data: str) -> None:
            event = f"data: {data}\n\n".encode()
            if self.framing == "length":
                events.append(event)
                return
            if self.framing == "chunked":
                half = len(event) // 2
                for piece in (event[:half], event[half:]):
                    writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                    await writer.drain()
            else:
                writer.write(event)
            await writer.drain()

        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            return json.dumps({"id": "x", "model": MODEL, "choices": [choice]})

        if self.framing != "length":
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                + framing_header.encode()
                + b"Connection: close\r\n\r\n"
            )
        await asyncio.sleep(self.ttft)
        await send(chunk({"role": "assistant", "content": ""}))
        for i in range(count):
            if i == self.cut_after:
                return  # the engine died: the connection closes in the middle of the stream
            if i:
                await asyncio.sleep(self.token_delay)
            finish = ("length" if payload.get("ignore_eos") else "stop") if i == count - 1 else None
            await send(chunk({"content": f"tok{i} "}, finish))
        if self.usage and payload.get("stream_options", {}).get("include_usage"):
            usage = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": count,
                "total_tokens": prompt_tokens + count,
            }
            await send(json.dumps({"id": "x", "choices": [], "usage": usage}))
        await send("[DONE]")
        if self.framing == "chunked":
            writer.write(b"0\r\n\r\n")
        elif self.framing == "length":
            data = b"".join(events)
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                + f"Content-Length: {len(data)}\r\n\r\n".encode()
                + data
            )
        await writer.drain()


def fake_servers() -> Iterator[Callable[..., FakeLlmServer]]:
    """The body of a ``fake_server`` fixture: it starts fake servers (any settings),
    all stopped after the test."""
    servers: list[FakeLlmServer] = []

    def start(**settings: Any) -> FakeLlmServer:
        server = FakeLlmServer(**settings).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def fake_server() -> Iterator[Callable[..., FakeLlmServer]]:
    yield from fake_servers()


def free_port() -> int:
    """A port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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


# ---------------------------------------------------------------------------
# percentiles and metrics
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([1.0, 2.0, 3.0, 4.0], 50, 2.5),
        ([1.0, 2.0, 3.0, 4.0], 90, 3.7),  # rank 2.7: 3 + 0.7 * (4 - 3)
        ([1.0, 2.0, 3.0, 4.0], 99, 3.97),
        ([4.0, 1.0, 3.0, 2.0], 90, 3.7),  # order does not matter
        ([10.0, 20.0], 90, 19.0),
        ([10.0, 20.0], 0, 10.0),
        ([10.0, 20.0], 100, 20.0),
        ([7.0], 99, 7.0),
        ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 110.0], 90, 10.0),
        ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 110.0], 99, 100.0),
        ([0.1, 0.2, 0.3], 50, 0.2),
    ],
)
def test_percentile_interpolates_linearly(values: list[float], q: float, expected: float) -> None:
    assert _bench.percentile(values, q) == pytest.approx(expected)


def test_percentile_of_nothing_is_none() -> None:
    assert _bench.percentile([], 50) is None
    with pytest.raises(ValueError, match="between 0 and 100"):
        _bench.percentile([1.0], 101)


def test_summarize() -> None:
    assert _bench.summarize([0.3, 0.1, 0.2, 0.4]) == {
        "mean": 0.25,
        "p50": 0.25,
        "p90": 0.37,
        "p99": 0.397,
        "min": 0.1,
        "max": 0.4,
    }
    assert _bench.summarize([]) == dict.fromkeys(("mean", "p50", "p90", "p99", "min", "max"))


def record(
    start: float = 0.0,
    first: float | None = 0.1,
    end: float = 1.0,
    out: int = 10,
    prompt: int | None = 100,
    error: str | None = None,
) -> dict[str, Any]:
    return {
        "ok": error is None,
        "error": error,
        "status": 200 if error is None else 500,
        "start": start,
        "first": first,
        "end": end,
        "output_tokens": out,
        "prompt_tokens": prompt,
        "chunks": out,
    }


def test_metrics_over_synthetic_records() -> None:
    records = [
        record(start=0.0, first=0.1, end=1.0, out=10),  # tpot 0.1, 9 tokens in 0.9 s
        record(start=0.5, first=0.8, end=2.8, out=11),  # tpot 0.2, 10 tokens in 2.0 s
        record(start=1.0, first=None, end=1.5, error="HTTP 500: boom"),
    ]
    metrics = _bench.scenario_metrics(records, 4.0)
    assert metrics["ok"] == 2
    assert metrics["errors"] == 1
    assert metrics["error_samples"] == ["HTTP 500: boom"]
    assert metrics["duration_s"] == 4.0
    assert metrics["requests_per_s"] == 0.5
    assert metrics["ttft_s"] == {
        "mean": 0.2,
        "p50": 0.2,
        "p90": 0.28,
        "p99": 0.298,
        "min": 0.1,
        "max": 0.3,
    }
    assert metrics["latency_s"]["mean"] == pytest.approx(1.65)
    assert metrics["latency_s"]["p90"] == pytest.approx(1.0 + 0.9 * 1.3)
    assert metrics["tpot_s"]["min"] == pytest.approx(0.1)
    assert metrics["tpot_s"]["max"] == pytest.approx(0.2)
    assert metrics["tpot_s"]["mean"] == pytest.approx(0.15)
    assert metrics["prompt_tokens"] == 200
    assert metrics["prompt_tokens_per_request"] == 100.0
    assert metrics["output_tokens"] == 21
    assert metrics["output_tokens_per_s"] == 5.25
    assert metrics["decode_tokens_per_s"] == pytest.approx(19 / 2.9, abs=1e-4)


def test_a_burst_of_tokens_does_not_make_an_endless_decode_rate() -> None:
    """A request whose 15 tokens after the first arrived 1 ms apart (a busy server flushing
    late) weighs by its time next to one that decoded 15 tokens in 1.5 s."""
    records = [
        record(start=0.0, first=1.0, end=1.001, out=16),
        record(start=0.0, first=0.1, end=1.6, out=16),
    ]
    metrics = _bench.scenario_metrics(records, 1.6)
    assert metrics["decode_tokens_per_s"] == pytest.approx(30 / 1.501, abs=1e-3)


def test_metrics_when_every_request_failed() -> None:
    records = [record(error=f"HTTP 50{i % 3}: down") for i in range(9)]
    records.append(record(error="timed out after 5 s"))
    records += [record(error=f"other {i}") for i in range(5)]
    metrics = _bench.scenario_metrics(records, 2.0)
    assert (metrics["ok"], metrics["errors"]) == (0, 15)
    # distinct, in order of appearance, at most 5
    assert metrics["error_samples"] == [
        "HTTP 500: down",
        "HTTP 501: down",
        "HTTP 502: down",
        "timed out after 5 s",
        "other 0",
    ]
    for key in ("ttft_s", "tpot_s", "latency_s"):
        assert metrics[key] == dict.fromkeys(("mean", "p50", "p90", "p99", "min", "max"))
    assert metrics["output_tokens"] == 0
    assert metrics["prompt_tokens"] == 0
    assert metrics["prompt_tokens_per_request"] is None
    assert metrics["requests_per_s"] == 0.0
    assert metrics["output_tokens_per_s"] == 0.0
    assert metrics["decode_tokens_per_s"] is None


def test_metrics_with_one_token_outputs() -> None:
    records = [record(first=0.2, end=0.2, out=1), record(start=1, first=1.4, end=1.4, out=1)]
    metrics = _bench.scenario_metrics(records, 1.6)
    assert metrics["ok"] == 2
    assert metrics["ttft_s"]["mean"] == pytest.approx(0.3)
    assert metrics["output_tokens"] == 2
    assert metrics["output_tokens_per_s"] == 1.25
    # nothing after the first token: no time per output token, no decode speed
    assert metrics["tpot_s"]["mean"] is None
    assert metrics["decode_tokens_per_s"] is None


def test_metrics_without_duration_have_no_rates() -> None:
    metrics = _bench.scenario_metrics([record()], 0.0)
    assert metrics["requests_per_s"] is None
    assert metrics["output_tokens_per_s"] is None


def test_metrics_without_usage_have_no_prompt_count() -> None:
    metrics = _bench.scenario_metrics([record(prompt=None), record(prompt=None)], 1.0)
    assert metrics["prompt_tokens"] == 0
    assert metrics["prompt_tokens_per_request"] is None


# ---------------------------------------------------------------------------
# SSE, chunked bodies, response heads
# ---------------------------------------------------------------------------
SSE_EVENTS = [
    '{"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}',
    '{"choices": [{"index": 0, "delta": {"content": "héllo wörld ✓"}}]}',
    "line one\nline two",
    '{"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 2}}',
    "[DONE]",
]


def sse_bytes(newline: str) -> bytes:
    parts = [f": keep-alive comment{newline}", f"event: message{newline}id: 1{newline}"]
    for event in SSE_EVENTS:
        for line in event.split("\n"):
            parts.append(f"data: {line}{newline}")
        parts.append(newline)
    parts.append(f"retry: 100{newline}{newline}")
    return "".join(parts).encode("utf-8")


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_sse_parser_at_every_split(newline: str) -> None:
    data = sse_bytes(newline)
    for cut in range(len(data) + 1):
        parser = _bench.SseParser()
        events = parser.feed(data[:cut]) + parser.feed(data[cut:]) + parser.close()
        assert events == SSE_EVENTS, f"cut at byte {cut}"


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_sse_parser_byte_by_byte(newline: str) -> None:
    parser = _bench.SseParser()
    events: list[str] = []
    for byte in sse_bytes(newline):
        events += parser.feed(bytes([byte]))
    assert events == SSE_EVENTS
    assert parser.close() == []


def test_sse_parser_last_event_without_blank_line() -> None:
    parser = _bench.SseParser()
    assert parser.feed(b'data: {"a": 1}\n\ndata:[DONE]') == ['{"a": 1}']
    # "data:" without the space, and the body ending right after the line
    assert parser.close() == ["[DONE]"]


def chunked(payload: bytes, sizes: list[int]) -> bytes:
    out = b""
    rest = payload
    for n, size in enumerate(sizes):
        piece, rest = rest[:size], rest[size:]
        ext = ";name=value" if n % 2 else ""
        out += f"{len(piece):X}{ext}\r\n".encode() + piece + b"\r\n"
    if rest:
        out += f"{len(rest):x}\r\n".encode() + rest + b"\r\n"
    return out + b"0\r\nX-Trailer: yes\r\n\r\n"


PAYLOAD = b"data: " + json.dumps({"content": "x" * 40}).encode() + b"\n\n" + b"data: [DONE]\n\n"


@pytest.mark.parametrize("sizes", [[], [1], [5, 17, 3], [len(PAYLOAD)], [26, 0]])
def test_chunked_decoder_at_every_split(sizes: list[int]) -> None:
    data = chunked(PAYLOAD, [s for s in sizes if s])
    for cut in range(len(data) + 1):
        decoder = _bench.ChunkedDecoder()
        out = decoder.feed(data[:cut])
        assert not decoder.done or cut == len(data)
        out += decoder.feed(data[cut:])
        assert decoder.done, f"cut at byte {cut}"
        assert out == PAYLOAD, f"cut at byte {cut}"


def test_chunked_decoder_stops_at_the_last_chunk() -> None:
    decoder = _bench.ChunkedDecoder()
    assert decoder.feed(b"3\r\nabc\r\n0\r\n\r\nHTTP/1.1 200 OK") == b"abc"
    assert decoder.done


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"zz\r\nabc\r\n", "bad chunk size"),
        (b"-3\r\nabc\r\n", "bad chunk size"),
        (b"2\r\nabc\r\n", "longer than its size"),
    ],
)
def test_chunked_decoder_refuses_malformed_input(data: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _bench.ChunkedDecoder().feed(data)


def test_parse_head() -> None:
    status, reason, headers = _bench.parse_head(
        b"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n"
        b"Set-Cookie: a=1\r\nset-cookie: b=2\r\n\r\n"
    )
    assert (status, reason) == (401, "Unauthorized")
    assert headers == {"content-type": "application/json", "set-cookie": "a=1, b=2"}
    with pytest.raises(ValueError, match="not an HTTP response"):
        _bench.parse_head(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")


def test_build_request() -> None:
    endpoint = _bench.parse_url("https://llm.example:8443/prefix/v1/")
    data = _bench.build_request(endpoint, "/v1/chat/completions", b'{"a":1}', "k3y")
    head, _blank_line, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /prefix/v1/chat/completions HTTP/1.1"
    assert "Host: llm.example:8443" in lines
    assert "Content-Length: 7" in lines
    assert "Connection: close" in lines
    assert "Authorization: Bearer k3y" in lines
    assert body == b'{"a":1}'
    assert b"Authorization" not in _bench.build_request(endpoint, "/x", b"", None)


def stream_record(events: list[str]) -> dict[str, Any]:
    state = _bench.StreamState()
    for now, data in enumerate(events, start=1):
        state.on_data(data, float(now))
    rec: dict[str, Any] = {}
    state.finish(rec)
    return rec


def content(text: str, key: str = "content", finish: str | None = None) -> str:
    return json.dumps({"choices": [{"index": 0, "delta": {key: text}, "finish_reason": finish}]})


USAGE = json.dumps({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 9}})


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        # the first chunk with a choice is the first token (vLLM sends the role chunk with
        # it, as `vllm bench serve` counts it); usage wins over the chunk count
        (
            [content(""), content("a"), content("b"), USAGE, "[DONE]"],
            {"ok": True, "first": 1.0, "chunks": 2, "output_tokens": 9, "prompt_tokens": 12},
        ),
        # reasoning models: reasoning_content (older vLLM) or reasoning (newer) is a token
        (
            [content("", "reasoning_content"), content("hm", "reasoning_content"), "[DONE]"],
            {"ok": True, "first": 1.0, "chunks": 1, "output_tokens": 1, "prompt_tokens": None},
        ),
        # a usage chunk (no choices) is not a token
        (
            [USAGE, content("a"), "[DONE]"],
            {"ok": True, "first": 2.0, "chunks": 1, "output_tokens": 9, "prompt_tokens": 12},
        ),
        (
            [content("hm", "reasoning"), content("x"), "[DONE]"],
            {"ok": True, "first": 1.0, "chunks": 2, "output_tokens": 2, "prompt_tokens": None},
        ),
        # no [DONE] but a finish_reason: complete
        (
            [content("a"), content("b", finish="stop")],
            {"ok": True, "first": 1.0, "chunks": 2, "output_tokens": 2},
        ),
        # cut off: neither [DONE], nor finish_reason, nor usage
        (
            [content("a"), content("b")],
            {"ok": False, "error": "the stream ended before [DONE]", "output_tokens": 2},
        ),
        (
            [content("a"), '{"error": {"message": "CUDA out of memory", "code": 500}}'],
            {"ok": False, "error": "error in the stream: CUDA out of memory"},
        ),
        (["{not json"], {"ok": False, "error": "invalid JSON in the stream: {not json"}),
    ],
)
def test_stream_state(events: list[str], expected: dict[str, Any]) -> None:
    rec = stream_record(events)
    for key, value in expected.items():
        assert rec[key] == value, key


# ---------------------------------------------------------------------------
# prompts and requests
# ---------------------------------------------------------------------------
def test_prompts_are_unique_with_the_nonce_first() -> None:
    prompts = [_bench.make_prompt("abcd1234", i, 50, seed=7) for i in range(200)]
    assert len(set(prompts)) == 200
    firsts = [p.split()[0] for p in prompts]
    assert len(set(firsts)) == 200
    assert firsts[3] == "abcd1234-000003:"
    for prompt in prompts:
        assert len(prompt.split()) == 1 + 50 + 3
        assert prompt.endswith(" " + _bench.PROMPT_SUFFIX)
        assert all(w in _bench.FILLER_WORDS for w in prompt.split()[1:-3])


def test_two_runs_never_share_a_prefix() -> None:
    ids = {_bench.make_run_id() for _run in range(50)}
    assert len(ids) == 50
    assert all(len(i) == 8 for i in ids)


def test_filler_is_deterministic_for_a_seed() -> None:
    assert _bench.filler_words(100, 3, 1) == _bench.filler_words(100, 3, 1)
    assert _bench.filler_words(100, 3, 1) != _bench.filler_words(100, 4, 1)
    assert _bench.filler_words(100, 3, 1) != _bench.filler_words(100, 3, 2)
    assert _bench.make_prompt("r", 5, 30, seed=1) == _bench.make_prompt("r", 5, 30, seed=1)
    assert len(_bench.filler_words(0, 0, 0)) == 0


@pytest.mark.parametrize(
    ("tokens", "per_word", "words"),
    [
        (512, 1.0, 512),
        (512, 1.28, 400),
        (1000, 1.3, 769),
        (100, 0.5, 200),
        (1, 4.0, 1),  # never below one word
        (120, None, 100),  # no calibration: DEFAULT_TOKENS_PER_WORD (1.2)
        (120, 0, 100),
    ],
)
def test_words_for_tokens(tokens: int, per_word: float | None, words: int) -> None:
    assert _bench.words_for_tokens(tokens, per_word) == words


@pytest.mark.parametrize("ignore_eos", [True, False])
def test_request_body(ignore_eos: bool) -> None:
    body = _bench.request_body("m", "hello", 64, ignore_eos)
    expected = {
        "model": "m",
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": 64,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0,
    }
    if ignore_eos:
        expected["ignore_eos"] = True
    assert body == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://spark-1:8000", ("http", "spark-1", 8000, "", "spark-1:8000")),
        ("http://spark-1:8000/v1/", ("http", "spark-1", 8000, "", "spark-1:8000")),
        ("https://llm.example", ("https", "llm.example", 443, "", "llm.example")),
        ("HTTP://10.0.0.5/api/v1", ("http", "10.0.0.5", 80, "/api", "10.0.0.5")),
        ("http://[fd00::5]:8000", ("http", "fd00::5", 8000, "", "[fd00::5]:8000")),
    ],
)
def test_parse_url(url: str, expected: tuple[Any, ...]) -> None:
    parts = _bench.parse_url(url)
    assert (parts["scheme"], parts["host"], parts["port"], parts["path"]) == expected[:4]
    assert parts["host_header"] == expected[4]
    # what error messages name: the URL as given, without the /v1 the requests add
    assert parts["base"] == url.rstrip("/").removesuffix("/v1")


@pytest.mark.parametrize("url", ["", "spark-1:8000", "ftp://spark-1/", "http://", "http://h:99999"])
def test_parse_url_refuses(url: str) -> None:
    with pytest.raises(ValueError, match="url"):
        _bench.parse_url(url)


def test_validate_scenarios() -> None:
    assert _bench.validate_scenarios([scenario("a"), scenario("b")]) == []
    assert _bench.validate_scenarios([]) == ["scenarios must list at least one scenario"]
    problems = _bench.validate_scenarios(
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
    _bench.write_progress(str(path), {"done": 1})
    _bench.write_progress(str(path), {"done": 2})
    assert json.loads(path.read_text()) == {"done": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["progress.json"]


def test_plan_has_no_metrics() -> None:
    result = _bench.plan("http://h:1", "m", [scenario("a", warmup=True)], ignore_eos=False)
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
    result = _bench.run_benchmark(
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
        "words": _bench.CALIBRATION_WORDS,
        "prompt_tokens": CALIBRATION_PROMPT_WORDS,
    }
    assert result["tokens_per_word"] == round(
        CALIBRATION_PROMPT_WORDS / _bench.CALIBRATION_WORDS, 4
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
    monkeypatch.setattr(_bench, "write_progress", lambda _path, data: written.append(data))
    _bench.run_benchmark(
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
    result = _bench.run_benchmark(
        server.url, MODEL, [scenario(max_tokens=5)], api_key=API_KEY, seed=1
    )
    (only,) = result["scenarios"]
    assert (only["ok"], only["errors"], only["output_tokens"]) == (2, 0, 10)
    assert only["ttft_s"]["min"] >= 0.009


def test_without_usage_counts_chunks(fake_server: Callable[..., FakeLlmServer]) -> None:
    server = fake_server(usage=False, ttft=0.0, token_delay=0.0)
    result = _bench.run_benchmark(server.url, MODEL, [scenario(max_tokens=6)], api_key=API_KEY)
    assert result["calibration"] == {"words": 500, "prompt_tokens": None}
    assert result["tokens_per_word"] == _bench.DEFAULT_TOKENS_PER_WORD
    (only,) = result["scenarios"]
    assert (only["ok"], only["output_tokens"], only["prompt_tokens"]) == (2, 12, 0)
    assert only["prompt_tokens_per_request"] is None
    # 32 tokens at the assumed 1.2 tokens per word: 27 filler words
    assert len(server.bodies[1]["messages"][0]["content"].split()) == 1 + 27 + 3


def test_without_ignore_eos_the_model_stops(fake_server: Callable[..., FakeLlmServer]) -> None:
    server = fake_server(eos_after=3, ttft=0.0, token_delay=0.0)
    result = _bench.run_benchmark(
        server.url, MODEL, [scenario(max_tokens=20)], api_key=API_KEY, ignore_eos=False
    )
    assert result["ignore_eos"] is False
    assert result["scenarios"][0]["output_tokens"] == 2 * 3
    assert all("ignore_eos" not in body for body in server.bodies)


def test_server_errors_are_counted(fake_server: Callable[..., FakeLlmServer]) -> None:
    # requests are numbered on arrival: the calibration is 1, then every third fails
    server = fake_server(fail_when=lambda n, _body: n % 3 == 0, ttft=0.0, token_delay=0.001)
    result = _bench.run_benchmark(
        server.url, MODEL, [scenario(concurrency=4, requests=8)], api_key=API_KEY
    )
    (only,) = result["scenarios"]
    assert (only["ok"], only["errors"]) == (5, 3)
    assert only["error_samples"] == [f"HTTP 500: {FAIL_BODY}"]
    assert only["output_tokens"] == 5 * 4
    assert server.statuses.count(500) == 3


def test_wrong_key_is_counted_as_errors(fake_server: Callable[..., FakeLlmServer]) -> None:
    server = fake_server()
    client = _bench.Client(server.url, MODEL, api_key="wrong", timeout=5)
    result = asyncio.run(
        _bench.run_scenario(client, scenario(concurrency=2, requests=4), 1.0, "run1")
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
    client = _bench.Client(server.url, MODEL, api_key=API_KEY, timeout=5)
    result = asyncio.run(_bench.run_scenario(client, scenario(requests=2), 1.0, "run1"))
    assert (result["ok"], result["errors"]) == (0, 2)
    assert result["error_samples"] == [message]
    assert result["output_tokens"] == 0


def test_error_body_is_cut_at_300_characters() -> None:
    assert _bench.error_text(500, b"x" * 1000) == "HTTP 500: " + "x" * 300


def test_timeouts_are_errors(fake_server: Callable[..., FakeLlmServer]) -> None:
    server = fake_server(ttft=0.5)
    client = _bench.Client(server.url, MODEL, api_key=API_KEY, timeout=0.1)
    result = asyncio.run(
        _bench.run_scenario(client, scenario(concurrency=2, requests=2), 1.0, "run1")
    )
    assert (result["ok"], result["errors"]) == (0, 2)
    assert result["error_samples"] == ["timed out after 0.1 s"]
    # the server would take 0.5 s to the first token
    assert 0.1 <= result["duration_s"] < 0.45


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
    with pytest.raises(_bench.BenchError, match="CERTIFICATE_VERIFY_FAILED"):
        _bench.run_benchmark(server.url, MODEL, [scenario()], api_key=API_KEY)
    result = _bench.run_benchmark(
        server.url, MODEL, [scenario()], api_key=API_KEY, validate_certs=False
    )
    assert (result["scenarios"][0]["ok"], result["scenarios"][0]["output_tokens"]) == (2, 8)
    assert server.headers[-1]["host"] == f"127.0.0.1:{server.port}"


def test_unreachable_server_fails_the_calibration() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(_bench.BenchError) as info:
        _bench.run_benchmark(url, MODEL, [scenario()])
    message = str(info.value)
    assert f"{url}/v1/chat/completions" in message
    assert "ConnectionRefusedError" in message
    assert info.value.url == url


def test_refused_key_fails_the_calibration(fake_server: Callable[..., FakeLlmServer]) -> None:
    server = fake_server()
    with pytest.raises(_bench.BenchError, match=r"failed: HTTP 401: .*Unauthorized"):
        _bench.run_benchmark(server.url, MODEL, [scenario()], api_key="wrong")
    assert server.statuses == [401]


def test_invalid_input_is_refused_before_sending() -> None:
    with pytest.raises(_bench.BenchError) as info:
        _bench.run_benchmark("ftp://x", MODEL, [scenario("a"), scenario("a")], request_timeout=0)
    message = str(info.value)
    assert message.startswith("url must be an http:// or https:// URL")
    assert "scenario name 'a' is used more than once" in message
    assert "request_timeout must be a positive number of seconds, got 0" in message


def test_summary_line() -> None:
    line = _bench.summary_line(
        {
            "name": "c4",
            "warmup": False,
            "ok": 3,
            "requests": 4,
            "ttft_s": {"p50": 0.1234},
            "output_tokens_per_s": 78.44,
        }
    )
    assert line == "c4: 3/4 ok, TTFT p50 0.123 s, 78.4 output tok/s"
