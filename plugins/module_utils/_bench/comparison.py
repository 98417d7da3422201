# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Two benchmark runs compared metric by metric (pure).

A benchmark is the dict the module ``llm_benchmark`` returns; any value may be None
(a scenario without a successful request has no statistics). Every non-warm-up
scenario found in both runs gets, per metric of METRICS, the previous and current
values, the change in percent and a verdict - better, worse, or same within
SAME_WITHIN_PCT - knowing whether lower or higher is better.
"""

from __future__ import annotations

import math

# Changes within this many percent (either way) are "same".
SAME_WITHIN_PCT = 2.0

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
METRIC_BY_KEY = {m[0]: m for m in METRICS}


def finite_number(value):
    """value if it is a finite int/float (not bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def metric_value(scenario, key):
    """The value of one of METRICS for a scenario (seconds for times); None if absent."""
    _key, _label, field, stat, _better, _kind = METRIC_BY_KEY[key]
    value = scenario.get(field)
    if stat is not None:
        value = value.get(stat) if isinstance(value, dict) else None
    return finite_number(value)


def percent_change(previous, current):
    """(current - previous) / previous in percent, rounded to 2 decimals; None when either
    is None or previous is 0."""
    previous, current = finite_number(previous), finite_number(current)
    if previous is None or current is None or previous == 0:
        return None
    return round((current - previous) * 100.0 / abs(previous), 2)


def verdict(previous, current, better, within_pct=SAME_WITHIN_PCT):
    """``better``, ``worse`` or ``same`` (change within ``within_pct`` percent) for a move
    from previous to current, where ``better`` is LOWER (times, errors) or HIGHER (rates).
    From 0 any move counts; None when either value is missing."""
    previous, current = finite_number(previous), finite_number(current)
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
    current run's order), and ``by_turn`` ({name: ``compare_turns``}) when session scenarios
    were in both. No previous benchmark: no scenarios."""
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
        turns = compare_turns(before[name], scenario)
        if turns:
            result.setdefault("by_turn", {})[name] = turns
    return result


# (key, stats key, stat, better direction): what a session scenario compares per turn.
TURN_METRICS = (
    ("ttft_p99", "ttft_s", "p99", LOWER),
    ("prefix_cache_hit_ratio", "prefix_cache_hit_ratio", None, HIGHER),
)


def turn_value(turn, key):
    """One of TURN_METRICS of a session scenario's turn entry; None if absent."""
    field, stat = {k: (f, s) for k, f, s, _better in TURN_METRICS}[key]
    value = turn.get(field) if isinstance(turn, dict) else None
    if stat is not None:
        value = value.get(stat) if isinstance(value, dict) else None
    return finite_number(value)


def compare_turns(previous_scenario, scenario):
    """Per turn index of two runs of one session scenario: ``[{"turn": n, metric:
    {previous, current, change_pct, verdict}}]`` over TURN_METRICS (empty when either run
    has no turns)."""
    before = {
        t.get("turn"): t for t in previous_scenario.get("by_turn") or [] if isinstance(t, dict)
    }
    compared = []
    for turn in scenario.get("by_turn") or []:
        if not isinstance(turn, dict) or turn.get("turn") not in before:
            continue
        entry = {"turn": turn["turn"]}
        for key, _field, _stat, better in TURN_METRICS:
            old, new = turn_value(before[turn["turn"]], key), turn_value(turn, key)
            entry[key] = {
                "previous": old,
                "current": new,
                "change_pct": percent_change(old, new),
                "verdict": verdict(old, new, better),
            }
        compared.append(entry)
    return compared


def verdict_counts(metrics):
    """``{"better": n, "worse": n, "same": n}`` over one scenario's compared metrics."""
    counts = {"better": 0, "worse": 0, "same": 0}
    for entry in metrics.values():
        if entry.get("verdict") in counts:
            counts[entry["verdict"]] += 1
    return counts
