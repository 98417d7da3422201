# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""The markdown report of a benchmark record: the run, its configuration, the results
table, the comparison with the previous run and the record's other sections (pure)."""

from __future__ import annotations

from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.comparison import (
    METRIC_BY_KEY,
    METRIC_KEYS,
    SAME_WITHIN_PCT,
    finite_number,
    metric_value,
    verdict_counts,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.format import (
    NONE_TEXT,
    flatten,
    fmt_count,
    fmt_metric,
    fmt_ms,
    fmt_pct,
    fmt_rate,
    fmt_s,
    fmt_value,
    scenario_label,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.record import (
    RESERVED_KEYS,
    parse_time,
)


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
    current, previous = finite_number(entry.get("current")), finite_number(entry.get("previous"))
    if current is None:
        return NONE_TEXT
    value = fmt_metric(key, current)
    change = finite_number(entry.get("change_pct"))
    if change is None and previous is not None and previous == current:
        change = 0.0
    if change is not None:
        return "{0} ({1})".format(value, fmt_pct(change))
    if previous == 0:
        return "{0} (was {1})".format(value, fmt_metric(key, previous))
    return "{0} ({1})".format(value, NONE_TEXT)


SESSION_COLUMNS = (
    "turn",
    "ok",
    "errors",
    "prompt tok/request",
    "prefill cached",
    "prefill computed",
    "cache hit",
    "TTFT p50 (ms)",
    "TTFT p99 (ms)",
    "out tok/s",
)


def _hit(ratio):
    ratio = finite_number(ratio)
    return NONE_TEXT if ratio is None else "{0:.1f}%".format(ratio * 100.0)


def session_lines(scenario, compared_turns):
    """The per-turn table of one session scenario, with the previous run's TTFT p99 and
    hit ratio per turn when it ran the same scenario."""
    previous = {entry.get("turn"): entry for entry in compared_turns or []}
    header = list(SESSION_COLUMNS) + (["vs previous (TTFT p99, hit)"] if previous else [])
    rows = []
    for turn in scenario.get("by_turn") or []:
        ttft = turn.get("ttft_s") or {}
        row = [
            fmt_count(turn.get("turn")),
            fmt_count(turn.get("ok")),
            fmt_count(turn.get("errors")),
            fmt_value(turn.get("prompt_tokens_per_request")),
            fmt_count(turn.get("prefill_cached_tokens")),
            fmt_count(turn.get("prefill_computed_tokens")),
            _hit(turn.get("prefix_cache_hit_ratio")),
            fmt_ms(ttft.get("p50")),
            fmt_ms(ttft.get("p99")),
            fmt_rate(turn.get("output_tokens_per_s")),
        ]
        if previous:
            was = previous.get(turn.get("turn")) or {}
            row.append(
                "{0}, {1}".format(
                    fmt_pct((was.get("ttft_p99") or {}).get("change_pct")),
                    _hit((was.get("prefix_cache_hit_ratio") or {}).get("previous")) + " before",
                )
                if was
                else NONE_TEXT
            )
        rows.append(row)
    wall = scenario.get("session_wall_s") or {}
    lines = [
        "### {0}: {1} sessions x {2} turns".format(
            scenario.get("name"),
            fmt_count(scenario.get("sessions")),
            fmt_count(scenario.get("turns")),
        ),
        "",
        "Each request re-sends a shared {0}-token system prompt and {1}-token tool list, the "
        "session's task and its history; each turn adds a tool call and a {2}-token "
        "result. Session wall time p50 {3} s, max {4} s.".format(
            fmt_count(scenario.get("system_tokens")),
            fmt_count(scenario.get("tool_tokens")),
            fmt_count(scenario.get("turn_tokens")),
            fmt_s(wall.get("p50")),
            fmt_s(wall.get("max")),
        ),
        "",
    ]
    align = ["--:"] * len(header)
    lines.extend(_table(header, rows, align))
    return lines


def sessions_section(scenarios, comparison):
    """The section of the session scenarios (no lines without one)."""
    sessions = [s for s in scenarios if s.get("kind") == "session" and s.get("by_turn")]
    if not sessions:
        return []
    lines = [
        "",
        "## Claude Code sessions, turn by turn",
        "",
        "Prefill cached and computed: the prompt tokens vLLM served from its prefix cache "
        "and those it computed, over the turn's requests (its /metrics counters).",
    ]
    for scenario in sessions:
        lines.append("")
        lines.extend(
            session_lines(scenario, (comparison.get("by_turn") or {}).get(scenario.get("name")))
        )
    return lines


DECODE_COLUMNS = (
    "sessions",
    "scenario",
    "decode tok/s",
    "TTFT p50 (ms)",
    "out tok/s",
    "accepted",
    "tokens/step",
)


def decode_section(scenarios):
    """What a Claude Code user feels at one, two, four... sessions at once: each session
    scenario's decode speed per request (with speculative decoding's acceptance, from
    vLLM's counters), by its number of sessions (no lines without a session scenario)."""
    sessions = sorted(
        (s for s in scenarios if s.get("kind") == "session" and s.get("sessions")),
        key=lambda s: (s["sessions"], s.get("name") or ""),
    )
    if not sessions:
        return []
    rows = []
    for scenario in sessions:
        speculative = scenario.get("speculative") or {}
        rows.append(
            [
                fmt_count(scenario.get("sessions")),
                scenario.get("name") or NONE_TEXT,
                fmt_metric("decode_tokens_per_s", metric_value(scenario, "decode_tokens_per_s")),
                fmt_metric("ttft_p50", metric_value(scenario, "ttft_p50")),
                fmt_metric("output_tokens_per_s", metric_value(scenario, "output_tokens_per_s")),
                _hit(speculative.get("acceptance_rate")),
                fmt_value(speculative.get("mean_acceptance_length")),
            ]
        )
    lines = [
        "",
        "## Decode speed by sessions at once",
        "",
        "Decode tok/s: one request's output tokens after the first over its decode time "
        "(what a user watches stream), over the scenario's requests. Accepted and "
        "tokens/step: speculative decoding's proposed tokens vLLM accepted, and the tokens "
        "each step produced (vLLM's own counters; — when it does not decode speculatively).",
        "",
    ]
    lines.extend(_table(DECODE_COLUMNS, rows, ["--:", "---"] + ["--:"] * 5))
    return lines


LLAMA_BENCHY_COLUMNS = (
    "depth",
    "at once",
    "prompt",
    "output",
    "pp tok/s",
    "tg tok/s",
    "tg tok/s each",
    "peak tok/s",
    "TTFR ms",
    "e2e TTFT ms",
)


def _seconds(ms):
    ms = finite_number(ms)
    return None if ms is None else ms / 1000.0


def llama_benchy_section(community):
    """llama-benchy's run (the community's suite, as Spark Arena publishes its GB10 numbers):
    its profile and one row per test, beside our own tables."""
    community = community if isinstance(community, dict) else {}
    lines = [
        "",
        "## llama-benchy (the community's suite)",
        "",
        "llama-benchy {0}, latency mode {1}. Its numbers are comparable with published ones "
        "run with the same profile (Spark Arena's GB10 results): pp tok/s is prefill speed, "
        "tg tok/s generation speed of all requests at once, tg tok/s each one request's. "
        "TTFR and e2e TTFT are llama-benchy's times to the first response and first "
        "token.".format(
            fmt_value(community.get("version")), fmt_value(community.get("latency_mode"))
        ),
        "",
        "- Profile: {0}".format(fmt_value(community.get("profile"))),
    ]
    if community.get("left_out_depths"):
        lines.append(
            "- Depths left out (do not fit the served context): {0}".format(
                ", ".join(str(d) for d in community["left_out_depths"])
            )
        )
    lines.append("")
    rows = [
        [fmt_count(row.get("depth")), fmt_count(row.get("concurrency")),
         fmt_count(row.get("prompt_tokens")), fmt_count(row.get("output_tokens")),
         fmt_rate(row.get("pp_tps")), fmt_rate(row.get("tg_tps")),
         fmt_rate(row.get("tg_tps_per_request")), fmt_rate(row.get("peak_tps")),
         fmt_ms(_seconds(row.get("ttfr_ms"))), fmt_ms(_seconds(row.get("e2e_ttft_ms")))]
        for row in community.get("rows") or [] if isinstance(row, dict)
    ]  # fmt: skip
    if rows:
        lines.extend(_table(LLAMA_BENCHY_COLUMNS, rows, ["--:"] * len(LLAMA_BENCHY_COLUMNS)))
    else:
        lines.append("No test measured.")
    return lines


def groups_section(scenarios):
    """The load each serving group behind a gateway carried, per scenario (no lines for a
    run without groups)."""
    measured = [s for s in scenarios if s.get("by_group")]
    if not measured:
        return []
    names = []
    for scenario in measured:
        names.extend(g["name"] for g in scenario["by_group"] if g["name"] not in names)
    rows = []
    for scenario in measured:
        load = {g["name"]: g for g in scenario["by_group"]}
        cells = [scenario.get("name") or NONE_TEXT]
        for name in names:
            group = load.get(name) or {}
            share = group.get("share")
            cells.append(
                "{0} ({1})".format(group["requests"], "{0:.0%}".format(share))
                if group.get("requests") is not None and share is not None
                else NONE_TEXT
            )
        rows.append(cells)
    lines = [
        "",
        "## Load per serving group",
        "",
        "Requests each group finished during the scenario and its share, from each group's "
        "own vLLM counters (the run went through the serving gateway).",
        "",
    ]
    lines.extend(_table(["scenario", *names], rows, ["---"] + ["--:"] * len(names)))
    return lines


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
    lines.extend(decode_section(scenarios))
    lines.extend(sessions_section(scenarios, comparison))
    lines.extend(groups_section(scenarios))
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
            header = ["scenario"] + [METRIC_BY_KEY[k][1] for k in METRIC_KEYS] + ["verdict"]
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

    lines.extend(other_sections(record))
    return "\n".join(lines) + "\n"


def other_sections(record):
    """The record's other sections: llama-benchy's run as its table, any other as a key/value
    table."""
    lines = []
    if "llama_benchy" in record:
        lines.extend(llama_benchy_section(record["llama_benchy"]))
    for key, value in record.items():
        if key in RESERVED_KEYS or key == "llama_benchy":
            continue
        lines.extend(["", "## {0}".format(key), ""])
        items = flatten(value) if isinstance(value, dict) else [("value", value)]
        if not items:
            lines.append("Nothing recorded.")
            continue
        lines.extend(_table(["key", "value"], [[k, fmt_value(v)] for k, v in items]))
    return lines
