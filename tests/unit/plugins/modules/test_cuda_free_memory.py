"""modules/cuda_free_memory: free GPU memory and the vLLM fit check, in-process and through
`ansible`. NVML is a fake ``pynvml`` put in ``sys.modules``; nvidia-smi is a fake executable."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.modules import cuda_free_memory

from tests.unit.plugins.conftest import ansible_adhoc
from tests.unit.plugins.fake_gpus import (
    GB10,
    GB10_BEFORE_MSG,
    GB10_UUID,
    H100_GPU1_MSG,
    MEMINFO_GB10_AFTER_DROP,
    MEMINFO_GB10_BEFORE_DROP,
    SMI_GB10,
    SMI_H100,
    FakeNvml,
    gb10_nvml,
    h100_nvml,
    write_meminfo,
    write_nvidia_smi,
)

RunModule = Callable[..., tuple[int, dict[str, Any]]]
NO_GPU_MSG = "no NVIDIA GPU found (no NVML library, no nvidia-smi)"
GPU_KEYS = {
    "held_gib",
    "held_by",
    "cache_needed",
    "index",
    "name",
    "uuid",
    "total_gib",
    "free_gib",
    "used_gib",
    "available_gib",
    "page_cache_gib",
    "unified_memory",
    "source",
    "required_gib",
    "fits",
}


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch) -> Callable[[FakeNvml | None], None]:
    """Install a fake pynvml (or make ``import pynvml`` fail with None)."""

    def install(fake: FakeNvml | None) -> None:
        monkeypatch.setitem(sys.modules, "pynvml", fake.module() if fake else None)

    install(None)
    return install


def test_h100_through_nvml(
    nvml: Callable[..., None], run_module: RunModule, tmp_path: Path
) -> None:
    nvml(h100_nvml())
    rc, result = run_module(
        cuda_free_memory,
        {"nvidia_smi_path": str(tmp_path / "absent"), "gpus": [0], "gpu_memory_utilization": 0.9},
    )
    assert rc == 0, result
    assert result["changed"] is False
    assert (result["source"], result["fallback_reason"]) == ("nvml", None)
    assert (result["gpu_count"], result["fits"], result["page_cache_gib"]) == (1, True, None)
    (gpu,) = result["gpus"]
    assert set(gpu) == GPU_KEYS
    assert gpu == {
        "index": 0,
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-9f3c2a6e-5b1d-4c8e-a0f7-3d2b6e1c4a58",
        "total_gib": 79.65,
        "free_gib": 79.11,
        "used_gib": 0.54,
        "available_gib": None,
        "page_cache_gib": None,
        "unified_memory": False,
        "source": "nvml",
        "required_gib": 71.68,
        "held_gib": 0.0,
        "held_by": [],
        "cache_needed": False,
        "fits": True,
    }


def test_h100_busy_gpu_fails_the_task(nvml: Callable[..., None], run_module: RunModule) -> None:
    nvml(h100_nvml())
    rc, result = run_module(cuda_free_memory, {"gpu_memory_utilization": 0.9})
    assert rc == 1
    assert result["failed"] is True
    assert result["msg"] == H100_GPU1_MSG
    assert [g["fits"] for g in result["gpus"]] == [True, False]
    assert result["fits"] is False


def test_gb10_nvml_not_supported_reads_meminfo_and_fails_before_drop(
    nvml: Callable[..., None], run_module: RunModule, tmp_path: Path
) -> None:
    nvml(gb10_nvml())
    meminfo = write_meminfo(tmp_path / "meminfo", MEMINFO_GB10_BEFORE_DROP)
    rc, result = run_module(
        cuda_free_memory, {"meminfo_path": str(meminfo), "gpu_memory_utilization": 0.82}
    )
    assert rc == 1
    assert result["msg"] == GB10_BEFORE_MSG
    assert result["changed"] is False
    assert result["page_cache_gib"] == 107.5
    (gpu,) = result["gpus"]
    assert (gpu["name"], gpu["unified_memory"], gpu["source"]) == (
        GB10,
        True,
        "os-meminfo MemFree (unified memory)",
    )


def test_gb10_after_drop_fits(
    nvml: Callable[..., None], run_module: RunModule, tmp_path: Path
) -> None:
    nvml(gb10_nvml())
    meminfo = write_meminfo(tmp_path / "meminfo", MEMINFO_GB10_AFTER_DROP)
    rc, result = run_module(
        cuda_free_memory, {"meminfo_path": str(meminfo), "gpu_memory_utilization": 0.82}
    )
    assert rc == 0, result
    assert result["fits"] is True
    assert result["gpus"][0]["free_gib"] == 114.2
    assert result["gpus"][0]["uuid"] == GB10_UUID


@pytest.mark.parametrize(
    ("fake", "reason"),
    [
        (FakeNvml(init_error=12), "NVML: NVML Shared Library Not Found"),
        (FakeNvml(init_error=9), "NVML: Driver Not Loaded"),
        (None, "the Python module pynvml (package nvidia-ml-py) is not installed"),
    ],
)
def test_nvml_unusable_falls_back_to_nvidia_smi(
    nvml: Callable[..., None],
    run_module: RunModule,
    tmp_path: Path,
    fake: FakeNvml | None,
    reason: str,
) -> None:
    nvml(fake)
    smi = write_nvidia_smi(tmp_path / "bin", SMI_GB10)
    meminfo = write_meminfo(tmp_path / "meminfo", MEMINFO_GB10_AFTER_DROP)
    rc, result = run_module(
        cuda_free_memory,
        {"nvidia_smi_path": str(smi), "meminfo_path": str(meminfo), "required_gib": 100},
    )
    assert rc == 0, result
    assert result["source"] == "nvidia-smi"
    assert result["fallback_reason"] == reason
    assert result["gpus"][0]["total_gib"] == 119.67
    assert result["gpus"][0]["required_gib"] == 100.0


def test_nvidia_smi_found_on_path(
    nvml: Callable[..., None],
    run_module: RunModule,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_nvidia_smi(tmp_path / "bin", SMI_H100)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    rc, result = run_module(cuda_free_memory, {"method": "nvidia_smi"})
    assert rc == 0, result
    assert result["gpu_count"] == 2
    assert [g["free_gib"] for g in result["gpus"]] == [79.11, 19.53]
    assert [g["used_gib"] for g in result["gpus"]] == [0.0, 59.58]


def test_check_mode_same_result_no_change(
    nvml: Callable[..., None], run_module: RunModule, tmp_path: Path
) -> None:
    smi = write_nvidia_smi(tmp_path / "bin", SMI_H100)
    args = {"nvidia_smi_path": str(smi), "gpu_memory_utilization": 0.2}
    _rc, normal = run_module(cuda_free_memory, args)
    rc, checked = run_module(cuda_free_memory, {**args, "_ansible_check_mode": True})
    assert rc == 0, checked
    assert checked["changed"] is False
    assert checked["gpus"] == normal["gpus"]
    assert checked["fits"] is True


@pytest.mark.parametrize(
    ("utilization", "shown"), [(0, "0"), (1.5, "1.5"), (-0.5, "-0.5"), (1.0001, "1.0001")]
)
def test_bad_gpu_memory_utilization_is_refused(
    nvml: Callable[..., None], run_module: RunModule, utilization: float, shown: str
) -> None:
    rc, result = run_module(cuda_free_memory, {"gpu_memory_utilization": utilization})
    assert rc == 1
    assert result["msg"] == (
        "gpu_memory_utilization must be greater than 0 and at most 1 (the fraction of each "
        "GPU's total memory vLLM takes, as --gpu-memory-utilization), got " + shown
    )


@pytest.mark.parametrize(
    ("ray_node", "said"),
    [
        ({"unit": "llmfleet-ray.service", "container": "llmfleet-ray"}, "mutually exclusive"),
        ({"engine": "podman"}, "one of the following is required: unit, container"),
        ({"container": "llmfleet-ray", "engine": "lxc"}, "value of engine must be one of"),
    ],
)
def test_a_ray_node_must_be_one_unit_or_one_container(
    nvml: Callable[..., None], run_module: RunModule, ray_node: dict[str, str], said: str
) -> None:
    rc, result = run_module(cuda_free_memory, {"held_by_ray_node": ray_node})
    assert rc == 1
    assert said in result["msg"]


def test_a_ray_node_whose_engine_is_absent_holds_nothing(
    nvml: Callable[..., None],
    run_module: RunModule,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    smi = write_nvidia_smi(tmp_path / "bin", SMI_GB10)
    # Only what the fake nvidia-smi needs: no container engine of this machine is run.
    (tmp_path / "bin" / "cat").symlink_to(shutil.which("cat") or "/bin/cat")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    meminfo = write_meminfo(tmp_path / "meminfo", MEMINFO_GB10_AFTER_DROP)
    rc, result = run_module(
        cuda_free_memory,
        {
            "nvidia_smi_path": str(smi),
            "meminfo_path": str(meminfo),
            "gpu_memory_utilization": 0.82,
            "held_by_ray_node": {"container": "llmfleet-ray", "engine": "podman"},
        },
    )
    assert rc == 0, result
    assert result["held_pids"] == []
    assert result["holders"] == [
        {
            "name": "Ray workers of container llmfleet-ray",
            "pids": [],
            "why": "no podman to ask for container llmfleet-ray",
        }
    ]


def test_no_gpu_is_a_clear_success(
    nvml: Callable[..., None], run_module: RunModule, tmp_path: Path
) -> None:
    rc, result = run_module(
        cuda_free_memory,
        {"nvidia_smi_path": str(tmp_path / "absent"), "gpu_memory_utilization": 0.9},
    )
    assert rc == 0, result
    assert result["changed"] is False
    assert result["msg"] == NO_GPU_MSG
    assert (result["gpu_count"], result["gpus"], result["source"], result["fits"]) == (
        0,
        [],
        "none",
        None,
    )
    assert result["fallback_reason"] == (
        "the Python module pynvml (package nvidia-ml-py) is not installed; "
        f"{tmp_path / 'absent'} not found (searched PATH and the sbin directories)"
    )


def test_no_gpu_fails_when_asked_to(
    nvml: Callable[..., None], run_module: RunModule, tmp_path: Path
) -> None:
    rc, result = run_module(
        cuda_free_memory, {"nvidia_smi_path": str(tmp_path / "absent"), "fail_on_no_gpu": True}
    )
    assert rc == 1
    assert result["failed"] is True
    assert result["msg"] == NO_GPU_MSG
    assert result["gpu_count"] == 0


def test_driver_without_gpu_is_no_gpu(
    nvml: Callable[..., None], run_module: RunModule, tmp_path: Path
) -> None:
    smi = write_nvidia_smi(tmp_path / "bin", "No devices were found\n", rc=6)
    rc, result = run_module(cuda_free_memory, {"nvidia_smi_path": str(smi)})
    assert rc == 0, result
    assert result["msg"] == "no NVIDIA GPU found (nvidia-smi: No devices were found)"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            {"method": "nvml"},
            "method=nvml: the Python module pynvml (package nvidia-ml-py) is not installed",
        ),
        ({"method": "nvidia_smi", "smi": "fail"}, "method=nvidia_smi: "),
        ({"gpus": [0, 2], "smi": "h100"}, "GPU index 2 not found; present GPUs: 0, 1"),
    ],
)
def test_failures_are_messages_not_tracebacks(
    nvml: Callable[..., None],
    run_module: RunModule,
    tmp_path: Path,
    args: dict[str, Any],
    message: str,
) -> None:
    args = dict(args)
    smi = args.pop("smi", None)
    if smi == "fail":
        args["nvidia_smi_path"] = str(
            write_nvidia_smi(
                tmp_path / "bin",
                "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
                rc=9,
            )
        )
    elif smi == "h100":
        args["nvidia_smi_path"] = str(write_nvidia_smi(tmp_path / "bin", SMI_H100))
    rc, result = run_module(cuda_free_memory, args)
    assert rc == 1
    assert result["msg"].startswith(message)
    assert "Traceback" not in result["msg"]


# ---------------------------------------------------------------------------
# through the real `ansible` command
# ---------------------------------------------------------------------------
def test_end_to_end_no_gpu_succeeds(tmp_path: Path) -> None:
    # This machine has no GPU. If it ever has nvidia-smi, point at a path that does not exist.
    args = "" if shutil.which("nvidia-smi") is None else f"nvidia_smi_path={tmp_path}/absent"
    status, result = ansible_adhoc("llmfleet.cluster.cuda_free_memory", args)
    assert status == "SUCCESS", result
    assert result["changed"] is False
    assert result["gpu_count"] == 0
    assert result["gpus"] == []
    assert result["source"] == "none"
    assert result["msg"] == NO_GPU_MSG


def test_end_to_end_gb10_before_drop_fails_with_the_numbers(tmp_path: Path) -> None:
    smi = write_nvidia_smi(tmp_path / "bin", SMI_GB10)
    meminfo = write_meminfo(tmp_path / "meminfo", MEMINFO_GB10_BEFORE_DROP)
    status, result = ansible_adhoc(
        "llmfleet.cluster.cuda_free_memory",
        f"method=nvidia_smi nvidia_smi_path={smi} meminfo_path={meminfo} "
        "gpu_memory_utilization=0.82",
    )
    assert status == "FAILED!", result
    assert result["msg"] == GB10_BEFORE_MSG
    assert result["gpus"][0]["page_cache_gib"] == 107.5
