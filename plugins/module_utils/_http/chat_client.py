# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""One streamed chat completion request to an OpenAI-compatible server, timed.

``Client.chat`` sends ``POST {url}/v1/chat/completions`` with the body it is given
over ``stream`` and returns the request's record: start, first token (the
first chunk with a choice, as ``vllm bench serve`` counts it) and end, read from
``clock``, the output tokens of the final usage chunk (``stream_options.include_usage``),
else the number of chunks with text, and the error, if any. ``StreamState`` reads
the stream's SSE data. Any failure is the request's error, never an exception.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import time

from ansible.module_utils.basic import env_fallback
from ansible_collections.llmfleet.cluster.plugins.module_utils._http.stream import (
    HEAD_LIMIT,
    SseParser,
    body_pieces,
    build_request,
    describe_error,
    make_ssl_context,
    parse_url,
    read_head,
)

CHAT_PATH = "/v1/chat/completions"
ERROR_BODY_CHARS = 300
# An error response's body is read up to this many bytes (only ERROR_BODY_CHARS are kept).
_ERROR_BODY_LIMIT = 65536

# The modules' shared options for the served endpoint (documented in
# doc_fragments/llm_endpoint.py).
ENDPOINT_OPTIONS = {
    "url": {"type": "str", "required": True},
    "model": {"type": "str", "required": True},
    "api_key": {"type": "str", "no_log": True, "fallback": (env_fallback, ["LLMFLEET_API_KEY"])},
    "request_timeout": {"type": "float", "default": 600},
    "validate_certs": {"type": "bool", "default": True},
}

# Every time in a record is read from this clock (an indirection tests may replace).
clock = time.perf_counter


def delta_text(chunk):
    """The generated text of a chat completion chunk (content, else reasoning), or ''."""
    choices = chunk.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return ""
    delta = choices[0].get("delta") or {}
    if not isinstance(delta, dict):
        return ""
    for key in ("content", "reasoning_content", "reasoning"):
        value = delta.get(key)
        if value:
            return value
    return ""


def error_text(status, body):
    """``HTTP <status>: <first ERROR_BODY_CHARS characters of the body>``."""
    text = body.decode("utf-8", errors="replace").strip()
    return "HTTP {0}: {1}".format(status, text[:ERROR_BODY_CHARS])


class Client:
    """Sends chat completion requests to one endpoint and times them."""

    def __init__(self, url, model, api_key=None, timeout=600.0, validate_certs=True):
        self.url = url
        self.endpoint = parse_url(url)
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.ssl_context = (
            make_ssl_context(validate_certs) if self.endpoint["scheme"] == "https" else None
        )

    @property
    def chat_url(self):
        return self.endpoint["base"] + CHAT_PATH

    async def chat(self, body, headers=None):
        """Send one streaming request (with ``headers``, ``{name: value}``, besides the
        usual ones); return its record (never raises but on cancel).

        A record: ``ok``, ``error`` (text or None), ``status``, ``start``, ``first``
        (None without any generated text), ``end`` (perf_counter seconds),
        ``output_tokens``, ``prompt_tokens`` (None when the server reports no usage)
        and ``chunks`` (chunks with generated text).
        """
        record = {
            "ok": False,
            "error": None,
            "status": None,
            "start": clock(),
            "first": None,
            "end": None,
            "output_tokens": 0,
            "prompt_tokens": None,
            "chunks": 0,
        }
        try:
            await asyncio.wait_for(self._exchange(body, record, headers), self.timeout)
        except asyncio.TimeoutError as error:
            # wait_for's has no errno; the kernel's (a connect that timed out) has one
            if getattr(error, "errno", None):
                record["error"] = describe_error(error)
            else:
                record["error"] = "timed out after {0:g} s".format(self.timeout)
        except Exception as error:  # any failure is this request's error, not the run's
            record["error"] = describe_error(error)
        if record["end"] is None:
            record["end"] = clock()
        if record["error"] is not None:
            record["ok"] = False
        return record

    async def _exchange(self, body, record, headers=None):
        payload = json.dumps(body).encode("utf-8")
        endpoint = self.endpoint
        reader, writer = await asyncio.open_connection(
            endpoint["host"],
            endpoint["port"],
            ssl=self.ssl_context,
            server_hostname=endpoint["host"] if self.ssl_context else None,
            limit=HEAD_LIMIT * 4,
        )
        try:
            writer.write(build_request(endpoint, CHAT_PATH, payload, self.api_key, headers=headers))
            await writer.drain()
            status, _reason, headers = await read_head(reader)
            record["status"] = status
            if not 200 <= status < 300:
                data = b""
                async for piece in body_pieces(reader, status, headers):
                    data += piece
                    if len(data) >= _ERROR_BODY_LIMIT:
                        break
                record["error"] = error_text(status, data)
                return
            await self._read_stream(reader, status, headers, record)
        finally:
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()

    async def _read_stream(self, reader, status, headers, record):
        parser = SseParser()
        stream = StreamState()
        async for piece in body_pieces(reader, status, headers):
            for data in parser.feed(piece):
                stream.on_data(data, clock())
                if stream.done or stream.error:
                    break
            if stream.done or stream.error:
                break
        else:
            for data in parser.close():
                stream.on_data(data, clock())
        record["end"] = clock()
        stream.finish(record)


class StreamState:
    """What the SSE data of one chat completion stream said so far.

    ``on_data(data, now)`` takes one event's data: ``[DONE]``, a chunk, or an error
    object (vLLM sends one when a request fails mid-stream). ``finish(record)``
    fills the request record: ``first``, ``chunks``, ``output_tokens`` (the usage
    chunk's ``completion_tokens``, else the chunks with text), ``prompt_tokens``,
    ``ok`` and ``error``.
    """

    def __init__(self):
        self.first = None
        self.chunks = 0
        self.usage = None
        self.finish_reason = None
        self.done = False
        self.error = None

    def on_data(self, data, now):
        text = data.strip()
        if text == "[DONE]":
            self.done = True
            return
        if not text:
            return
        try:
            chunk = json.loads(text)
        except ValueError:
            self.error = "invalid JSON in the stream: {0}".format(text[:ERROR_BODY_CHARS])
            return
        if not isinstance(chunk, dict):
            return
        if chunk.get("error"):
            error = chunk["error"]
            message = error.get("message", error) if isinstance(error, dict) else error
            self.error = "error in the stream: {0}".format(str(message)[:ERROR_BODY_CHARS])
            return
        choices = chunk.get("choices") or []
        # The first token: the first chunk with a choice, as vLLM's own `vllm bench serve`
        # counts it. vLLM sends it with the first generated token, whose text can be empty
        # (a special token, or the start of a multi-byte character).
        if choices and self.first is None:
            self.first = now
        if delta_text(chunk):
            self.chunks += 1
        if choices and isinstance(choices[0], dict) and choices[0].get("finish_reason"):
            self.finish_reason = choices[0]["finish_reason"]
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]

    def finish(self, record):
        usage = self.usage or {}
        record["first"] = self.first
        record["chunks"] = self.chunks
        completion = usage.get("completion_tokens")
        prompt = usage.get("prompt_tokens")
        record["output_tokens"] = completion if isinstance(completion, int) else self.chunks
        record["prompt_tokens"] = prompt if isinstance(prompt, int) else None
        if self.error is not None:
            record["ok"], record["error"] = False, self.error
        elif not (self.done or self.usage or self.finish_reason):
            record["ok"], record["error"] = False, "the stream ended before [DONE]"
        else:
            record["ok"], record["error"] = True, None
