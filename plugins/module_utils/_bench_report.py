# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""One benchmark run as the files a user keeps (JSON record, markdown, PNG), and its
comparison with the previous run.

Pure functions, no AnsibleModule: the module ``bench_report`` is a thin wrapper around
them and unit tests call them directly. Standard library only, except ``render_png``,
which imports matplotlib when called (Agg canvas, no display).

The benchmark is the dict the module ``llm_benchmark`` returns: ``started`` (ISO 8601),
``model``, ``url`` and a list of ``scenarios``, each with ``name``, ``warmup``, counts
(``requests``, ``ok``, ``errors``, ``prompt_tokens``, ``output_tokens``), rates
(``output_tokens_per_s``, ``decode_tokens_per_s``, ``requests_per_s``) and the stats
dicts ``ttft_s``, ``latency_s``, ``tpot_s`` (``mean p50 p90 p99 min max`` in seconds).
Any value may be None (a scenario without a successful request has no statistics).

Files are named ``{prefix}-{YYYYMMDDTHHMMSSZ}`` after the run's UTC start time, so the
previous run is the file with the newest stamp older than this one's.
"""

from __future__ import annotations

import datetime
import io
import json
import math
import os
import re
import tempfile

SCHEMA = 1
FILE_MODE = 0o644
DIR_MODE = 0o755
# Changes within this many percent (either way) are "same".
SAME_WITHIN_PCT = 2.0
NONE_TEXT = "—"
STAMP_FORMAT = "%Y%m%dT%H%M%SZ"
STAMP_RE = r"\d{8}T\d{6}Z"
PREFIX_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
RESERVED_KEYS = ("schema", "benchmark", "config", "comparison")
PNG_SIZE = (1200, 900)
PNG_DPI = 100
MATPLOTLIB_MISSING = (
    "plot=true needs matplotlib, which is not installed in the Python that runs Ansible on "
    "the controller ({0}): install it there (pip install 'matplotlib>=3.8', the llmfleet "
    "package's dependency) or set plot=false"
)

LOWER = "lower"
HIGHER = "higher"

# (key, label, stats key, stat, better direction, kind): the compared metrics, in order.
# kind picks the formatting: ms (seconds shown as ms), s, rate, reqrate, count.
METRICS = (
    ("ttft_p50", "TTFT p50 (ms)", "ttft_s", "p50", LOWER, "ms"),
    ("ttft_p90", "TTFT p90 (ms)", "ttft_s", "p90", LOWER, "ms"),
    ("ttft_p99", "TTFT p99 (ms)", "ttft_s", "p99", LOWER, "ms"),
    ("latency_p50", "latency p50 (s)", "latency_s", "p50", LOWER, "s"),
    ("latency_p90", "latency p90 (s)", "latency_s", "p90", LOWER, "s"),
    ("latency_p99", "latency p99 (s)", "latency_s", "p99", LOWER, "s"),
    ("output_tokens_per_s", "out tok/s", "output_tokens_per_s", None, HIGHER, "rate"),
    ("decode_tokens_per_s", "decode tok/s", "decode_tokens_per_s", None, HIGHER, "rate"),
    ("requests_per_s", "req/s", "requests_per_s", None, HIGHER, "reqrate"),
    ("errors", "errors", "errors", None, LOWER, "count"),
)
METRIC_KEYS = tuple(m[0] for m in METRICS)
_METRIC = {m[0]: m for m in METRICS}


class BenchReportError(Exception):
    """Bad input the task must fail on, with a message that says what to change."""


# The previous run's values: hollow black circles over this run's bars.
PREVIOUS_RUN_MARKER = {
    "linestyle": "none",
    "marker": "o",
    "markersize": 7,
    "markerfacecolor": "none",
    "markeredgecolor": "black",
    "markeredgewidth": 1.4,
}


# ---------------------------------------------------------------------------
# names and times
# ---------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------
# metrics and comparison
# ---------------------------------------------------------------------------
def _number(value):
    """value if it is a finite int/float (not bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def metric_value(scenario, key):
    """The value of one of METRICS for a scenario (seconds for times); None if absent."""
    _key, _label, field, stat, _better, _kind = _METRIC[key]
    value = scenario.get(field)
    if stat is not None:
        value = value.get(stat) if isinstance(value, dict) else None
    return _number(value)


def percent_change(previous, current):
    """(current - previous) / previous in percent, rounded to 2 decimals; None when either
    is None or previous is 0."""
    previous, current = _number(previous), _number(current)
    if previous is None or current is None or previous == 0:
        return None
    return round((current - previous) * 100.0 / abs(previous), 2)


def verdict(previous, current, better, within_pct=SAME_WITHIN_PCT):
    """``better``, ``worse`` or ``same`` (change within ``within_pct`` percent) for a move
    from previous to current, where ``better`` is LOWER (times, errors) or HIGHER (rates).
    From 0 any move counts; None when either value is missing."""
    previous, current = _number(previous), _number(current)
    if previous is None or current is None:
        return None
    if previous == 0:
        if current == 0:
            return "same"
        rise = current > 0
    else:
        change = (current - previous) * 100.0 / abs(previous)
        if abs(change) <= within_pct:
            return "same"
        rise = change > 0
    if better == LOWER:
        return "worse" if rise else "better"
    return "better" if rise else "worse"


def measured(scenarios):
    """The scenarios that are not warm-ups."""
    return [s for s in scenarios or [] if isinstance(s, dict) and not s.get("warmup")]


def compare(previous_benchmark, current_benchmark, previous_name=None):
    """``{"previous": previous_name, "scenarios": {name: {metric: {previous, current,
    change_pct, verdict}}}}`` over the non-warm-up scenarios present in both runs (in the
    current run's order). No previous benchmark: no scenarios."""
    result = {"previous": previous_name, "scenarios": {}}
    if not isinstance(previous_benchmark, dict):
        return result
    before = {}
    for scenario in measured(previous_benchmark.get("scenarios")):
        before.setdefault(scenario.get("name"), scenario)
    for scenario in measured(current_benchmark.get("scenarios")):
        name = scenario.get("name")
        if name not in before or name in result["scenarios"]:
            continue
        metrics = {}
        for key, _label, _field, _stat, better, _kind in METRICS:
            old, new = metric_value(before[name], key), metric_value(scenario, key)
            metrics[key] = {
                "previous": old,
                "current": new,
                "change_pct": percent_change(old, new),
                "verdict": verdict(old, new, better),
            }
        result["scenarios"][name] = metrics
    return result


def verdict_counts(metrics):
    """``{"better": n, "worse": n, "same": n}`` over one scenario's compared metrics."""
    counts = {"better": 0, "worse": 0, "same": 0}
    for entry in metrics.values():
        if entry.get("verdict") in counts:
            counts[entry["verdict"]] += 1
    return counts


# ---------------------------------------------------------------------------
# the record and the previous run
# ---------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------
# formatting
# ---------------------------------------------------------------------------
def fmt_ms(seconds):
    """Seconds as milliseconds: no decimals from 100 ms, one below."""
    seconds = _number(seconds)
    if seconds is None:
        return NONE_TEXT
    ms = seconds * 1000.0
    return "{0:.0f}".format(ms) if abs(ms) >= 100 else "{0:.1f}".format(ms)


def fmt_s(seconds):
    """Seconds: 2 decimals from 1 s, 3 below."""
    seconds = _number(seconds)
    if seconds is None:
        return NONE_TEXT
    return "{0:.2f}".format(seconds) if abs(seconds) >= 1 else "{0:.3f}".format(seconds)


def fmt_rate(value):
    """Tokens per second, 1 decimal."""
    value = _number(value)
    return NONE_TEXT if value is None else "{0:.1f}".format(value)


def fmt_reqrate(value):
    """Requests per second: 2 decimals below 10 (a few requests a second), else 1."""
    value = _number(value)
    if value is None:
        return NONE_TEXT
    return "{0:.2f}".format(value) if abs(value) < 10 else "{0:.1f}".format(value)


def fmt_count(value):
    """A count as an integer."""
    value = _number(value)
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
    change = _number(change)
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
    return _FORMATTERS[_METRIC[key][5]](value)


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


def _cell(text):
    """Text safe inside a markdown table cell."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _row(cells):
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _table(header, rows, align=None):
    align = align or ["---"] * len(header)
    lines = [_row(header), "|" + "|".join(align) + "|"]
    lines.extend(_row(r) for r in rows)
    return lines


RESULT_COLUMNS = (
    "scenario",
    "concurrency",
    "requests",
    "errors",
    "prompt tok",
    "out tok",
    "TTFT p50 (ms)",
    "TTFT p90 (ms)",
    "TTFT p99 (ms)",
    "latency p50 (s)",
    "latency p90 (s)",
    "latency p99 (s)",
    "out tok/s",
    "decode tok/s",
    "req/s",
)


def scenario_label(scenario):
    """The scenario's name, marked when it is a warm-up."""
    name = str(scenario.get("name"))
    return name + " (warm-up)" if scenario.get("warmup") else name


def result_row(scenario):
    """One row of the results table, as the cells' texts."""
    return [
        scenario_label(scenario),
        fmt_count(scenario.get("concurrency")),
        fmt_count(scenario.get("requests")),
        fmt_count(scenario.get("errors")),
        fmt_count(scenario.get("prompt_tokens")),
        fmt_count(scenario.get("output_tokens")),
        *(fmt_metric(k, metric_value(scenario, k)) for k in METRIC_KEYS[:9]),
    ]


def comparison_cell(key, entry):
    """``value (+x.x%)`` for one compared metric: ``—`` without a current value,
    ``value (was 0)`` from 0, ``value (—)`` without a previous value."""
    current, previous = _number(entry.get("current")), _number(entry.get("previous"))
    if current is None:
        return NONE_TEXT
    value = fmt_metric(key, current)
    change = _number(entry.get("change_pct"))
    if change is None and previous is not None and previous == current:
        change = 0.0
    if change is not None:
        return "{0} ({1})".format(value, fmt_pct(change))
    if previous == 0:
        return "{0} (was {1})".format(value, fmt_metric(key, previous))
    return "{0} ({1})".format(value, NONE_TEXT)


def _duration(started, finished):
    try:
        seconds = (parse_time(finished) - parse_time(started)).total_seconds()
    except (TypeError, ValueError):
        return None
    if seconds < 0:
        return None
    minutes, rest = divmod(round(seconds), 60)
    return "{0} min {1} s".format(minutes, rest) if minutes else "{0} s".format(rest)


def render_markdown(record):
    """The markdown report of a record (with its comparison, when there is one)."""
    bench = record.get("benchmark") or {}
    lines = [
        "# Benchmark of {0} at {1}".format(
            bench.get("model") or NONE_TEXT, bench.get("url") or NONE_TEXT
        ),
        "",
    ]
    started, finished = bench.get("started"), bench.get("finished")
    took = _duration(started, finished)
    lines.append(
        "- Started {0}, finished {1}{2}".format(
            started or NONE_TEXT,
            finished or NONE_TEXT,
            " ({0})".format(took) if took else "",
        )
    )
    lines.append("- API: {0}".format(fmt_value(bench.get("api"))))
    lines.append(
        "- ignore_eos: {0}, tokens per word: {1}".format(
            fmt_value(bench.get("ignore_eos")), fmt_value(bench.get("tokens_per_word"))
        )
    )
    lines.extend(["", "## Configuration", ""])
    config_items = flatten(record.get("config") or {})
    if config_items:
        lines.extend("- {0}: {1}".format(k, fmt_value(v)) for k, v in config_items)
    else:
        lines.append("No configuration recorded.")

    lines.extend(["", "## Results", ""])
    scenarios = [s for s in bench.get("scenarios") or [] if isinstance(s, dict)]
    if scenarios:
        align = ["---"] + ["--:"] * (len(RESULT_COLUMNS) - 1)
        lines.extend(_table(RESULT_COLUMNS, [result_row(s) for s in scenarios], align))
        lines.append("")
        lines.append(
            "Times are per request; out tok/s counts all output tokens over the scenario's "
            "wall time, decode tok/s the output tokens after the first over decode time."
        )
    else:
        lines.append("No scenarios.")

    comparison = record.get("comparison") or {}
    if comparison.get("previous"):
        lines.extend(["", "## Compared with the previous run", ""])
        lines.append(
            "Previous run: `{0}`. Changes within ±{1:g}% count as the same; lower is "
            "better for times and errors, higher for rates.".format(
                comparison["previous"], SAME_WITHIN_PCT
            )
        )
        lines.append("")
        compared = comparison.get("scenarios") or {}
        if compared:
            header = ["scenario"] + [_METRIC[k][1] for k in METRIC_KEYS] + ["verdict"]
            rows = []
            for name, metrics in compared.items():
                counts = verdict_counts(metrics)
                rows.append(
                    [name]
                    + [comparison_cell(k, metrics.get(k, {})) for k in METRIC_KEYS]
                    + ["{better} better, {worse} worse, {same} same".format(**counts)]
                )
            align = ["---"] + ["--:"] * len(METRIC_KEYS) + ["---"]
            lines.extend(_table(header, rows, align))
        else:
            lines.append("No scenario of this run was measured in the previous run.")

    for key, value in record.items():
        if key in RESERVED_KEYS:
            continue
        lines.extend(["", "## {0}".format(key), ""])
        items = flatten(value) if isinstance(value, dict) else [("value", value)]
        if not items:
            lines.append("Nothing recorded.")
            continue
        lines.extend(_table(["key", "value"], [[k, fmt_value(v)] for k, v in items]))
    return "\n".join(lines) + "\n"


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


# ---------------------------------------------------------------------------
# the plot
# ---------------------------------------------------------------------------
def load_matplotlib():
    """Import matplotlib's Figure and Agg canvas; raises ImportError with the reason."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415
    from matplotlib.figure import Figure  # noqa: PLC0415

    return Figure, FigureCanvasAgg


def _values(scenarios, key, scale=1.0):
    out = []
    for scenario in scenarios:
        value = metric_value(scenario, key) if scenario is not None else None
        out.append(float("nan") if value is None else value * scale)
    return out


def _bars(axis, scenarios, previous, series, width=0.8):
    """Grouped bars, one group per scenario, one bar per (key, label, scale, color);
    the previous run's values as hollow markers over the bars."""
    count = len(series)
    step = width / count
    positions = list(range(len(scenarios)))
    for index, (key, label, scale, color) in enumerate(series):
        offset = -width / 2 + step * (index + 0.5)
        xs = [p + offset for p in positions]
        axis.bar(xs, _values(scenarios, key, scale), step * 0.9, label=label, color=color)
        if previous is not None:
            axis.plot(
                xs,
                _values(previous, key, scale),
                **PREVIOUS_RUN_MARKER,
            )


def _axis_setup(axis, scenarios, title, ylabel):
    axis.set_title(title)
    axis.set_ylabel(ylabel)
    axis.set_xticks(list(range(len(scenarios))))
    axis.set_xticklabels(
        ["{0} (c={1})".format(s.get("name"), fmt_count(s.get("concurrency"))) for s in scenarios],
        rotation=20,
        ha="right",
    )
    axis.grid(axis="y", alpha=0.3)


def render_png(record, previous_record=None):
    """The 2x2 figure (1200x900 px) of a record's non-warm-up scenarios as PNG bytes.

    Raises ImportError when matplotlib is missing."""
    figure_class, canvas_class = load_matplotlib()
    from matplotlib.ticker import MaxNLocator  # noqa: PLC0415

    bench = record.get("benchmark") or {}
    scenarios = measured(bench.get("scenarios"))
    previous = None
    if isinstance(previous_record, dict) and isinstance(previous_record.get("benchmark"), dict):
        before = {}
        for scenario in measured(previous_record["benchmark"].get("scenarios")):
            before.setdefault(scenario.get("name"), scenario)
        previous = [before.get(s.get("name")) for s in scenarios]
        if all(p is None for p in previous):
            previous = None

    width, height = PNG_SIZE
    figure = figure_class(figsize=(width / PNG_DPI, height / PNG_DPI), dpi=PNG_DPI)
    canvas_class(figure)
    title = "{0} - {1}".format(bench.get("model") or "?", bench.get("started") or "?")
    if previous is not None:
        title += "  (hollow markers: previous run)"
    figure.suptitle(title)
    axes = figure.subplots(2, 2)
    if not scenarios:
        for axis in axes.flat:
            axis.axis("off")
        axes[0][0].text(0.5, 0.5, "no measured scenarios", ha="center", va="center")
    else:
        ttft, latency, tokens, errors = axes.flat
        panels = [
            (ttft, "Time to first token", "ms", [
                ("ttft_p50", "p50", 1000.0, "tab:blue"),
                ("ttft_p90", "p90", 1000.0, "tab:orange"),
                ("ttft_p99", "p99", 1000.0, "tab:red"),
            ]),
            (latency, "Request latency", "s", [
                ("latency_p50", "p50", 1.0, "tab:blue"),
                ("latency_p90", "p90", 1.0, "tab:orange"),
                ("latency_p99", "p99", 1.0, "tab:red"),
            ]),
            (tokens, "Throughput", "tokens/s", [
                ("output_tokens_per_s", "output", 1.0, "tab:green"),
                ("decode_tokens_per_s", "decode", 1.0, "tab:olive"),
            ]),
        ]  # fmt: skip
        for axis, title, unit, series in panels:
            _bars(axis, scenarios, previous, series)
            _axis_setup(axis, scenarios, title, unit)
        # errors (left axis) and requests per second (right axis) share the panel
        rate_axis = errors.twinx()
        width_each = 0.4
        positions = list(range(len(scenarios)))
        errors.bar(
            [p - width_each / 2 for p in positions],
            _values(scenarios, "errors"),
            width_each * 0.9,
            color="tab:red",
            label="errors",
        )
        rate_axis.bar(
            [p + width_each / 2 for p in positions],
            _values(scenarios, "requests_per_s"),
            width_each * 0.9,
            color="tab:purple",
            label="req/s",
        )
        if previous is not None:
            for axis, key, shift in (
                (errors, "errors", -width_each / 2),
                (rate_axis, "requests_per_s", width_each / 2),
            ):
                axis.plot(
                    [p + shift for p in positions],
                    _values(previous, key),
                    **PREVIOUS_RUN_MARKER,
                )
        _axis_setup(errors, scenarios, "Errors and requests per second", "errors")
        rate_axis.set_ylabel("requests/s")
        top = max([v for v in _values(scenarios, "errors") if not math.isnan(v)] + [1])
        errors.set_ylim(0, top * 1.2)
        errors.yaxis.set_major_locator(MaxNLocator(integer=True))
        handles = errors.get_legend_handles_labels()
        more = rate_axis.get_legend_handles_labels()
        errors.legend(handles[0] + more[0], handles[1] + more[1], loc="upper left")
        for axis in (ttft, latency, tokens):
            axis.legend(loc="upper left")
    figure.subplots_adjust(left=0.07, right=0.93, top=0.91, bottom=0.1, hspace=0.45, wspace=0.3)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=PNG_DPI)
    return buffer.getvalue()


# ---------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------
def file_needs_write(path, data):
    """True when path is missing, holds other bytes, or has another mode than 0644."""
    try:
        with open(path, "rb") as handle:
            current = handle.read()
        mode = os.stat(path).st_mode & 0o7777
    except OSError:
        return True
    return current != data or mode != FILE_MODE


def write_file(path, data):
    """Write bytes atomically (temporary file in the same directory, then rename), 0644."""
    directory = os.path.dirname(path) or "."
    handle, tmp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def report(
    benchmark,
    output_dir,
    *,
    config=None,
    extra=None,
    name_prefix="bench",
    plot=True,
    compare_previous=True,
    check_mode=False,
    png_renderer=render_png,
):
    """Build the record, markdown and plot of a run (compared with the previous run unless
    compare_previous is false), and write what differs.

    Returns the module's result (with ``changed``) plus ``skipped`` (unreadable older
    records). Raises BenchReportError on bad input, ImportError when plot is true and
    matplotlib is missing, OSError when the files cannot be written."""
    if check_mode and isinstance(benchmark, dict) and benchmark.get("started") is None:
        # llm_benchmark's check mode returns the plan, without times or metrics: a real run
        # would measure and write a new report, which is all there is to say.
        return {
            "changed": True,
            "json_path": None,
            "markdown_path": None,
            "png_path": None,
            "previous": None,
            "comparison": {"previous": None, "scenarios": {}},
            "summary": [],
            "skipped": [],
        }
    problems = validate_benchmark(benchmark)
    if problems:
        raise BenchReportError("; ".join(problems))
    stem = file_stem(name_prefix, benchmark["started"])
    stamp = stem[len(name_prefix) + 1 :]
    previous_path, previous_record, skipped = None, None, []
    if compare_previous:
        previous_path, previous_record, skipped = find_previous(output_dir, name_prefix, stamp)
    comparison = compare(
        previous_record["benchmark"] if previous_record else None,
        benchmark,
        os.path.basename(previous_path) if previous_path else None,
    )
    record = build_record(benchmark, config, extra, comparison)
    json_path = os.path.join(output_dir, stem + ".json")
    md_path = os.path.join(output_dir, stem + ".md")
    png_path = os.path.join(output_dir, stem + ".png") if plot else None
    json_data = record_json(record).encode("utf-8")
    md_data = render_markdown(record).encode("utf-8")

    writes = []
    if file_needs_write(json_path, json_data):
        writes.append((json_path, json_data))
    if file_needs_write(md_path, md_data):
        writes.append((md_path, md_data))
    png_mode_fix = False
    if plot and (writes or not os.path.isfile(png_path)):
        writes.append((png_path, png_renderer(record, previous_record)))
    elif plot:
        png_mode_fix = (os.stat(png_path).st_mode & 0o7777) != FILE_MODE
    changed = bool(writes) or png_mode_fix or not os.path.isdir(output_dir)
    if not check_mode:
        if not os.path.isdir(output_dir):
            os.makedirs(output_dir, DIR_MODE)
        for path, data in writes:
            write_file(path, data)
        if png_mode_fix:
            os.chmod(png_path, FILE_MODE)
    return {
        "changed": changed,
        "json_path": json_path,
        "markdown_path": md_path,
        "png_path": png_path,
        "previous": previous_path,
        "comparison": comparison,
        "summary": summary_lines(benchmark, comparison),
        "skipped": skipped,
    }
