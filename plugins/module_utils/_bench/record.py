# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""One benchmark run as its JSON record, named after its start time, and the previous
run's record found next to it.

Files are named ``{prefix}-{YYYYMMDDTHHMMSSZ}`` after the run's UTC start time, so the
previous run is the file with the newest stamp older than this one's.
"""

from __future__ import annotations

import datetime
import json
import os
import re

SCHEMA = 1
STAMP_FORMAT = "%Y%m%dT%H%M%SZ"
STAMP_RE = r"\d{8}T\d{6}Z"
PREFIX_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
RESERVED_KEYS = ("schema", "benchmark", "config", "comparison")


class BenchReportError(Exception):
    """Bad input the task must fail on, with a message that says what to change."""


def parse_time(text):
    """An ISO 8601 time (``2026-11-22T23:10:00Z``, offsets, fractions) as an aware UTC
    datetime; a time without zone is taken as UTC. Raises ValueError."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("not a time: {0!r}".format(text))
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    parsed = datetime.datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
    return parsed.astimezone(datetime.timezone.utc)


def run_stamp(started):
    """``benchmark.started`` as the file name stamp ``YYYYMMDDTHHMMSSZ`` (UTC)."""
    try:
        return parse_time(started).strftime(STAMP_FORMAT)
    except ValueError:
        raise BenchReportError(
            "benchmark.started must be an ISO 8601 time such as 2026-11-22T23:10:00Z, "
            "got {0!r}".format(started)
        ) from None


def file_stem(name_prefix, started):
    """``{name_prefix}-{stamp}``, the name of the run's files without extension."""
    if not isinstance(name_prefix, str) or not PREFIX_RE.match(name_prefix):
        raise BenchReportError(
            "name_prefix must be letters, digits, '.', '_' or '-' (starting with a letter or "
            "digit), got {0!r}".format(name_prefix)
        )
    return "{0}-{1}".format(name_prefix, run_stamp(started))


def validate_benchmark(benchmark):
    """Problems with the benchmark dict as a list of strings (empty when it is usable)."""
    if not isinstance(benchmark, dict):
        return ["benchmark must be the dict llm_benchmark returns"]
    problems = []
    try:
        run_stamp(benchmark.get("started"))
    except BenchReportError as error:
        problems.append(str(error))
    scenarios = benchmark.get("scenarios")
    if not isinstance(scenarios, list):
        problems.append("benchmark.scenarios must be a list, got {0!r}".format(scenarios))
    else:
        for index, scenario in enumerate(scenarios):
            if not isinstance(scenario, dict) or not isinstance(scenario.get("name"), str):
                problems.append("benchmark.scenarios[{0}] must be a dict with a name".format(index))
    return problems


def build_record(benchmark, config=None, extra=None, comparison=None):
    """The JSON record: schema, benchmark, config, each key of extra, comparison."""
    extra = extra or {}
    clash = sorted(k for k in extra if k in RESERVED_KEYS)
    if clash:
        raise BenchReportError(
            "extra must not use the record's own keys ({0}): rename {1}".format(
                ", ".join(RESERVED_KEYS), ", ".join(clash)
            )
        )
    record = {"schema": SCHEMA, "benchmark": benchmark, "config": config or {}}
    record.update(extra)
    record["comparison"] = comparison or {"previous": None, "scenarios": {}}
    return record


def record_json(record):
    """The record file's text: stable (same record, same bytes), ending in a newline."""
    return json.dumps(record, indent=2, ensure_ascii=False) + "\n"


def find_previous(output_dir, name_prefix, current_stamp):
    """The newest ``{name_prefix}-{stamp}.json`` in output_dir whose stamp is older than
    ``current_stamp`` and that holds a record with a benchmark.

    Returns ``(path, record, skipped)``; path and record are None when there is none;
    skipped lists the newer-than-chosen candidates that could not be read."""
    pattern = re.compile(r"^{0}-({1})\.json$".format(re.escape(name_prefix), STAMP_RE))
    try:
        names = os.listdir(output_dir)
    except OSError:
        return None, None, []
    candidates = []
    for name in names:
        match = pattern.match(name)
        if match and match.group(1) < current_stamp:
            candidates.append((match.group(1), name))
    skipped = []
    for _stamp, name in sorted(candidates, reverse=True):
        path = os.path.join(output_dir, name)
        try:
            with open(path, encoding="utf-8") as handle:
                record = json.load(handle)
        except (OSError, ValueError):
            skipped.append(path)
            continue
        if not isinstance(record, dict) or not isinstance(record.get("benchmark"), dict):
            skipped.append(path)
            continue
        return path, record, skipped
    return None, None, skipped
