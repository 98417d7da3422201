"""module_utils/_held_memory: the processes of our vLLM and the memory they hold."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.llmfleet.cluster.plugins.module_utils import (
    _held_memory,
    _memory_units,
    _nvidia_query,
)

from tests.unit.plugins.fake_gpus import (
    VLLM_PROCS,
    fake_proc,
)


def test_held_pids_are_the_matching_processes_and_their_descendants(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, VLLM_PROCS)
    assert _held_memory.held_pids(
        "vllm serve --config /etc/llmfleet/vllm/serve.yaml", str(proc)
    ) == [
        400,
        401,
        402,
    ]
    assert (
        _held_memory.pss_bytes([400, 401, 402, 999], str(proc))
        == (1_048_576 + 2_097_152 + 1024) * 1024
    )


def test_a_discrete_gpu_counts_what_nvidia_smi_says_our_processes_use() -> None:
    apps = _nvidia_query.parse_compute_apps(
        "GPU-a, 400, 30000\nGPU-a, 77, 1000\nGPU-b, 401, [N/A]\nbad line\n"
    )
    assert apps == {
        ("GPU-a", 400): 30000 * _memory_units.MIB,
        ("GPU-a", 77): 1000 * _memory_units.MIB,
        ("GPU-b", 401): 0,
    }
    gpus = [{"uuid": "GPU-a", "unified_memory": False}, {"uuid": "GPU-b", "unified_memory": False}]
    _held_memory.add_held(gpus, [400, 401], apps)
    assert [g["held"] for g in gpus] == [30000 * _memory_units.MIB, 0]
