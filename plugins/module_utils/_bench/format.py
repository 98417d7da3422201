# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Benchmark values as text: times in ms or s, rates, counts, any value of a key/value
line, changes in percent, and the one-line summary of each scenario (pure)."""

from __future__ import annotations

import json
import math

from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.comparison import (
    METRIC_BY_KEY,
    finite_number,
    metric_value,
    verdict_counts,
)

NONE_TEXT = "—"


def fmt_ms(seconds):
    """Seconds as milliseconds: no decimals from 100 ms, one below."""
    seconds = finite_number(seconds)
    if seconds is None:
        return NONE_TEXT
    ms = seconds * 1000.0
    return "{0:.0f}".format(ms) if abs(ms) >= 100 else "{0:.1f}".format(ms)


def fmt_s(seconds):
    """Seconds: 2 decimals from 1 s, 3 below."""
    seconds = finite_number(seconds)
    if seconds is None:
        return NONE_TEXT
    return "{0:.2f}".format(seconds) if abs(seconds) >= 1 else "{0:.3f}".format(seconds)


def fmt_rate(value):
    """Tokens per second, 1 decimal."""
    value = finite_number(value)
    return NONE_TEXT if value is None else "{0:.1f}".format(value)


def fmt_reqrate(value):
    """Requests per second: 2 decimals below 10 (a few requests a second), else 1."""
    value = finite_number(value)
    if value is None:
        return NONE_TEXT
    return "{0:.2f}".format(value) if abs(value) < 10 else "{0:.1f}".format(value)


def fmt_count(value):
    """A count as an integer."""
    value = finite_number(value)
    if value is None:
        return NONE_TEXT
    return str(int(value)) if float(value).is_integer() else "{0:g}".format(value)


def _fmt_float(value):
    """A float compactly: whole numbers with one decimal, others with up to 3 decimals (3
    significant digits when that would round to 0)."""
    if not math.isfinite(value) or (value.is_integer() and abs(value) < 1e15):
        return "{0:.1f}".format(value) if math.isfinite(value) else str(value)
    text = "{0:.3f}".format(value).rstrip("0").rstrip(".")
    return text if text not in ("0", "-0") else "{0:.3g}".format(value)


def fmt_value(value):
    """Any value for a key/value line: numbers compact, bools lower case, None as a dash,
    short lists of scalars joined with commas, long ones counted, the rest as JSON."""
    if value is None:
        text = NONE_TEXT
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, float):
        text = _fmt_float(value)
    elif isinstance(value, (list, tuple)) and all(
        not isinstance(v, (dict, list, tuple)) for v in value
    ):
        if len(value) > 12:
            text = "{0} values".format(len(value))
        else:
            text = ", ".join(fmt_value(v) for v in value)
    elif isinstance(value, (dict, list, tuple)):
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    else:
        text = str(value)
    return text


def fmt_pct(change):
    """A change in percent as ``+3.4%`` / ``-1.0%``; the dash when None."""
    change = finite_number(change)
    return NONE_TEXT if change is None else "{0:+.1f}%".format(change)


_FORMATTERS = {
    "ms": fmt_ms,
    "s": fmt_s,
    "rate": fmt_rate,
    "reqrate": fmt_reqrate,
    "count": fmt_count,
}


def fmt_metric(key, value):
    """A metric's value as the tables show it (TTFT in ms, latency in s...)."""
    return _FORMATTERS[METRIC_BY_KEY[key][5]](value)


def flatten(data, prefix=""):
    """Nested dicts as ``[(dotted.key, value)]``; lists of dicts indexed ``key[0].sub``."""
    items = []
    if isinstance(data, dict):
        for key, value in data.items():
            name = "{0}.{1}".format(prefix, key) if prefix else str(key)
            if isinstance(value, dict) and value:
                items.extend(flatten(value, name))
            elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
                for index, item in enumerate(value):
                    items.extend(flatten(item, "{0}[{1}]".format(name, index)))
            else:
                items.append((name, value))
    else:
        items.append((prefix or "value", data))
    return items


def scenario_label(scenario):
    """The scenario's name, marked when it is a warm-up."""
    name = str(scenario.get("name"))
    return name + " (warm-up)" if scenario.get("warmup") else name


def summary_lines(benchmark, comparison=None):
    """One line per scenario, e.g. ``short_c4: 16 ok, 0 errors, TTFT p50 212 ms, 78.4 out
    tok/s``; with a comparison, the verdict counts are appended."""
    compared = (comparison or {}).get("scenarios") or {}
    lines = []
    for scenario in benchmark.get("scenarios") or []:
        if not isinstance(scenario, dict):
            continue
        ttft = fmt_ms(metric_value(scenario, "ttft_p50"))
        line = "{0}: {1} ok, {2} errors, TTFT p50 {3}, {4} out tok/s".format(
            scenario_label(scenario),
            fmt_count(scenario.get("ok")),
            fmt_count(scenario.get("errors")),
            ttft if ttft == NONE_TEXT else ttft + " ms",
            fmt_rate(metric_value(scenario, "output_tokens_per_s")),
        )
        name = scenario.get("name")
        if not scenario.get("warmup") and name in compared:
            line += "; vs previous: {better} better, {worse} worse, {same} same".format(
                **verdict_counts(compared[name])
            )
        lines.append(line)
    return lines
