"""module_utils/_memory/vllm_fit: the arguments of the fit check and the memory it needs."""

from __future__ import annotations

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._memory import units as _memory_units
from ansible_collections.llmfleet.cluster.plugins.module_utils._memory import (
    vllm_fit as _vllm_memory_fit,
)


@pytest.mark.parametrize(
    ("required", "utilization", "problem"),
    [
        (None, 0.0, "gpu_memory_utilization must be greater than 0 and at most 1"),
        (None, 1.5, "got 1.5"),
        (None, -0.2, "got -0.2"),
        (-1.0, None, "required_gib must be 0 or more, got -1"),
        (None, 0.82, None),
        (None, 1.0, None),
        (0.0, None, None),
    ],
)
def test_validate_fit_args(
    required: float | None, utilization: float | None, problem: str | None
) -> None:
    problems = _vllm_memory_fit.validate_fit_args(required, utilization)
    if problem is None:
        assert problems == []
    else:
        assert len(problems) == 1
        assert problem in problems[0]


def test_required_bytes_takes_the_larger_need() -> None:
    total = 100 * _memory_units.GIB
    assert _vllm_memory_fit.required_bytes(total) == (None, None)
    assert _vllm_memory_fit.required_bytes(total, gpu_memory_utilization=0.5) == (
        50 * _memory_units.GIB,
        "gpu_memory_utilization",
    )
    assert _vllm_memory_fit.required_bytes(total, 60, 0.5) == (
        60 * _memory_units.GIB,
        "required_gib",
    )
    assert _vllm_memory_fit.required_bytes(total, 40, 0.5) == (
        50 * _memory_units.GIB,
        "gpu_memory_utilization",
    )
