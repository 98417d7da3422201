"""module_utils/_memory/held_memory: the processes of our vLLM and of our Ray node's workers, and
the memory they hold."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.llmfleet.cluster.plugins.module_utils._memory import (
    held_memory as _held_memory,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._memory import (
    nvidia_query as _nvidia_query,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._memory import units as _memory_units

from tests.unit.plugins.fake_gpus import (
    GB10_UUID,
    OTHER_RAY_CLUSTER,
    RAY_CONTAINER_PID,
    SMI_APPS_SPARK_1,
    SPARK_1_RAY_PROCS,
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
    _held_memory.add_held(gpus, [{"name": "vLLM", "pids": [400, 401]}], apps)
    assert [g["held"] for g in gpus] == [30000 * _memory_units.MIB, 0]
    assert [g["held_by"] for g in gpus] == [[("vLLM", 30000 * _memory_units.MIB)], [("vLLM", 0)]]


def test_unified_memory_counts_cuda_memory_and_the_cpu_side(tmp_path: Path) -> None:
    """On a GB10 vLLM's weights and KV cache are CUDA memory taken from the OS's pool,
    which no process's Pss shows (a Ray worker holding 88.80 GiB of it has 1.9 GiB of Pss):
    held is nvidia-smi's per-process figure plus Pss, for each holder."""
    proc = fake_proc(tmp_path, SPARK_1_RAY_PROCS)
    apps = _nvidia_query.parse_compute_apps(SMI_APPS_SPARK_1)
    holders = [{"name": "vLLM", "pids": [2000, 2010]}, {"name": "Ray", "pids": [1100, 1101]}]
    gpus = [{"uuid": GB10_UUID, "unified_memory": True}]
    _held_memory.add_held(gpus, holders, apps, str(proc))
    kib, mib = _memory_units.KIB, _memory_units.MIB
    assert gpus[0]["held_by"] == [
        ("vLLM", 612 * mib + (1_258_291 + 2_202_009) * kib),
        ("Ray", 90931 * mib + (1_992_294 + 12_288) * kib),
    ]
    assert gpus[0]["held"] == sum(held for _holder, held in gpus[0]["held_by"])


def test_our_ray_node_counts_its_busy_workers_only(tmp_path: Path) -> None:
    """Below our node's first process: the raylet's busy workers and their children; not
    gcs_server, the raylet, the dashboard, the agents nor the idle worker (they keep running
    when vLLM restarts), nor another cluster's processes, even under the same command line."""
    processes = _held_memory.read_processes(
        str(fake_proc(tmp_path, {**SPARK_1_RAY_PROCS, **OTHER_RAY_CLUSTER}))
    )
    assert _held_memory.ray_worker_pids(RAY_CONTAINER_PID, processes) == [1100, 1101]
    assert _held_memory.ray_worker_pids(3200, processes) == [3300]
    assert _held_memory.ray_worker_pids(4242, processes) == []
    assert processes[1110] == (1020, "ray::IDLE")
