"""The log lines of ``llmfleet logs``: journal entries (``journalctl --output=json``), container
output (``ENGINE logs --timestamps``) and time-stamped log files (a Mac's vllm-mlx) of every
host as one kind of entry, merged in time order, and the ``--since`` a user types as a
moment."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd])")
_DURATION = re.compile(r"^(?:\d+(?:\.\d+)?\s*[smhd]\s*)+$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_TIMESTAMPED = re.compile(
    r"^(?P<stamp>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?P<fraction>\.\d+)?"
    r"(?P<zone>Z|[+-]\d\d:\d\d)\s?(?P<message>.*)$"
)


@dataclass(frozen=True, order=True)
class Entry:
    """One log line: when (seconds since the epoch), where it comes from, what it says."""

    time: float
    host: str
    source: str
    message: str
    # The journal's cursor of this entry (None for a container's line).
    cursor: str | None = None


def parse_since(text: str, now: float) -> float:
    """``10m``, ``2h``, ``1h30m``, ``1d`` (that long ago) or a date/time (``2026-11-24``,
    ``2026-11-24T10:00``, ``2026-11-24 10:00:00``, UTC unless it says otherwise) -> seconds since
    the epoch. Raises ValueError naming what is expected."""
    value = text.strip()
    if _DURATION.match(value):
        return now - sum(
            float(amount) * _SECONDS[unit] for amount, unit in _DURATION_PART.findall(value)
        )
    try:
        moment = datetime.fromisoformat(value.replace(" ", "T", 1))
    except ValueError:
        raise ValueError(
            f"--since {text!r} is neither a duration (10m, 2h, 1h30m, 1d) nor a date/time "
            "(2026-11-24, 2026-11-24T10:00, 2026-11-24 10:00:00)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _message(value: Any) -> str:
    # journalctl writes a message that is not valid UTF-8 as a list of byte values.
    if isinstance(value, list):
        return bytes(value).decode("utf-8", "replace")
    return "" if value is None else str(value)


def journal_entries(host: str, text: str) -> list[Entry]:
    """``journalctl --output=json`` (one JSON object per line) -> entries, the unit as source."""
    entries = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            moment = int(record["__REALTIME_TIMESTAMP"]) / 1e6
        except (ValueError, KeyError, TypeError):
            continue
        unit = str(record.get("_SYSTEMD_UNIT") or record.get("SYSLOG_IDENTIFIER") or "journal")
        entries.append(
            Entry(
                moment,
                host,
                unit.removesuffix(".service"),
                _message(record.get("MESSAGE")).rstrip("\n"),
                record.get("__CURSOR"),
            )
        )
    return entries


def container_time(line: str) -> tuple[float, str] | None:
    """``2026-11-24T10:00:00.123456789Z message`` (docker; podman writes ``+00:00``) -> (seconds
    since the epoch, message); None for a line without such a stamp."""
    match = _TIMESTAMPED.match(line)
    if not match:
        return None
    fraction = (match["fraction"] or ".0")[:7]
    zone = "+00:00" if match["zone"] == "Z" else match["zone"]
    moment = datetime.fromisoformat(match["stamp"] + fraction + zone)
    return moment.timestamp(), match["message"]


def container_entries(host: str, name: str, lines: list[str]) -> list[Entry]:
    """A container's timestamped output -> entries; a line without a stamp (a continuation)
    takes the time of the line before it."""
    entries: list[Entry] = []
    last = 0.0
    for line in lines:
        stamped = container_time(line)
        if stamped is None:
            moment, message = last, line
        else:
            moment, message = stamped
        last = moment
        entries.append(Entry(moment, host, name, message))
    return entries


def host_entries(document: dict[str, Any], since: float | None = None) -> list[Entry]:
    """The entries of one host's document (what playbooks/logs.yml writes): its journal, its
    containers' output and the log files it read (a Mac's vllm-mlx, whose launcher stamps each
    line as ``docker logs --timestamps`` does). A file is read whole to its end: its entries
    before ``since`` are dropped here (journalctl and the engines drop theirs themselves)."""
    host = document["host"]
    entries = journal_entries(host, document.get("journal") or "")
    for result in document.get("containers") or []:
        if result.get("rc") == 0:
            output = list(result.get("stdout_lines") or []) + list(result.get("stderr_lines") or [])
            entries.extend(container_entries(host, str(result["item"]), output))
    for result in document.get("files") or []:
        if result.get("rc") == 0:
            lines = list(result.get("stdout_lines") or [])
            entries.extend(
                entry
                for entry in container_entries(host, str(result["item"]), lines)
                if since is None or entry.time >= since
            )
    return entries


def merged(documents: list[dict[str, Any]], since: float | None = None) -> list[Entry]:
    """Every host's entries in time order (a stable sort: one source's order is kept)."""
    return sorted(
        (entry for document in documents for entry in host_entries(document, since)),
        key=lambda entry: entry.time,
    )


def last_cursor(entries: list[Entry], host: str) -> str | None:
    """The journal cursor of the host's newest journal entry (where following goes on)."""
    cursors = [entry.cursor for entry in entries if entry.host == host and entry.cursor]
    return cursors[-1] if cursors else None


def format_time(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def plain_line(entry: Entry, host_width: int = 0) -> str:
    """``time host source | message``: how a kept log file holds an entry."""
    return (
        f"{format_time(entry.time)} {entry.host.ljust(host_width)} {entry.source} | {entry.message}"
    )
