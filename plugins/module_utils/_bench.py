# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""A load generator for OpenAI-compatible LLM servers (vLLM, llama.cpp, vllm-mlx).

Standard library only: it runs with whatever Python the managed node has, so a
benchmark can be sent from the serving host itself, from a client machine or from
the controller, with no package to install. The module ``llm_benchmark`` is a thin
wrapper around ``run_benchmark``; unit tests call every piece directly.

What it does, as ``vllm bench serve`` and llama-benchy do:

* A scenario sends ``requests`` streaming requests to ``POST {url}/v1/chat/completions``
  with at most ``concurrency`` in flight (a pool of that many workers).
* Every request gets a unique prompt: a nonce first (the run's random id and the
  request's number), so that no two prompts share a prefix-cache block and a later
  request is never cheaper than an earlier one, then filler words (deterministic
  for a seed) up to the scenario's ``prompt_tokens``.
* Tokenizers differ, so a run starts with one uncounted calibration request with
  ``CALIBRATION_WORDS`` filler words and ``max_tokens=1``; its ``usage.prompt_tokens``
  gives the tokens per word used to size every later prompt. Each scenario reports
  the prompt tokens the server really counted.
* Per request: start, first token (the first chunk whose ``choices[0].delta`` has a
  non-empty ``content``, ``reasoning_content`` or ``reasoning``) and end, with
  ``time.perf_counter``; output tokens from the final usage chunk
  (``stream_options.include_usage``), else the number of content chunks.

The HTTP client is a small HTTP/1.1 one on ``asyncio.open_connection``: one
connection per request (``Connection: close``), https through
``ssl.create_default_context()``, chunked, content-length and read-to-EOF bodies,
Server-Sent Events. No proxy is used.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import ssl
import statistics
import time
from urllib.parse import urlsplit

API = "openai-chat"
CHAT_PATH = "/v1/chat/completions"
USER_AGENT = "llmfleet-llm-benchmark/0.1"

# The calibration request: this many filler words, max_tokens=1.
CALIBRATION_WORDS = 500
# Used when the server reports no usage.prompt_tokens (then the sizes are a guess).
DEFAULT_TOKENS_PER_WORD = 1.2
ERROR_BODY_CHARS = 300
ERROR_SAMPLES = 5
# An error response's body is read up to this many bytes (only ERROR_BODY_CHARS are kept).
_ERROR_BODY_LIMIT = 65536
_READ_SIZE = 65536
_HEAD_LIMIT = 65536

PROMPT_SUFFIX = "Continue the text."
# Common English words that most tokenizers encode as one token each (with their
# leading space), so that tokens per word stays close to 1 and calibrates well.
_FILLER_TEXT = (
    "the of and to in is was for on that with as by at from his her they this "
    "have had are not but which one were all their there been has when who will "
    "more would time can about people into year some could them other than then "
    "now only its over also after new first two may any most these way well even "
    "because good each those both work life day part world place house under long "
    "water small great between never city same another while last might should "
    "country state family system program question during number point hand large "
    "group often school early light night river music market story paper window"
)
FILLER_WORDS = tuple(_FILLER_TEXT.split())

SCENARIO_INT_KEYS = ("concurrency", "requests", "prompt_tokens", "max_tokens")
STAT_KEYS = ("mean", "p50", "p90", "p99", "min", "max")

# Indirection the unit tests may replace.
_clock = time.perf_counter


class BenchError(Exception):
    """The benchmark could not run (bad input, or the server cannot be reached)."""

    def __init__(self, message, url=None):
        super().__init__(message)
        self.message = message
        self.url = url

    def __str__(self):
        return self.message


# ---------------------------------------------------------------------------
# input
# ---------------------------------------------------------------------------
def parse_url(url):
    """Split the server's base URL; ValueError for anything but http(s)://host[:port][/path].

    A trailing ``/v1`` is dropped (an OpenAI base URL often ends with it) because
    the request path ``/v1/chat/completions`` is added to the URL.
    """
    if not isinstance(url, str) or not url.strip():
        raise ValueError("url must be an http:// or https:// URL, got {0!r}".format(url))
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            "url must be an http:// or https:// URL with a host, got {0!r}".format(url)
        )
    try:
        port = parts.port
    except ValueError as error:
        raise ValueError("url {0!r} has an invalid port: {1}".format(url, error)) from None
    if port is None:
        port = 443 if scheme == "https" else 80
    path = parts.path.rstrip("/")
    base = url.strip().rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
        base = base[: -len("/v1")]
    host = parts.hostname
    host_literal = "[{0}]".format(host) if ":" in host else host
    default_port = (scheme == "https" and port == 443) or (scheme == "http" and port == 80)
    return {
        "scheme": scheme,
        "host": host,
        "port": port,
        "path": path,
        "host_header": host_literal if default_port else "{0}:{1}".format(host_literal, port),
        "base": base,
    }


def validate_scenarios(scenarios):
    """Problems with the scenario list, one message each (empty when it is fine)."""
    problems = []
    if not scenarios:
        return ["scenarios must list at least one scenario"]
    seen = set()
    for position, scenario in enumerate(scenarios, start=1):
        name = scenario.get("name")
        label = "scenario {0}".format(position) if not name else "scenario {0!r}".format(name)
        if not name or not str(name).strip():
            problems.append("scenario {0} has no name".format(position))
        elif name in seen:
            problems.append("scenario name {0!r} is used more than once".format(name))
        else:
            seen.add(name)
        for key in SCENARIO_INT_KEYS:
            value = scenario.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                problems.append(
                    "{0}: {1} must be a positive integer, got {2!r}".format(label, key, value)
                )
    return problems


def plan(url, model, scenarios, ignore_eos=True):
    """The result skeleton: what would be sent, with no metrics (check mode)."""
    return {
        "url": url,
        "model": model,
        "api": API,
        "started": None,
        "finished": None,
        "ignore_eos": bool(ignore_eos),
        "tokens_per_word": None,
        "calibration": None,
        "scenarios": [scenario_plan(s) for s in scenarios],
    }


def scenario_plan(scenario):
    return {
        "name": scenario["name"],
        "warmup": bool(scenario.get("warmup", False)),
        "concurrency": scenario["concurrency"],
        "requests": scenario["requests"],
        "prompt_tokens_target": scenario["prompt_tokens"],
        "max_tokens": scenario["max_tokens"],
    }


# ---------------------------------------------------------------------------
# prompts
# ---------------------------------------------------------------------------
def make_run_id():
    """8 random hex digits: prompts of two runs never share a prefix either."""
    return os.urandom(4).hex()


def filler_words(count, seed, index):
    """``count`` filler words, the same for the same (seed, index), different otherwise."""
    # Filler, not secrets: a reproducible generator is the point.
    rng = random.Random(seed * 1_000_003 + index)  # noqa: S311
    return [rng.choice(FILLER_WORDS) for _word in range(count)]


def make_prompt(run_id, index, words, seed=0):
    """The prompt of request ``index``: its nonce first, ``words`` filler words, the suffix."""
    nonce = "{0}-{1:06d}".format(run_id, index)
    return "{0}: {1} {2}".format(nonce, " ".join(filler_words(words, seed, index)), PROMPT_SUFFIX)


def words_for_tokens(prompt_tokens, tokens_per_word):
    """Filler words that make about ``prompt_tokens`` prompt tokens (at least 1)."""
    if not tokens_per_word or tokens_per_word <= 0:
        tokens_per_word = DEFAULT_TOKENS_PER_WORD
    return max(1, round(prompt_tokens / tokens_per_word))


def request_body(model, prompt, max_tokens, ignore_eos=True):
    """The JSON body of a streaming chat completion request."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0,
    }
    if ignore_eos:
        # vLLM's extension: generate exactly max_tokens, so runs are comparable.
        body["ignore_eos"] = True
    return body


# ---------------------------------------------------------------------------
# HTTP/1.1 pieces (pure)
# ---------------------------------------------------------------------------
def build_request(endpoint, path, body, api_key=None):
    """The bytes of a POST of ``body`` (bytes) to ``path`` under the endpoint's base path."""
    lines = [
        "POST {0}{1} HTTP/1.1".format(endpoint["path"], path),
        "Host: {0}".format(endpoint["host_header"]),
        "User-Agent: {0}".format(USER_AGENT),
        "Accept: text/event-stream",
        "Content-Type: application/json",
        "Content-Length: {0}".format(len(body)),
        "Connection: close",
    ]
    if api_key:
        lines.append("Authorization: Bearer {0}".format(api_key))
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def parse_head(data):
    """``(status, reason, headers)`` of a response head (status line and header lines).

    Header names are lower-cased; repeated headers are joined with ``, ``.
    ValueError when the status line is not HTTP's.
    """
    text = data.decode("latin-1")
    lines = text.split("\r\n") if "\r\n" in text else text.split("\n")
    status_line = lines[0].strip()
    parts = status_line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ValueError("not an HTTP response: {0!r}".format(status_line[:100]))
    headers = {}
    for line in lines[1:]:
        if not line.strip():
            continue
        name, sep, value = line.partition(":")
        if not sep:
            continue
        key = name.strip().lower()
        value = value.strip()
        headers[key] = headers[key] + ", " + value if key in headers else value
    return int(parts[1]), parts[2] if len(parts) > 2 else "", headers


class ChunkedDecoder:
    """Incremental ``Transfer-Encoding: chunked`` decoder.

    ``feed(data)`` takes the next bytes off the wire, in pieces of any size, and
    returns the payload bytes they complete; ``done`` is true once the last chunk
    and the trailer are read. Malformed input raises ValueError.
    """

    def __init__(self):
        self._buffer = b""
        self._state = "size"
        self._remaining = 0
        self.done = False

    def feed(self, data):
        self._buffer += data
        out = []
        steps = {
            "size": self._size_line,
            "data": self._data,
            "data_end": self._data_end,
            "trailer": self._trailer_line,
        }
        while not self.done and steps[self._state](out):
            pass
        return b"".join(out)

    # Each step consumes what it can; False when it needs more bytes.
    def _size_line(self, _out):
        line = self._take_line()
        if line is None:
            return False
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            size = -1
        if size < 0:
            raise ValueError("bad chunk size line: {0!r}".format(line[:40]))
        self._remaining = size
        self._state = "data" if size else "trailer"
        return True

    def _data(self, out):
        if not self._buffer:
            return False
        piece = self._buffer[: self._remaining]
        self._buffer = self._buffer[len(piece) :]
        self._remaining -= len(piece)
        out.append(piece)
        if self._remaining == 0:
            self._state = "data_end"
        return True

    def _data_end(self, _out):
        line = self._take_line()
        if line is None:
            return False
        if line:
            raise ValueError("chunk data longer than its size")
        self._state = "size"
        return True

    def _trailer_line(self, _out):
        """Trailer header lines, ignored, until the empty line that ends the body."""
        line = self._take_line()
        if line is None:
            return False
        if not line:
            self.done = True
        return True

    def _take_line(self):
        """The next line without its CRLF (or LF), or None when it is not complete yet."""
        end = self._buffer.find(b"\n")
        if end < 0:
            if len(self._buffer) > _HEAD_LIMIT:
                raise ValueError("chunk size line too long")
            return None
        line = self._buffer[:end]
        self._buffer = self._buffer[end + 1 :]
        return line[:-1] if line.endswith(b"\r") else line


class SseParser:
    """Incremental Server-Sent Events parser.

    ``feed(data)`` takes body bytes split anywhere (inside a line, inside a UTF-8
    character, between CR and LF) and returns the ``data`` of every event they
    complete, as text; multi-line data is joined with ``\\n``. Lines end with CRLF,
    LF or CR; comments (``:``) and other fields (``event``, ``id``, ``retry``) are
    skipped. ``close()`` returns the last event when the body ends without the blank
    line that should close it.
    """

    def __init__(self):
        self._buffer = b""
        self._data = []

    def feed(self, data):
        self._buffer += data
        events = []
        while True:
            cr = self._buffer.find(b"\r")
            lf = self._buffer.find(b"\n")
            if cr < 0 and lf < 0:
                break
            if cr >= 0 and (lf < 0 or cr < lf):
                if cr == len(self._buffer) - 1:
                    break  # a CR at the end: wait, it may be the first half of CRLF
                line = self._buffer[:cr]
                skip = 2 if self._buffer[cr + 1 : cr + 2] == b"\n" else 1
                self._buffer = self._buffer[cr + skip :]
            else:
                line = self._buffer[:lf]
                self._buffer = self._buffer[lf + 1 :]
            event = self._line(line.decode("utf-8", errors="replace"))
            if event is not None:
                events.append(event)
        return events

    def close(self):
        events = []
        if self._buffer:
            line = self._buffer.rstrip(b"\r")
            self._buffer = b""
            event = self._line(line.decode("utf-8", errors="replace"))
            if event is not None:
                events.append(event)
        if self._data:
            events.append("\n".join(self._data))
            self._data = []
        return events

    def _line(self, line):
        if not line:
            if not self._data:
                return None
            event = "\n".join(self._data)
            self._data = []
            return event
        if line.startswith(":"):
            return None
        field, sep, value = line.partition(":")
        if not sep:
            value = ""
        elif value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        return None


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


# ---------------------------------------------------------------------------
# HTTP/1.1 client
# ---------------------------------------------------------------------------
def make_ssl_context(validate_certs=True):
    context = ssl.create_default_context()
    if not validate_certs:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


async def _read_head(reader):
    while True:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            raise ValueError("response head larger than the stream limit") from None
        except asyncio.IncompleteReadError as error:
            if not error.partial:
                raise ConnectionError("server closed the connection without answering") from None
            raise ConnectionError("server closed the connection inside the response head") from None
        status, reason, headers = parse_head(head)
        if 100 <= status < 200:
            continue  # an interim response (100 Continue): the real one follows
        return status, reason, headers


async def _body_pieces(reader, status, headers):
    """Yield the decoded body in pieces as they arrive."""
    if status in (204, 304):
        return
    if "chunked" in headers.get("transfer-encoding", "").lower():
        decoder = ChunkedDecoder()
        while not decoder.done:
            data = await reader.read(_READ_SIZE)
            if not data:
                raise ConnectionError("connection closed inside a chunked body")
            piece = decoder.feed(data)
            if piece:
                yield piece
        return
    length = headers.get("content-length")
    if length is not None:
        try:
            remaining = int(length.split(",")[0].strip())
        except ValueError:
            raise ValueError("bad Content-Length {0!r}".format(length)) from None
        while remaining > 0:
            data = await reader.read(min(remaining, _READ_SIZE))
            if not data:
                raise ConnectionError(
                    "connection closed {0} bytes before the end of the body".format(remaining)
                )
            remaining -= len(data)
            yield data
        return
    while True:
        data = await reader.read(_READ_SIZE)
        if not data:
            return
        yield data


def _describe(error):
    text = str(error)
    return "{0}: {1}".format(type(error).__name__, text) if text else type(error).__name__


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

    async def chat(self, body):
        """Send one streaming request; return its record (never raises but on cancel).

        A record: ``ok``, ``error`` (text or None), ``status``, ``start``, ``first``
        (None without any generated text), ``end`` (perf_counter seconds),
        ``output_tokens``, ``prompt_tokens`` (None when the server reports no usage)
        and ``chunks`` (chunks with generated text).
        """
        record = {
            "ok": False,
            "error": None,
            "status": None,
            "start": _clock(),
            "first": None,
            "end": None,
            "output_tokens": 0,
            "prompt_tokens": None,
            "chunks": 0,
        }
        try:
            await asyncio.wait_for(self._exchange(body, record), self.timeout)
        except asyncio.TimeoutError as error:
            # wait_for's has no errno; the kernel's (a connect that timed out) has one
            if getattr(error, "errno", None):
                record["error"] = _describe(error)
            else:
                record["error"] = "timed out after {0:g} s".format(self.timeout)
        except Exception as error:  # any failure is this request's error, not the run's
            record["error"] = _describe(error)
        if record["end"] is None:
            record["end"] = _clock()
        if record["error"] is not None:
            record["ok"] = False
        return record

    async def _exchange(self, body, record):
        payload = json.dumps(body).encode("utf-8")
        endpoint = self.endpoint
        reader, writer = await asyncio.open_connection(
            endpoint["host"],
            endpoint["port"],
            ssl=self.ssl_context,
            server_hostname=endpoint["host"] if self.ssl_context else None,
            limit=_HEAD_LIMIT * 4,
        )
        try:
            writer.write(build_request(endpoint, CHAT_PATH, payload, self.api_key))
            await writer.drain()
            status, _reason, headers = await _read_head(reader)
            record["status"] = status
            if not 200 <= status < 300:
                data = b""
                async for piece in _body_pieces(reader, status, headers):
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
        async for piece in _body_pieces(reader, status, headers):
            for data in parser.feed(piece):
                stream.on_data(data, _clock())
                if stream.done or stream.error:
                    break
            if stream.done or stream.error:
                break
        else:
            for data in parser.close():
                stream.on_data(data, _clock())
        record["end"] = _clock()
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


# ---------------------------------------------------------------------------
# metrics (pure)
# ---------------------------------------------------------------------------
def percentile(values, q):
    """The q-th percentile (0..100) by linear interpolation, as numpy's default does."""
    if not values:
        return None
    ordered = sorted(values)
    if not 0 <= q <= 100:
        raise ValueError("percentile must be between 0 and 100, got {0}".format(q))
    rank = (len(ordered) - 1) * q / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    fraction = rank - low
    return ordered[low] + (ordered[high] - ordered[low]) * fraction


def _round(value, digits=6):
    return None if value is None else round(value, digits)


def summarize(values, digits=6):
    """mean, p50, p90, p99, min and max of ``values`` (every one None when empty)."""
    if not values:
        return dict.fromkeys(STAT_KEYS)
    return {
        "mean": _round(statistics.fmean(values), digits),
        "p50": _round(percentile(values, 50), digits),
        "p90": _round(percentile(values, 90), digits),
        "p99": _round(percentile(values, 99), digits),
        "min": _round(min(values), digits),
        "max": _round(max(values), digits),
    }


def _rate(count, seconds):
    return round(count / seconds, 4) if seconds and seconds > 0 else None


def scenario_metrics(records, duration_s):
    """Metrics of one scenario from its request records (see ``Client.chat``).

    Times in seconds. Failed requests count in ``errors`` only; every other metric
    is over the successful ones. ``tpot_s`` and ``decode_tokens_per_s`` use the
    requests with more than one output token (the first token is TTFT's).
    """
    good = [r for r in records if r["ok"]]
    failed = [r for r in records if not r["ok"]]
    samples = []
    for record in failed:
        message = record.get("error") or "unknown error"
        if message not in samples and len(samples) < ERROR_SAMPLES:
            samples.append(message)
    ttft = [r["first"] - r["start"] for r in good if r["first"] is not None]
    latency = [r["end"] - r["start"] for r in good]
    decoding = [
        r
        for r in good
        if r["first"] is not None and r["output_tokens"] > 1 and r["end"] > r["first"]
    ]
    tpot = [(r["end"] - r["first"]) / (r["output_tokens"] - 1) for r in decoding]
    # Tokens after the first over the time spent decoding them, summed over requests: a
    # request whose tokens arrived in one burst (a busy server flushing late) weighs by
    # its time, not as an endless rate.
    decoded = sum(r["output_tokens"] - 1 for r in decoding)
    decode_time = sum(r["end"] - r["first"] for r in decoding)
    prompt_counts = [r["prompt_tokens"] for r in good if r.get("prompt_tokens") is not None]
    output_tokens = sum(r["output_tokens"] for r in good)
    return {
        "ok": len(good),
        "errors": len(failed),
        "error_samples": samples,
        "duration_s": _round(duration_s),
        "requests_per_s": _rate(len(good), duration_s),
        "ttft_s": summarize(ttft),
        "tpot_s": summarize(tpot),
        "latency_s": summarize(latency),
        "prompt_tokens": sum(prompt_counts),
        "prompt_tokens_per_request": (
            round(statistics.fmean(prompt_counts), 1) if prompt_counts else None
        ),
        "output_tokens": output_tokens,
        "output_tokens_per_s": _rate(output_tokens, duration_s),
        "decode_tokens_per_s": _rate(decoded, decode_time) if decoding else None,
    }


# ---------------------------------------------------------------------------
# progress
# ---------------------------------------------------------------------------
def write_progress(path, progress):
    """Replace ``path`` with ``progress`` as JSON, atomically (temp file + os.replace)."""
    tmp = "{0}.{1}.tmp".format(path, os.getpid())
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(progress, handle)
    os.replace(tmp, path)


# ---------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------
def utc_now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


async def calibrate(client, run_id, seed=0, ignore_eos=True, words=CALIBRATION_WORDS):
    """Tokens per filler word from one uncounted request; BenchError when it fails.

    Returns ``(tokens_per_word, calibration)``; the server's ``prompt_tokens`` in
    ``calibration`` is None when it reported no usage (then DEFAULT_TOKENS_PER_WORD
    is used).
    """
    # The same body as the counted requests, so a server that refuses one of its
    # fields (ignore_eos, stream_options) fails here, before any scenario.
    body = request_body(client.model, make_prompt(run_id, 0, words, seed), 1, ignore_eos)
    record = await client.chat(body)
    if not record["ok"]:
        raise BenchError(
            "the calibration request to {0} failed: {1}".format(client.chat_url, record["error"]),
            url=client.url,
        )
    calibration = {"words": words, "prompt_tokens": record["prompt_tokens"]}
    if not record["prompt_tokens"]:
        return DEFAULT_TOKENS_PER_WORD, calibration
    return record["prompt_tokens"] / words, calibration


async def run_scenario(
    client,
    scenario,
    tokens_per_word,
    run_id,
    *,
    first_index=1,
    seed=0,
    ignore_eos=True,
    on_progress=None,
):
    """Run one scenario; its plan plus its metrics.

    Prompts are numbered from ``first_index``. ``on_progress(done, errors, elapsed_s)``
    is called after every finished request.
    """
    words = words_for_tokens(scenario["prompt_tokens"], tokens_per_word)
    count = scenario["requests"]
    bodies = [
        request_body(
            client.model,
            make_prompt(run_id, first_index + i, words, seed),
            scenario["max_tokens"],
            ignore_eos,
        )
        for i in range(count)
    ]
    records = []
    pending = iter(range(count))  # shared by the workers: each takes the next request
    start = _clock()

    async def worker():
        for i in pending:
            records.append(await client.chat(bodies[i]))
            if on_progress is not None:
                errors = len([r for r in records if not r["ok"]])
                on_progress(len(records), errors, _clock() - start)

    await asyncio.gather(*(worker() for _worker in range(min(scenario["concurrency"], count))))
    duration = _clock() - start
    result = scenario_plan(scenario)
    result.update(scenario_metrics(records, duration))
    return result


async def _run(client, scenarios, ignore_eos, progress_file, seed):
    run_id = make_run_id()
    tokens_per_word, calibration = await calibrate(client, run_id, seed, ignore_eos)
    results = []
    first_index = 1
    total = len(scenarios)
    for number, scenario in enumerate(scenarios, start=1):

        def report(done, errors, elapsed, scenario=scenario, number=number):
            if progress_file:
                write_progress(
                    progress_file,
                    {
                        "scenario": scenario["name"],
                        "scenario_index": number,
                        "scenarios": total,
                        "done": done,
                        "requests": scenario["requests"],
                        "errors": errors,
                        "elapsed_s": round(elapsed, 3),
                    },
                )

        report(0, 0, 0.0)
        results.append(
            await run_scenario(
                client,
                scenario,
                tokens_per_word,
                run_id,
                first_index=first_index,
                seed=seed,
                ignore_eos=ignore_eos,
                on_progress=report,
            )
        )
        first_index += scenario["requests"]
    return tokens_per_word, calibration, results


def run_benchmark(
    url,
    model,
    scenarios,
    *,
    api_key=None,
    ignore_eos=True,
    request_timeout=600.0,
    validate_certs=True,
    progress_file=None,
    seed=0,
):
    """Calibrate, run every scenario in order, return the result (see ``plan``).

    Raises BenchError for invalid input or when the calibration request fails
    (the server cannot be reached, refuses the key, does not know the model...).
    """
    problems = validate_scenarios(scenarios)
    if request_timeout is None or request_timeout <= 0:
        problems.append(
            "request_timeout must be a positive number of seconds, got {0}".format(request_timeout)
        )
    try:
        client = Client(url, model, api_key, request_timeout, validate_certs)
    except ValueError as error:
        problems.insert(0, str(error))
    if problems:
        raise BenchError("; ".join(problems), url=url)
    result = plan(url, model, scenarios, ignore_eos)
    result["started"] = utc_now()
    tokens_per_word, calibration, scenario_results = asyncio.run(
        _run(client, scenarios, ignore_eos, progress_file, seed)
    )
    result["finished"] = utc_now()
    result["tokens_per_word"] = round(tokens_per_word, 4)
    result["calibration"] = calibration
    result["scenarios"] = scenario_results
    return result


def summary_line(scenario):
    """One human line about a finished scenario."""
    ttft = scenario["ttft_s"]["p50"]
    rate = scenario["output_tokens_per_s"]
    return "{0}{1}: {2}/{3} ok, TTFT p50 {4}, {5} output tok/s".format(
        scenario["name"],
        " (warm-up)" if scenario["warmup"] else "",
        scenario["ok"],
        scenario["requests"],
        "n/a" if ttft is None else "{0:.3f} s".format(ttft),
        "n/a" if rate is None else "{0:.1f}".format(rate),
    )
