"""What preflight checks is free on a serving host is what its vLLM will ask for: the profile's
gpu_memory_utilization, or llmfleet_gpu_memory_utilization over every profile. The serve
play of spark_cluster.yml is run on the Spark sample (connected locally) with its roles
switched off and one task that writes the value preflight would get."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .test_image_pulls import run_serve_play


def preflight_utilization(tmp_path: Path, **extra: Any) -> dict[str, float]:
    out = tmp_path / "utilization"
    out.mkdir()
    write = {
        "name": "Write what preflight would check",
        "ansible.builtin.copy": {
            "content": "{{ preflight_gpu_memory_utilization | float | to_json }}",
            "dest": f"{out}/{{{{ inventory_hostname }}}}.json",
            "mode": "0600",
        },
        "delegate_to": "localhost",
    }
    run_serve_play(tmp_path, "spark_cluster.yml", "inventory/sparks", [write], **extra)
    return {path.stem: json.loads(path.read_text()) for path in sorted(out.glob("*.json"))}


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        # The sample's profile, MiniMax M2.7 at its 0.82.
        ({}, 0.82),
        # Qwen3-VL at its 0.70: seed 003 saw 0.75 crash during CUDA graph capture, and the
        # sample's 0.82 for every profile went over it (the memory check too).
        ({"llmfleet_vllm_profile": "qwen3_vl_two_sparks"}, 0.70),
        # The collection-wide value goes over every profile's.
        (
            {
                "llmfleet_vllm_profile": "qwen3_vl_two_sparks",
                "llmfleet_gpu_memory_utilization": 0.6,
            },
            0.6,
        ),
    ],
)
def test_preflight_checks_what_the_profile_asks_for(
    tmp_path: Path, extra: dict[str, Any], expected: float
) -> None:
    assert preflight_utilization(tmp_path, **extra) == {"spark-1": expected, "spark-2": expected}
