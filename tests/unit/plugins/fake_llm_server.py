"""A fake OpenAI-compatible server for the tests of the load generator and llm_benchmark.

``FakeLlmServer`` is an asyncio HTTP/1.1 server on 127.0.0.1 (port 0) in its own thread
that answers ``POST /v1/chat/completions`` the way vLLM does - after ``ttft`` seconds a
role chunk with empty content and the first token, then one chunk per token every
``token_delay`` seconds, ``finish_reason`` on the last, a usage chunk with empty
``choices`` (prompt tokens = words of the messages), ``data: [DONE]`` - chunked (each SSE
event split in two HTTP chunks in the middle of its line), with Content-Length, or to EOF.
It answers 401 without the right bearer key, 500 when ``fail_when`` says so, closes the
connection after ``cut_after`` tokens, and counts the most requests it had in flight at
once. It keeps a prefix cache of words, as vLLM's of tokens: a prompt (the tool list, then
each message's text and tool calls) hits the longest prefix it shares with an earlier one,
counted in ``GET /metrics`` as vLLM's ``prefix_cache_queries_total`` and ``hits_total``,
with the requests answered to the end as ``request_success_total`` (unless ``metrics`` is
false). With ``speculative`` (tokens proposed, tokens accepted), each request answered to the
end counts one draft of vLLM's ``spec_decode_*`` counters. With ``tls`` (an SSLContext) it
speaks https. The ``fake_server`` fixture (tests/unit/plugins/conftest.py) starts them.
"""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from typing import Any

MODEL = "fake-model"
API_KEY = "test-key-1234"
FAIL_BODY = "internal error: the fake engine failed"


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
        metrics: bool = True,
        metrics_path: str = "/metrics",
        metrics_key: bool = False,
        speculative: tuple[int, int] | None = None,
    ) -> None:
        self.speculative = speculative
        self.api_key = api_key
        self.ttft = ttft
        self.token_delay = token_delay
        self.framing = framing
        self.usage = usage
        self.eos_after = eos_after
        self.fail_when = fail_when
        self.cut_after = cut_after
        self.tls = tls
        self.metrics = metrics
        # Where the counters answer, and whether only with the key (a serving gateway's route
        # to a group's counters).
        self.metrics_path = metrics_path
        self.metrics_key = metrics_key
        self.prompts: list[list[str]] = []
        self.cache_queries = 0
        self.cache_hits = 0
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.statuses: list[int] = []
        self.in_flight = 0
        # Requests answered to the end, as vLLM's request_success_total counts them.
        self.finished = 0
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
            keyed = headers.get("authorization") == f"Bearer {self.api_key}"
            if method == "GET" and path == self.metrics_path and self.metrics:
                if self.metrics_key and not keyed:
                    await self._plain(writer, 401, '{"error": "Unauthorized"}')
                else:
                    await self._plain(writer, 200, self.prometheus_text(), "text/plain")
                return
            if method != "POST" or path != "/v1/chat/completions":
                await self._plain(writer, 404, '{"error": "not found"}')
                return
            if self.api_key and not keyed:
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
                self.finished += 1
            finally:
                self.in_flight -= 1
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            writer.close()

    def prometheus_text(self) -> str:
        labels = f'engine="0",model_name="{MODEL}"'
        return (
            "# TYPE vllm:prefix_cache_queries_total counter\n"
            f"vllm:prefix_cache_queries_total{{{labels}}} {float(self.cache_queries)}\n"
            f'vllm:prefix_cache_queries_total{{engine="0",model_name="other"}} 99.0\n'
            f"vllm:prefix_cache_hits_total{{{labels}}} {float(self.cache_hits)}\n"
            + self.speculative_text(labels)
            + "# TYPE vllm:request_success_total counter\n"
            f'vllm:request_success_total{{{labels},finished_reason="length"}} '
            f"{float(self.finished)}\n"
            'vllm:request_success_total{engine="0",finished_reason="length",'
            'model_name="other"} 7.0\n'
        )

    def speculative_text(self, labels: str) -> str:
        if not self.speculative:
            return ""
        proposed, accepted = self.speculative
        return (
            f"vllm:spec_decode_num_drafts_total{{{labels}}} {float(self.finished)}\n"
            f"vllm:spec_decode_num_draft_tokens_total{{{labels}}}"
            f" {float(self.finished * proposed)}\n"
            f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}}"
            f" {float(self.finished * accepted)}\n"
        )

    def look_up(self, payload: dict[str, Any]) -> int:
        """The prompt's words, counted into the prefix cache's counters."""
        words = json.dumps(payload["tools"]).split() if payload.get("tools") else []
        for message in payload["messages"]:
            words += str(message.get("content") or "").split()
            if message.get("tool_calls"):
                words += json.dumps(message["tool_calls"]).split()
        hit = 0
        for earlier in self.prompts:
            shared = 0
            for mine, theirs in zip(words, earlier, strict=False):
                if mine != theirs:
                    break
                shared += 1
            hit = max(hit, shared)
        self.prompts.append(words)
        self.cache_queries += len(words)
        self.cache_hits += hit
        return len(words)

    async def _plain(
        self, writer: asyncio.StreamWriter, status: int, text: str, kind: str = "application/json"
    ) -> None:
        self.statuses.append(status)
        data = text.encode()
        writer.write(
            f"HTTP/1.1 {status} Nope\r\nContent-Type: {kind}\r\n"
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
        prompt_tokens = self.look_up(payload)
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


def free_port() -> int:
    """A port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
