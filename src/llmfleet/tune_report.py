"""The report of a ``llmfleet tune`` sweep: every point with its numbers and verdict, as
markdown and as a PNG (TTFT p99 and output tokens/s per point, the winner marked)."""

from __future__ import annotations

import io
import json
from typing import Any

from llmfleet.tune import LAYOUT_ALL, LAYOUT_KEY, point_label

NONE_TEXT = "—"
PNG_SIZE = (1200, 700)
PNG_DPI = 100


def _ms(seconds: float | None) -> str:
    return NONE_TEXT if seconds is None else f"{seconds * 1000:.0f}"


def _rate(value: float | None) -> str:
    return NONE_TEXT if value is None else f"{value:.1f}"


def _share(value: float | None) -> str:
    return NONE_TEXT if value is None else f"{value:.0%}"


def render_markdown(sweep: dict[str, Any]) -> str:
    """The sweep (``run_sweep``'s record) as a markdown report."""
    names = sweep["scenarios"]
    keys = list(sweep["grid"])
    lines = [
        f"# Tuning sweep of {sweep['inventory']} at {sweep['started']}",
        "",
        f"- Grid: {json.dumps(sweep['grid'])} ({len(sweep['points'])} points)",
        f"- Sessions at once: {', '.join(str(count) for count in sweep['sessions'])}; each"
        f" session: {json.dumps(sweep['shape'])}",
        "- Decode tok/s: the speed one request sees (its tokens after the first over the time"
        " after its first); accepted: the share of the tokens speculative decoding proposed that"
        " vLLM accepted (its spec_decode counters).",
        "- Objective: the lowest TTFT p99 at the worst session count, among the points whose"
        f" output tokens/s is within {sweep['throughput_slack']:.0%} of the best at every"
        " session count and, with one session alone in the sweep, whose decode tok/s there is"
        " within as much of the best.",
    ]
    if LAYOUT_KEY in sweep["grid"]:
        lines.append(
            f"- Layout ({LAYOUT_KEY}): Sparks per serving group, each group its own vLLM with"
            f" tensor parallel across its Sparks; {LAYOUT_ALL}: one group across every Spark."
            " Every layout is measured through the same endpoint, the serving gateway in front"
            " of the groups."
        )
    winner = sweep.get("winner")
    if winner is None:
        lines.append("- **No winner**: no point was measured without errors.")
    else:
        lines.append(
            f"- **Winner: point {winner + 1}**, {point_label(sweep['points'][winner]['point'])},"
            f" kept in `{sweep['tuned_file']}`."
        )
    # The acceptance of speculative decoding, where a point decoded speculatively.
    speculative = any(
        (entry or {}).get("acceptance_rate") is not None
        for result in sweep["points"]
        for entry in (result.get("measured") or {}).values()
    )
    header = ["#", *keys]
    for name in names:
        header += [f"{name} TTFT p99 (ms)", f"{name} out tok/s", f"{name} decode tok/s"]
        header += [f"{name} accepted"] if speculative else []
    header.append("verdict")
    lines += ["", "| " + " | ".join(header) + " |", "|" + "|".join(["--:"] * len(header)) + "|"]
    for number, result in enumerate(sweep["points"], start=1):
        cells = [str(number), *(json.dumps(result["point"].get(key)) for key in keys)]
        measured = result.get("measured") or {}
        for name in names:
            entry = measured.get(name) or {}
            cells += [
                _ms(entry.get("ttft_p99_s")),
                _rate(entry.get("output_tokens_per_s")),
                _rate(entry.get("decode_tokens_per_s")),
            ]
            cells += [_share(entry.get("acceptance_rate"))] if speculative else []
        verdict = str(result.get("verdict", NONE_TEXT)).replace("|", "/")
        cells.append(f"**{verdict}**" if number - 1 == winner else verdict)
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Each point's own benchmark report is in its folder beside this file."]
    return "\n".join(lines) + "\n"


def render_png(sweep: dict[str, Any]) -> bytes:
    """Per point: the TTFT p99 of each session count (bars) and the output tokens/s (dots on
    the right axis); the winner's label in bold. Raises ImportError without matplotlib."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415
    from matplotlib.figure import Figure  # noqa: PLC0415

    width, height = PNG_SIZE
    figure = Figure(figsize=(width / PNG_DPI, height / PNG_DPI), dpi=PNG_DPI)
    FigureCanvasAgg(figure)
    axis = figure.subplots()
    rates = axis.twinx()
    points = sweep["points"]
    names = sweep["scenarios"]
    step = 0.8 / max(1, len(names))
    for index, name in enumerate(names):
        values = [
            ((r.get("measured") or {}).get(name) or {}).get("ttft_p99_s") or float("nan")
            for r in points
        ]
        axis.bar(
            [p - 0.4 + step * (index + 0.5) for p in range(len(points))],
            [v * 1000 for v in values],
            step * 0.9,
            label=f"{name} TTFT p99",
            color=f"C{index}",
        )
        rates.plot(
            range(len(points)),
            [
                ((r.get("measured") or {}).get(name) or {}).get("output_tokens_per_s")
                or float("nan")
                for r in points
            ],
            "o",
            color=f"C{index}",
            markeredgecolor="black",
            label=f"{name} out tok/s",
        )
    axis.set_xticks(list(range(len(points))))
    labels = axis.set_xticklabels(
        [f"{n + 1}: {point_label(r['point'])}" for n, r in enumerate(points)],
        rotation=20,
        ha="right",
        fontsize=8,
    )
    if sweep.get("winner") is not None:
        labels[sweep["winner"]].set_fontweight("bold")
    axis.set_ylabel("TTFT p99 (ms)")
    rates.set_ylabel("output tokens/s")
    axis.set_title(f"llmfleet tune {sweep['started']} (bold: the winner)")
    handles, texts = axis.get_legend_handles_labels()
    more, more_texts = rates.get_legend_handles_labels()
    axis.legend(handles + more, texts + more_texts, loc="upper left", fontsize=8)
    axis.grid(axis="y", alpha=0.3)
    figure.subplots_adjust(left=0.07, right=0.93, top=0.92, bottom=0.3)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=PNG_DPI)
    return buffer.getvalue()
