# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""A benchmark gate (pure): a run held against an earlier one of the same scenarios, as the
upgrade does before and after its switch, and the runs in one line each for the log."""

from __future__ import annotations

from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.comparison import (
    HIGHER,
    METRIC_BY_KEY,
    compare,
    measured,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.format import (
    fmt_metric,
    summary_lines,
)

# What the gate holds a new deployment to: the rate users get and how soon the first token
# comes (the two numbers Claude Code's sessions feel).
GATE_METRICS = ("output_tokens_per_s", "ttft_p50")


def regressions(previous_benchmark, current_benchmark, allowed_pct, metrics=GATE_METRICS):
    """One sentence per way the current run is worse than the previous beyond
    ``allowed_pct`` percent, for every non-warm-up scenario of the previous run: a metric of
    ``metrics`` that moved the wrong way by more than that, more failed requests than before,
    or a scenario the current run lacks or could not measure. Empty: no regression."""
    allowed = float(allowed_pct)
    found = []
    compared = compare(previous_benchmark, current_benchmark)["scenarios"]
    for scenario in measured((previous_benchmark or {}).get("scenarios")):
        name = scenario.get("name")
        if name not in compared:
            found.append("{0}: not in the new run".format(name))
            continue
        errors = compared[name]["errors"]
        if (errors["current"] or 0) > (errors["previous"] or 0):
            found.append(
                "{0}: {1} failed requests (before: {2})".format(
                    name, errors["current"], errors["previous"]
                )
            )
        for key in metrics:
            entry = compared[name][key]
            label, better = METRIC_BY_KEY[key][1], METRIC_BY_KEY[key][4]
            if entry["current"] is None:
                found.append("{0}: no {1} in the new run".format(name, label))
                continue
            change = entry["change_pct"]
            if change is None:
                continue
            if (-change if better == HIGHER else change) > allowed:
                found.append(
                    "{0}: {1} {2} -> {3} ({4:+.1f}%, {5:g}% allowed)".format(
                        name,
                        label,
                        fmt_metric(key, entry["previous"]),
                        fmt_metric(key, entry["current"]),
                        change,
                        allowed,
                    )
                )
    return found


def headline(benchmark):
    """The measured (non-warm-up) scenarios of a run in one line; ``nothing measured``
    without a run."""
    if not isinstance(benchmark, dict):
        return "nothing measured"
    lines = summary_lines({"scenarios": measured(benchmark.get("scenarios"))})
    return "; ".join(lines) or "nothing measured"
