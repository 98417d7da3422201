"""capacity_plan and capacity_problems: the planner as the validation play uses it, bad
inputs as filter errors that name the field."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.filter.capacity import (
    FilterModule,
    capacity_plan,
    capacity_problems,
)

from ..plugin_utils._capacity.test_inputs import LAB_MODEL

LAB = {"hosts": ["spark-1", "spark-2"], "device": "cpu", "unified_memory_gib": 8}
LAB_SERVING = {"kv_cache_memory_gib": 1, "max_model_len": 131072}


def test_the_filters_are_registered() -> None:
    assert FilterModule().filters() == {
        "capacity_plan": capacity_plan,
        "capacity_problems": capacity_problems,
    }


def test_the_lab_plan() -> None:
    plan = capacity_plan(LAB_MODEL, LAB, LAB_SERVING)
    assert plan["layout"]["kv_cache_tokens"] == 2_097_152
    assert plan["layout"]["max_concurrency"] == 16.0
    assert capacity_problems(plan) == []


def test_the_checkpoint_size_is_used_for_the_weights() -> None:
    plan = capacity_plan(LAB_MODEL, LAB, LAB_SERVING, 4_787_648)
    assert plan["model"]["weight_bytes"] == 4_787_648
    assert plan["layout"]["weights_per_rank_bytes"] == 4_787_648 // 2


def test_three_lab_nodes_are_refused_with_the_layouts_that_fit() -> None:
    plan = capacity_plan(
        LAB_MODEL, {**LAB, "hosts": ["spark-1", "spark-2", "spark-3"]}, LAB_SERVING
    )
    problems = capacity_problems(plan)
    assert problems[0] == (
        "tensor parallel 3 x pipeline parallel 1 on 3 hosts: tensor parallel 3 does not "
        "divide the model's 2 attention heads"
    )
    assert problems[1].startswith("layouts that fit: tensor parallel 2 x pipeline parallel 1 on 2")


def test_a_bad_input_is_a_filter_error_naming_the_field() -> None:
    with pytest.raises(
        AnsibleFilterError,
        match=r"capacity_plan: serving\.kv_cache_memory_gib is missing; expected "
        r"VLLM_CPU_KVCACHE_SPACE",
    ):
        capacity_plan(LAB_MODEL, LAB, {"max_model_len": 131072})


@pytest.mark.parametrize("plan", [None, {}, {"layout": "tp2"}])
def test_problems_need_a_plan(plan: object) -> None:
    with pytest.raises(AnsibleFilterError, match="needs the result of capacity_plan"):
        capacity_problems(plan)


def test_an_input_the_planner_does_not_know_is_skipped_when_asked() -> None:
    """The validation play leaves a KV cache dtype the planner has no size for to vLLM."""
    serving = {**LAB_SERVING, "kv_cache_dtype": "fp4"}
    with pytest.raises(AnsibleFilterError, match="kv_cache_dtype"):
        capacity_plan(LAB_MODEL, LAB, serving)
    assert capacity_plan(LAB_MODEL, LAB, serving, None, "skip") is None
    with pytest.raises(AnsibleFilterError, match="unplannable is 'ignore'; expected error or skip"):
        capacity_plan(LAB_MODEL, LAB, serving, None, "ignore")
