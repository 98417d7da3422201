"""Filters over whole benchmark runs: how a run fell behind an earlier one, and a run in
one line (the upgrade's benchmark gate)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench_gate import (
    headline,
    regressions,
)


def bench_regressions(previous, current, allowed_pct):
    """How the benchmark ``current`` fell behind ``previous`` beyond ``allowed_pct`` percent
    (output tokens/s down, TTFT p50 up, failed requests, scenarios missing), one sentence
    each. No ``previous`` (nothing measured before): nothing to fall behind."""
    try:
        allowed = float(allowed_pct)
    except (TypeError, ValueError):
        allowed = -1.0
    if allowed < 0:
        raise AnsibleFilterError(
            f"allowed_pct is {allowed_pct!r}; expected a percentage, 0 or more"
        )
    if not previous:
        return []
    return regressions(previous, current or {}, allowed)


def bench_headline(benchmark):
    """The run's measured scenarios in one line (``nothing measured`` without a run)."""
    return headline(benchmark)


class FilterModule:
    """Benchmark run filters."""

    def filters(self):
        return {"bench_regressions": bench_regressions, "bench_headline": bench_headline}
