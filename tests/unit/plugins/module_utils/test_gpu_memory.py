"""module_utils/_gpu_memory: the probing order, /proc/meminfo errors, and the whole result:
the vLLM fit check on a GB10 and on H100s, with and without the memory our vLLM holds.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils import _gpu_memory, _memory_units

from tests.unit.plugins.fake_gpus import (
    GB10,
    GB10_BEFORE_MSG,
    GB10_UUID,
    H100_GPU1_MSG,
    MEMINFO_GB10_AFTER_DROP,
    MEMINFO_GB10_BEFORE_DROP,
    SMI_GB10,
    SMI_H100,
    VLLM_PROCS,
    FakeDevice,
    FakeNvml,
    fake_proc,
    gb10_nvml,
    h100_nvml,
    no_pynvml,
    runner,
    write_meminfo,
)


def test_read_meminfo_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(_gpu_memory.GpuMemoryError, match=re.escape(str(tmp_path / "absent"))):
        _gpu_memory.read_meminfo(str(tmp_path / "absent"))
    partial = write_meminfo(tmp_path / "meminfo", "MemTotal: 1 kB\nMemFree: 1 kB\n")
    with pytest.raises(_gpu_memory.GpuMemoryError, match="has no MemAvailable, Cached line"):
        _gpu_memory.read_meminfo(str(partial))


def test_auto_prefers_nvml() -> None:
    fake = h100_nvml().module()
    run = runner(SMI_H100)
    rows, source, failures = _gpu_memory.probe("auto", lambda: fake, "/usr/bin/nvidia-smi", run)
    assert (source, failures, len(rows)) == ("nvml", [], 2)
    assert run.seen == []


def test_auto_falls_back_to_nvidia_smi_and_says_why() -> None:
    fake = FakeNvml(init_error=9).module()
    rows, source, failures = _gpu_memory.probe(
        "auto", lambda: fake, "/usr/bin/nvidia-smi", runner(SMI_GB10)
    )
    assert source == "nvidia-smi"
    assert [str(f) for f in failures] == ["NVML: Driver Not Loaded"]
    assert rows[0]["uuid"] == GB10_UUID


def test_auto_with_nothing_is_no_gpu() -> None:
    rows, source, failures = _gpu_memory.probe("auto", no_pynvml, None, runner(""), "nvidia-smi")
    assert (rows, source) == ([], "none")
    assert [f.short for f in failures] == ["no NVML library", "no nvidia-smi"]


@pytest.mark.parametrize(
    ("method", "loader", "path", "message"),
    [
        (
            "nvml",
            no_pynvml,
            "/usr/bin/nvidia-smi",
            "method=nvml: the Python module pynvml (package nvidia-ml-py) is not installed",
        ),
        (
            "nvml",
            lambda: FakeNvml(init_error=12).module(),
            "/usr/bin/nvidia-smi",
            "method=nvml: NVML: NVML Shared Library Not Found",
        ),
        (
            "nvidia_smi",
            lambda: h100_nvml().module(),
            None,
            "method=nvidia_smi: nvidia-smi not found (searched PATH and the sbin directories)",
        ),
    ],
)
def test_an_explicit_method_that_fails_is_an_error(
    method: str, loader: Any, path: str | None, message: str
) -> None:
    with pytest.raises(_gpu_memory.GpuMemoryError) as info:
        _gpu_memory.probe(method, loader, path, runner(SMI_H100))
    assert str(info.value) == message


def test_explicit_nvidia_smi_does_not_touch_nvml() -> None:
    def loader() -> ModuleType:
        raise AssertionError("NVML must not be loaded for method=nvidia_smi")

    rows, source, _failures = _gpu_memory.probe(
        "nvidia_smi", loader, "nvidia-smi", runner(SMI_H100)
    )
    assert (source, len(rows)) == ("nvidia-smi", 2)


def _gather(**kwargs: Any) -> dict[str, Any]:
    kwargs.setdefault("nvml_loader", no_pynvml)
    kwargs.setdefault("nvidia_smi_path", "/usr/bin/nvidia-smi")
    return _gpu_memory.gather(**kwargs)


def test_gb10_before_dropping_caches_fails_in_vllms_terms(tmp_path: Path) -> None:
    meminfo = write_meminfo(tmp_path / "meminfo", MEMINFO_GB10_BEFORE_DROP)
    fake = gb10_nvml().module()
    result = _gather(
        nvml_loader=lambda: fake,
        meminfo_path=str(meminfo),
        gpu_memory_utilization=0.82,
    )
    assert result["failed"] is True
    assert result["msg"] == GB10_BEFORE_MSG
    assert result["source"] == "nvml"
    assert result["fits"] is False
    assert result["page_cache_gib"] == 107.5
    assert result["gpus"] == [
        {
            "index": 0,
            "name": GB10,
            "uuid": GB10_UUID,
            "total_gib": 119.67,
            "free_gib": 11.19,
            "used_gib": 108.48,
            "available_gib": 116.9,
            "page_cache_gib": 107.5,
            "unified_memory": True,
            "source": "os-meminfo MemFree (unified memory)",
            "required_gib": 98.13,
            "held_gib": 0.0,
            "fits": False,
            "cache_needed": False,
        }
    ]


def test_gb10_after_dropping_caches_fits(tmp_path: Path) -> None:
    meminfo = write_meminfo(tmp_path / "meminfo", MEMINFO_GB10_AFTER_DROP)
    result = _gather(
        run=runner(SMI_GB10),
        meminfo_path=str(meminfo),
        gpu_memory_utilization=0.82,
    )
    assert "failed" not in result
    assert result["fits"] is True
    assert result["source"] == "nvidia-smi"
    assert result["fallback_reason"] == (
        "the Python module pynvml (package nvidia-ml-py) is not installed"
    )
    (gpu,) = result["gpus"]
    assert (gpu["free_gib"], gpu["required_gib"], gpu["page_cache_gib"]) == (114.2, 98.13, 1.21)
    assert result["msg"] == (
        "1 NVIDIA GPU via nvidia-smi: GPU 0 NVIDIA GB10 114.20/119.67 GiB free (unified memory); "
        "every GPU has the memory asked for"
    )


def test_gb10_when_dropping_caches_would_not_be_enough(tmp_path: Path) -> None:
    meminfo = write_meminfo(tmp_path / "meminfo", MEMINFO_GB10_BEFORE_DROP)
    result = _gather(run=runner(SMI_GB10), meminfo_path=str(meminfo), required_gib=119)
    assert result["msg"] == (
        "GPU 0 (NVIDIA GB10): free 11.19 GiB of 119.67 GiB, needs 119.00 GiB (required_gib); "
        "only 107.50 GiB of the rest is page cache, so dropping caches is not enough: stop what "
        "uses the memory or lower required_gib"
    )


def test_gb10_with_memavailable_counts_the_cache_as_free(tmp_path: Path) -> None:
    meminfo = write_meminfo(tmp_path / "meminfo", MEMINFO_GB10_BEFORE_DROP)
    result = _gather(
        run=runner(SMI_GB10),
        meminfo_path=str(meminfo),
        gpu_memory_utilization=0.82,
        unified_free="MemAvailable",
    )
    assert result["fits"] is True
    assert result["gpus"][0]["free_gib"] == 116.9
    assert result["gpus"][0]["source"] == "os-meminfo MemAvailable (unified memory)"


def test_a_gb10_is_unified_even_if_the_driver_reports_numbers(tmp_path: Path) -> None:
    meminfo = write_meminfo(tmp_path / "meminfo", MEMINFO_GB10_AFTER_DROP)
    fake = FakeNvml(
        devices=[FakeDevice(GB10, GB10_UUID, (1 * _memory_units.GIB, 1 * _memory_units.GIB, 0))]
    )
    result = _gather(nvml_loader=fake.module, meminfo_path=str(meminfo))
    assert result["gpus"][0]["unified_memory"] is True
    assert result["gpus"][0]["total_gib"] == 119.67


def test_h100_pair_one_busy_fails_naming_only_that_gpu(tmp_path: Path) -> None:
    result = _gather(
        nvml_loader=h100_nvml().module,
        meminfo_path=str(tmp_path / "not-read"),
        gpu_memory_utilization=0.9,
    )
    assert result["msg"] == H100_GPU1_MSG
    assert [g["fits"] for g in result["gpus"]] == [True, False]
    assert [g["required_gib"] for g in result["gpus"]] == [71.68, 71.68]
    assert result["gpus"][0]["free_gib"] == 79.11
    assert result["gpus"][0]["used_gib"] == 0.54
    assert result["gpus"][0]["unified_memory"] is False
    assert result["gpus"][0]["available_gib"] is None
    assert result["page_cache_gib"] is None  # no unified memory: /proc/meminfo not read


def test_every_misfit_is_named(tmp_path: Path) -> None:
    result = _gather(run=runner(SMI_H100), required_gib=80)
    assert result["msg"].split(" | ") == [
        "GPU 0 (NVIDIA H100 80GB HBM3): free 79.11 GiB of 79.65 GiB, needs 80.00 GiB "
        "(required_gib): stop what else uses the GPU or lower required_gib",
        "GPU 1 (NVIDIA H100 80GB HBM3): free 19.53 GiB of 79.65 GiB, needs 80.00 GiB "
        "(required_gib): stop what else uses the GPU or lower required_gib",
    ]


def test_no_check_asked_reports_null_fits() -> None:
    result = _gather(run=runner(SMI_H100))
    assert result["fits"] is None
    assert [g["required_gib"] for g in result["gpus"]] == [None, None]
    assert result["msg"] == (
        "2 NVIDIA GPUs via nvidia-smi: GPU 0 NVIDIA H100 80GB HBM3 79.11/79.65 GiB free, "
        "GPU 1 NVIDIA H100 80GB HBM3 19.53/79.65 GiB free"
    )


def test_gpu_filter_and_unknown_index() -> None:
    result = _gather(run=runner(SMI_H100), gpus=[0], gpu_memory_utilization=0.9)
    assert result["gpu_count"] == 1
    assert result["fits"] is True
    with pytest.raises(
        _gpu_memory.GpuMemoryError, match="GPU index 4 not found; present GPUs: 0, 1"
    ):
        _gather(run=runner(SMI_H100), gpus=[0, 4])


def test_unified_memory_without_meminfo_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(_gpu_memory.GpuMemoryError, match="unified-memory GPU"):
        _gather(run=runner(SMI_GB10), meminfo_path=str(tmp_path / "absent"))


@pytest.mark.parametrize(
    ("kwargs", "msg"),
    [
        (
            {"nvidia_smi_path": None, "run": runner("")},
            "no NVIDIA GPU found (no NVML library, no nvidia-smi)",
        ),
        (
            {"run": runner("No devices were found\n", rc=6)},
            "no NVIDIA GPU found (nvidia-smi: No devices were found)",
        ),
        (
            {"nvml_loader": FakeNvml().module, "run": runner(SMI_H100)},
            "no NVIDIA GPU found (NVML reports 0 devices)",
        ),
    ],
)
def test_no_gpu_is_a_result(kwargs: dict[str, Any], msg: str) -> None:
    result = _gather(gpu_memory_utilization=0.9, **kwargs)
    assert result["msg"] == msg
    assert (result["gpu_count"], result["gpus"], result["fits"]) == (0, [], None)
    assert "failed" not in result


def test_bad_utilization_is_refused_before_probing() -> None:
    def loader() -> ModuleType:
        raise AssertionError("nothing must be probed with bad arguments")

    with pytest.raises(_gpu_memory.GpuMemoryError, match=r"got 1\.5"):
        _gpu_memory.gather(nvml_loader=loader, gpu_memory_utilization=1.5)


def test_a_restarting_vllm_counts_what_it_holds_as_free(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc", VLLM_PROCS)
    meminfo = tmp_path / "meminfo"
    # 8 GiB, 5 GiB free: 0.75 x 8 = 6 GiB does not fit, with the 3 GiB vLLM holds it does.
    meminfo.write_text(
        "MemTotal: 8388608 kB\nMemFree: 5242880 kB\nMemAvailable: 5242880 kB\n"
        "Cached: 0 kB\nShmem: 0 kB\n"
    )
    alone = _gather(run=runner(SMI_GB10), meminfo_path=str(meminfo), gpu_memory_utilization=0.75)
    assert alone["failed"] is True
    held = _gather(
        run=runner(SMI_GB10),
        meminfo_path=str(meminfo),
        gpu_memory_utilization=0.75,
        held_by="vllm serve --config /etc/llmfleet/vllm/serve.yaml",
        proc=str(proc),
    )
    assert "failed" not in held
    assert held["fits"] is True
    assert held["held_pids"] == [400, 401, 402]
    assert held["gpus"][0]["held_gib"] == 3.0


def test_a_serving_gb10_short_only_by_page_cache_fits_once_it_is_dropped_before_restart(
    tmp_path: Path,
) -> None:
    proc = fake_proc(tmp_path / "proc", VLLM_PROCS)
    meminfo = tmp_path / "meminfo"
    # 8 GiB, 2 GiB free, 3 GiB held by vLLM, 2.5 GiB reclaimable page cache: 6 GiB asked.
    meminfo.write_text(
        "MemTotal: 8388608 kB\nMemFree: 2097152 kB\nMemAvailable: 4718592 kB\n"
        "Cached: 2883584 kB\nShmem: 262144 kB\n"
    )
    asked = {
        "run": runner(SMI_GB10),
        "meminfo_path": str(meminfo),
        "gpu_memory_utilization": 0.75,
        "held_by": "vllm serve --config /etc/llmfleet/vllm/serve.yaml",
        "proc": str(proc),
    }
    strict = _gather(**asked)
    assert strict["failed"] is True
    assert strict["drop_cache_before_restart"] is False
    assert "plus 3.00 GiB our vLLM holds until it restarts" in strict["msg"]
    assert "2.50 GiB of the rest is page cache: drop caches" in strict["msg"]
    reclaimed = _gather(reclaim_cache_when_held=True, **asked)
    assert "failed" not in reclaimed
    assert reclaimed["fits"] is True
    assert reclaimed["drop_cache_before_restart"] is True
    assert reclaimed["gpus"][0]["cache_needed"] is True
    assert reclaimed["msg"].endswith(
        "every GPU has the memory asked for once 2.50 GiB of page cache is dropped"
        " before our vLLM restarts"
    )
    # Without a vLLM of ours the page cache is not counted: preflight drops it itself.
    idle = _gather(
        run=runner(SMI_GB10),
        meminfo_path=str(meminfo),
        gpu_memory_utilization=0.75,
        reclaim_cache_when_held=True,
    )
    assert idle["failed"] is True
    assert idle["drop_cache_before_restart"] is False
