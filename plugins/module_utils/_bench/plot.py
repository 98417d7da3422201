# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""The PNG plot of a benchmark record: one 1200x900 figure of its non-warm-up scenarios,
with the previous run's values as hollow markers, and with session scenarios a third row
(1200x1350) of their turns: TTFT p99 and the prefix cache's hit ratio per turn, the
previous run's dashed. matplotlib is imported when called (Agg canvas, no display)."""

from __future__ import annotations

import io
import math

from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.comparison import (
    finite_number,
    measured,
    metric_value,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.format import (
    fmt_count,
)

PNG_SIZE = (1200, 900)
# With session scenarios: a third row of panels.
PNG_SIZE_SESSIONS = (1200, 1350)
PNG_DPI = 100
MATPLOTLIB_MISSING = (
    "plot=true needs matplotlib, which is not installed in the Python that runs Ansible on "
    "the controller ({0}): install it there (pip install 'matplotlib>=3.8', the llmfleet "
    "package's dependency) or set plot=false"
)

# The previous run's values: hollow black circles over this run's bars.
PREVIOUS_RUN_MARKER = {
    "linestyle": "none",
    "marker": "o",
    "markersize": 7,
    "markerfacecolor": "none",
    "markeredgecolor": "black",
    "markeredgewidth": 1.4,
}


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


def _sessions(scenarios):
    return [s for s in scenarios if s.get("kind") == "session" and s.get("by_turn")]


def _turn_lines(axis, sessions, previous, panel):
    """One line per session scenario over its turns; the previous run's dashed. ``panel``:
    (turn field, its statistic or None, scale, title, y label)."""
    field, stat, scale, title, ylabel = panel
    for index, scenario in enumerate(sessions):
        color = "C{0}".format(index)
        runs = [(scenario, "-", scenario.get("name"))]
        if previous.get(scenario.get("name")):
            runs.append((previous[scenario.get("name")], "--", None))
        for run, style, label in runs:
            turns = [t for t in run.get("by_turn") or [] if isinstance(t, dict)]
            values = []
            for turn in turns:
                value = turn.get(field)
                value = value.get(stat) if stat and isinstance(value, dict) else value
                value = finite_number(value)
                values.append(float("nan") if value is None else value * scale)
            axis.plot([t.get("turn") for t in turns], values, style, color=color, label=label,
                      marker="o")  # fmt: skip
    axis.set_title(title)
    axis.set_ylabel(ylabel)
    axis.set_xlabel("turn")
    axis.grid(alpha=0.3)
    axis.legend(loc="upper left")


def _main_axes(figure, scenarios, previous_record):
    """The 2x2 axes of the scenarios; below them, with session scenarios, their turns."""
    sessions = _sessions(scenarios)
    axes = figure.subplots(3 if sessions else 2, 2)
    if not sessions:
        return axes
    before = {}
    if isinstance(previous_record, dict) and isinstance(previous_record.get("benchmark"), dict):
        for scenario in measured(previous_record["benchmark"].get("scenarios")):
            before.setdefault(scenario.get("name"), scenario)
    ttft, hits = axes[2]
    ttft_title = "Sessions: TTFT p99 per turn (dashed: previous run)"
    _turn_lines(ttft, sessions, before, ("ttft_s", "p99", 1000.0, ttft_title, "ms"))
    hits_title = "Sessions: prompt tokens from the prefix cache"
    _turn_lines(hits, sessions, before, ("prefix_cache_hit_ratio", None, 100.0, hits_title, "%"))
    hits.set_ylim(0, 105)
    return axes[:2]


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

    width, height = PNG_SIZE_SESSIONS if _sessions(scenarios) else PNG_SIZE
    figure = figure_class(figsize=(width / PNG_DPI, height / PNG_DPI), dpi=PNG_DPI)
    canvas_class(figure)
    title = "{0} - {1}".format(bench.get("model") or "?", bench.get("started") or "?")
    if previous is not None:
        title += "  (hollow markers: previous run)"
    figure.suptitle(title)
    axes = _main_axes(figure, scenarios, previous_record)
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
