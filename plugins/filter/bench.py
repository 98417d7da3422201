"""Filters over whole benchmark runs: how a run fell behind an earlier one, a run in one
line (the upgrade's benchmark gate), and llama-benchy's run beside ours (its plan, its
results)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._bench import llama_benchy
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._bench.gate import (
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


def bench_llama_benchy_plan(profile, max_model_len):
    """A llama-benchy profile fitted to the served context: the profile with the depths that
    fit, those left out, the requests it sends and llama-benchy's options for it; or, for a
    profile that cannot run, why (``problems``) and nothing else."""
    problems = llama_benchy.profile_problems(profile)
    if problems:
        return {"problems": problems, "profile": None, "left_out": [], "requests": 0, "argv": []}
    try:
        length = int(max_model_len)
    except (TypeError, ValueError) as error:
        raise AnsibleFilterError(
            f"max_model_len is {max_model_len!r}; expected a number of tokens"
        ) from error
    fitted = llama_benchy.plan(profile, length)
    return dict(fitted, problems=[], argv=llama_benchy.arguments(fitted["profile"]))


def bench_llama_benchy_summary(results, fitted=None):
    """What the report keeps of llama-benchy's JSON results: version, profile, one row per
    measured test."""
    return llama_benchy.summary(results, fitted)


class FilterModule:
    """Benchmark run filters."""

    def filters(self):
        return {
            "bench_regressions": bench_regressions,
            "bench_headline": bench_headline,
            "bench_llama_benchy_plan": bench_llama_benchy_plan,
            "bench_llama_benchy_summary": bench_llama_benchy_summary,
        }
