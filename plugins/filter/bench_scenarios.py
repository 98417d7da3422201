"""Filters for the benchmark's matrix of scenarios: which of them the served model can run."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError


def _tokens(scenario, key):
    try:
        return int(scenario[key])
    except (KeyError, TypeError, ValueError):
        raise AnsibleFilterError(
            f"scenario {scenario.get('name', scenario)!r} has {key} "
            f"{scenario.get(key)!r}; expected a whole number of tokens"
        ) from None


def bench_scenarios_fit(scenarios, max_model_len):
    """Split the scenarios by the served context: ``fit`` (those whose ``prompt_tokens +
    max_tokens`` is at most ``max_model_len``, in their order) and ``left_out`` (the names
    of the others, in their order)."""
    limit = int(max_model_len)
    fit, left_out = [], []
    for scenario in scenarios or []:
        if _tokens(scenario, "prompt_tokens") + _tokens(scenario, "max_tokens") <= limit:
            fit.append(scenario)
        else:
            left_out.append(scenario["name"])
    return {"fit": fit, "left_out": left_out}


class FilterModule:
    """Benchmark scenario filters."""

    def filters(self):
        return {"bench_scenarios_fit": bench_scenarios_fit}
