"""Filters over a model and a cluster: how much KV cache vLLM will have per GPU in each
layout (`llmfleet plan` and the validation play use the same numbers), and why the layout
asked for cannot work."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._capacity.inputs import (
    CapacityInputError,
)
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._capacity.plan import (
    plan_capacity,
    plan_problems,
)


def capacity_plan(model_config, cluster, serving=None, checkpoint_bytes=None, unplannable="error"):
    """The plan for serving ``model_config`` (config.json) on ``cluster`` with vLLM's
    ``serving`` settings: per GPU weights, KV bytes per token, KV cache tokens and maximum
    concurrency, for the layout asked for and every valid one, with the assumptions.

    ``unplannable="skip"`` returns None for inputs the planner does not know (a KV cache
    dtype it has no size for, a config.json without the shapes it reads): the validation
    play then leaves the judgement to vLLM rather than refuse what vLLM may accept."""
    if unplannable not in ("error", "skip"):
        raise AnsibleFilterError(
            f"capacity_plan: unplannable is {unplannable!r}; expected error or skip"
        )
    try:
        return plan_capacity(model_config, cluster, serving, checkpoint_bytes)
    except CapacityInputError as error:
        if unplannable == "skip":
            return None
        raise AnsibleFilterError(f"capacity_plan: {error}") from error


def capacity_problems(plan):
    """Why the layout of a plan (from capacity_plan) cannot work, one sentence each, and the
    layouts that would; empty when it fits."""
    if not isinstance(plan, dict) or not isinstance(plan.get("layout"), dict):
        raise AnsibleFilterError(
            f"capacity_problems needs the result of capacity_plan, got {plan!r}"
        )
    return plan_problems(plan)


class FilterModule:
    """Capacity planning filters."""

    def filters(self):
        return {"capacity_plan": capacity_plan, "capacity_problems": capacity_problems}
