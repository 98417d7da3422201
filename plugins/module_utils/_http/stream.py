# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""A small HTTP/1.1 client for streamed responses, on ``asyncio.open_connection``.

Standard library only. The pieces a streaming request needs, each testable alone:
the server's base URL (``parse_url``), the request bytes (``build_request``), the
response head (``parse_head``, ``read_head``), the body as it arrives whatever its
framing - ``Transfer-Encoding: chunked`` (``ChunkedDecoder``), ``Content-Length`` or
read to EOF (``body_pieces``) - and Server-Sent Events in it (``SseParser``).
One connection per request (``Connection: close``); https through
``ssl.create_default_context()``; no proxy is used.
"""

from __future__ import annotations

import asyncio
import ssl
from urllib.parse import urlsplit

USER_AGENT = "llmfleet-llm-benchmark/0.1"
READ_SIZE = 65536
# The most a response head (or a chunk size line) may take.
HEAD_LIMIT = 65536


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


def build_request(endpoint, path, body, api_key=None, *, method="POST", headers=None):
    """The bytes of a POST of ``body`` (bytes) to ``path`` under the endpoint's base path;
    with ``method="GET"``, a GET of ``path`` (``body`` empty). ``headers``: more header
    lines, ``{name: value}``."""
    lines = ["{0} {1}{2} HTTP/1.1".format(method, endpoint["path"], path)]
    lines.extend(
        ["Host: {0}".format(endpoint["host_header"]), "User-Agent: {0}".format(USER_AGENT)]
    )
    if method == "POST":
        lines.extend(
            [
                "Accept: text/event-stream",
                "Content-Type: application/json",
                "Content-Length: {0}".format(len(body)),
            ]
        )
    lines.append("Connection: close")
    if api_key:
        lines.append("Authorization: Bearer {0}".format(api_key))
    lines.extend("{0}: {1}".format(name, value) for name, value in (headers or {}).items())
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
            if len(self._buffer) > HEAD_LIMIT:
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


def make_ssl_context(validate_certs=True):
    """The TLS context of an https request; ``validate_certs=False`` checks nothing."""
    context = ssl.create_default_context()
    if not validate_certs:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


async def read_head(reader):
    """``(status, reason, headers)`` of the response, past any interim (1xx) one."""
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


async def body_pieces(reader, status, headers):
    """Yield the decoded body in pieces as they arrive."""
    if status in (204, 304):
        return
    if "chunked" in headers.get("transfer-encoding", "").lower():
        decoder = ChunkedDecoder()
        while not decoder.done:
            data = await reader.read(READ_SIZE)
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
            data = await reader.read(min(remaining, READ_SIZE))
            if not data:
                raise ConnectionError(
                    "connection closed {0} bytes before the end of the body".format(remaining)
                )
            remaining -= len(data)
            yield data
        return
    while True:
        data = await reader.read(READ_SIZE)
        if not data:
            return
        yield data


def describe_error(error):
    """An exception as ``Type: message`` (``Type`` alone when it says nothing)."""
    text = str(error)
    return "{0}: {1}".format(type(error).__name__, text) if text else type(error).__name__
