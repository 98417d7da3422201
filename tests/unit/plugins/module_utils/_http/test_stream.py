"""module_utils/_http/stream: URLs, request bytes, response heads, chunked bodies, SSE."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._http import stream as _http_stream

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
        parser = _http_stream.SseParser()
        events = parser.feed(data[:cut]) + parser.feed(data[cut:]) + parser.close()
        assert events == SSE_EVENTS, f"cut at byte {cut}"


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_sse_parser_byte_by_byte(newline: str) -> None:
    parser = _http_stream.SseParser()
    events: list[str] = []
    for byte in sse_bytes(newline):
        events += parser.feed(bytes([byte]))
    assert events == SSE_EVENTS
    assert parser.close() == []


def test_sse_parser_last_event_without_blank_line() -> None:
    parser = _http_stream.SseParser()
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
        decoder = _http_stream.ChunkedDecoder()
        out = decoder.feed(data[:cut])
        assert not decoder.done or cut == len(data)
        out += decoder.feed(data[cut:])
        assert decoder.done, f"cut at byte {cut}"
        assert out == PAYLOAD, f"cut at byte {cut}"


def test_chunked_decoder_stops_at_the_last_chunk() -> None:
    decoder = _http_stream.ChunkedDecoder()
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
        _http_stream.ChunkedDecoder().feed(data)


def test_parse_head() -> None:
    status, reason, headers = _http_stream.parse_head(
        b"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n"
        b"Set-Cookie: a=1\r\nset-cookie: b=2\r\n\r\n"
    )
    assert (status, reason) == (401, "Unauthorized")
    assert headers == {"content-type": "application/json", "set-cookie": "a=1, b=2"}
    with pytest.raises(ValueError, match="not an HTTP response"):
        _http_stream.parse_head(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")


def test_build_request() -> None:
    endpoint = _http_stream.parse_url("https://llm.example:8443/prefix/v1/")
    data = _http_stream.build_request(endpoint, "/v1/chat/completions", b'{"a":1}', "k3y")
    head, _blank_line, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /prefix/v1/chat/completions HTTP/1.1"
    assert "Host: llm.example:8443" in lines
    assert "Content-Length: 7" in lines
    assert "Connection: close" in lines
    assert "Authorization: Bearer k3y" in lines
    assert body == b'{"a":1}'
    assert b"Authorization" not in _http_stream.build_request(endpoint, "/x", b"", None)


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
    parts = _http_stream.parse_url(url)
    assert (parts["scheme"], parts["host"], parts["port"], parts["path"]) == expected[:4]
    assert parts["host_header"] == expected[4]
    # what error messages name: the URL as given, without the /v1 the requests add
    assert parts["base"] == url.rstrip("/").removesuffix("/v1")


@pytest.mark.parametrize("url", ["", "spark-1:8000", "ftp://spark-1/", "http://", "http://h:99999"])
def test_parse_url_refuses(url: str) -> None:
    with pytest.raises(ValueError, match="url"):
        _http_stream.parse_url(url)
