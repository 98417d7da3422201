"""Filters for the benchmark's matrix of scenarios: which of them the served model can run."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.load_generator import (
    SCENARIO_OPTIONS,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.sessions import (
    KIND as SESSION,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.sessions import (
    SESSION_INT_KEYS,
    largest_prompt_tokens,
)

# What llm_benchmark fills in for a key a scenario leaves out.
DEFAULTS = {key: spec["default"] for key, spec in SCENARIO_OPTIONS.items() if "default" in spec}


def _tokens(scenario, key):
    try:
        return int(scenario[key])
    except (KeyError, TypeError, ValueError):
        raise AnsibleFilterError(
            f"scenario {scenario.get('name', scenario)!r} has {key} "
            f"{scenario.get(key)!r}; expected a whole number of tokens"
        ) from None


def _prompt_tokens(scenario):
    """The longest prompt of a scenario: ``prompt_tokens``, or a session's last turn."""
    scenario = {**DEFAULTS, **scenario}
    if scenario.get("kind") != SESSION:
        return _tokens(scenario, "prompt_tokens")
    sizes = {key: _tokens(scenario, key) for key in ("prompt_tokens", *SESSION_INT_KEYS)}
    return largest_prompt_tokens(sizes)


def bench_scenarios_fit(scenarios, max_model_len):
    """Split the scenarios by the served context: ``fit`` (those whose longest prompt plus
    ``max_tokens`` is at most ``max_model_len``, in their order) and ``left_out`` (the names
    of the others, in their order)."""
    limit = int(max_model_len)
    fit, left_out = [], []
    for scenario in scenarios or []:
        if _prompt_tokens(scenario) + _tokens({**DEFAULTS, **scenario}, "max_tokens") <= limit:
            fit.append(scenario)
        else:
            left_out.append(scenario["name"])
    return {"fit": fit, "left_out": left_out}


class FilterModule:
    """Benchmark scenario filters."""

    def filters(self):
        return {"bench_scenarios_fit": bench_scenarios_fit}
