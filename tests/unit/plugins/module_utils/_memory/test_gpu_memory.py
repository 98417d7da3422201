"""module_utils/_memory/gpu_memory: the probing order, /proc/meminfo errors, and the whole result:
the vLLM fit check on a GB10 and on H100s, with and without the memory our vLLM holds.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._memory import (
    gpu_memory as _gpu_memory,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._memory import units as _memory_units

from tests.unit.plugins.fake_gpus import (
    GB10,
    GB10_BEFORE_MSG,
    GB10_UUID,
    H100_GPU1_MSG,
    MEMINFO_GB10_AFTER_DROP,
    MEMINFO_GB10_BEFORE_DROP,
    MEMINFO_SPARK_2_SERVING,
    OTHER_RAY_CLUSTER,
    SERVE,
    SMI_APPS_SPARK_1,
    SMI_APPS_SPARK_2,
    SMI_GB10,
    SMI_H100,
    SPARK_1_RAY_PROCS,
    SPARK_2_RAY_PROCS,
    VLLM_PROCS,
    FakeDevice,
    FakeNvml,
    commands,
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
            "held_by": [],
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


# What preflight passes on a Spark of inventory/sparks (container Ray, Ray executor).
RAY_CONTAINER = {"container": "llmfleet-ray", "engine": "docker"}
INSPECT = ["/usr/bin/docker", "container", "inspect", "--format", "{{.State.Pid}}", "llmfleet-ray"]


def _which(name: str) -> str:
    return f"/usr/bin/{name}"


def _serving_spark(
    tmp_path: Path, procs: dict[int, tuple[int, str, int]], apps: str, pid: str = "1000\n"
) -> dict[str, Any]:
    """gather's arguments for a serving Spark as preflight's check makes them."""
    return {
        "run": commands(
            {"--query-gpu": SMI_GB10, "--query-compute-apps": apps, "container inspect": pid}
        ),
        "meminfo_path": str(write_meminfo(tmp_path / "meminfo", MEMINFO_SPARK_2_SERVING)),
        "gpu_memory_utilization": 0.82,
        "held_by": SERVE,
        "which": _which,
        "proc": str(fake_proc(tmp_path / "proc", procs)),
        "reclaim_cache_when_held": True,
    }


def test_rank_1_of_a_serving_ray_cluster_counts_what_vllms_ray_worker_holds(
    tmp_path: Path,
) -> None:
    """spark-2 on the Ray executor runs no `vllm serve`: vLLM's Ray worker there (a child of
    the raylet of our Ray node's container) holds its share of the model, as CUDA memory that
    no process's Pss shows. Counting only `vllm serve`'s processes, and only their Pss, gave
    held_pids [] and 'free 15.26 GiB of 119.67 GiB, vLLM needs 0.82 x 119.67 = 98.13 GiB': the
    second `ansible-playbook site.yml -i inventory/sparks` failed on spark-2."""
    asked = _serving_spark(tmp_path, SPARK_2_RAY_PROCS, SMI_APPS_SPARK_2)
    result = _gather(held_by_ray_node=RAY_CONTAINER, **asked)
    assert "failed" not in result, result["msg"]
    assert result["fits"] is True
    # The worker and its child; not the raylet, the agents, the idle worker, the node itself.
    assert result["held_pids"] == [1100, 1101]
    (gpu,) = result["gpus"]
    # 90931 MiB of CUDA memory (nvidia-smi) + 2004582 KiB Pss = 90.71 GiB.
    assert gpu["held_gib"] == 90.71
    assert gpu["held_by"] == [{"name": "Ray workers of container llmfleet-ray", "held_gib": 90.71}]
    assert result["msg"] == (
        "1 NVIDIA GPU via nvidia-smi: GPU 0 NVIDIA GB10 15.26/119.67 GiB free (unified memory)"
        " + 90.71 GiB our vLLM holds (Ray workers of container llmfleet-ray: 90.71 GiB);"
        " every GPU has the memory asked for"
    )
    assert INSPECT in asked["run"].seen
    assert result["holders"] == [
        {"name": SERVE, "pids": [], "why": f"no process runs {SERVE}"},
        {"name": "Ray workers of container llmfleet-ray", "pids": [1100, 1101], "why": None},
    ]


def test_rank_0_of_a_serving_ray_cluster_counts_vllm_and_its_ray_worker(tmp_path: Path) -> None:
    asked = _serving_spark(tmp_path, SPARK_1_RAY_PROCS, SMI_APPS_SPARK_1)
    result = _gather(held_by_ray_node=RAY_CONTAINER, **asked)
    assert "failed" not in result, result["msg"]
    # `docker exec`'s CLI on the host, vllm serve and EngineCore in the container, the worker.
    assert result["held_pids"] == [1100, 1101, 1900, 2000, 2010]
    assert [h["pids"] for h in result["holders"]] == [[1900, 2000, 2010], [1100, 1101]]
    # vLLM: 0.60 GiB CUDA + 3.33 GiB Pss; the worker as on spark-2. gcs_server, raylet and the
    # dashboard keep running across a vLLM restart: their memory does not count.
    assert result["gpus"][0]["held_by"] == [
        {"name": SERVE, "held_gib": 3.93},
        {"name": "Ray workers of container llmfleet-ray", "held_gib": 90.71},
    ]


def test_a_serving_rank_short_of_memory_names_who_holds_what(tmp_path: Path) -> None:
    asked = _serving_spark(tmp_path, SPARK_1_RAY_PROCS, SMI_APPS_SPARK_1)
    result = _gather(held_by_ray_node=RAY_CONTAINER, **{**asked, "gpu_memory_utilization": 0.95})
    assert result["failed"] is True
    assert result["msg"] == (
        "GPU 0 (NVIDIA GB10): free 15.26 GiB of 119.67 GiB plus 94.64 GiB our vLLM holds until"
        f" it restarts ({SERVE}: 3.93 GiB, Ray workers of container llmfleet-ray: 90.71 GiB),"
        " vLLM needs 0.95 x 119.67 = 113.69 GiB; only 1.75 GiB of the rest is page cache, so"
        " dropping caches is not enough: stop what uses the memory or lower"
        " gpu_memory_utilization"
    )


def test_a_native_ray_node_is_found_by_its_systemd_unit(tmp_path: Path) -> None:
    native = {
        pid: (1, "/opt/vllm/bin/python3 /opt/vllm/bin/ray start --block --address x:6379", pss)
        if pid == 1000
        else (parent, command, pss)
        for pid, (parent, command, pss) in SPARK_2_RAY_PROCS.items()
        if pid != 950
    }
    asked = _serving_spark(tmp_path, native, SMI_APPS_SPARK_2)
    asked["run"] = commands(
        {
            "--query-gpu": SMI_GB10,
            "--query-compute-apps": SMI_APPS_SPARK_2,
            "systemctl show": "1000\n",
        }
    )
    result = _gather(held_by_ray_node={"unit": "llmfleet-ray.service"}, **asked)
    assert "failed" not in result, result["msg"]
    assert result["held_pids"] == [1100, 1101]
    assert result["holders"][1]["name"] == "Ray workers of unit llmfleet-ray.service"
    main_pid = [
        "/usr/bin/systemctl",
        "show",
        "--property=MainPID",
        "--value",
        "llmfleet-ray.service",
    ]
    assert main_pid in asked["run"].seen


def test_another_ray_cluster_on_the_host_is_not_ours(tmp_path: Path) -> None:
    """Someone else's Ray (vLLM on it too, even with our node's command line in a container
    of its own) holds 16 GiB of CUDA memory here: none of it is released when our vLLM
    restarts."""
    asked = _serving_spark(tmp_path, {**SPARK_2_RAY_PROCS, **OTHER_RAY_CLUSTER}, SMI_APPS_SPARK_2)
    result = _gather(held_by_ray_node=RAY_CONTAINER, **asked)
    assert result["held_pids"] == [1100, 1101]
    assert result["gpus"][0]["held_gib"] == 90.71


@pytest.mark.parametrize(
    ("ray_node", "answer", "which", "why"),
    [
        (
            RAY_CONTAINER,
            (1, "", "Error: No such container: llmfleet-ray"),
            _which,
            "container llmfleet-ray is not running",
        ),
        (RAY_CONTAINER, "0\n", _which, "container llmfleet-ray is not running"),
        (RAY_CONTAINER, "1000\n", lambda name: None, "no docker to ask for container llmfleet-ray"),
        (
            {"unit": "llmfleet-ray.service"},
            "0\n",
            _which,
            "unit llmfleet-ray.service is not running",
        ),
    ],
)
def test_a_ray_node_of_ours_that_does_not_run_holds_nothing(
    tmp_path: Path, ray_node: dict[str, str], answer: Any, which: Any, why: str
) -> None:
    """Only the other cluster runs: nothing is ours, and the failure says what was looked for."""
    asked = _serving_spark(tmp_path, {**_host_only(), **OTHER_RAY_CLUSTER}, SMI_APPS_SPARK_2)
    asked["run"] = commands(
        {
            "--query-gpu": SMI_GB10,
            "--query-compute-apps": SMI_APPS_SPARK_2,
            "container inspect": answer,
            "systemctl show": answer,
        }
    )
    result = _gather(held_by_ray_node=ray_node, **{**asked, "which": which})
    assert result["held_pids"] == []
    assert result["failed"] is True
    assert result["msg"].endswith(
        f"; nothing of ours holds memory here (no process runs {SERVE}; {why})"
    )


def test_rank_1_whose_vllm_stopped_holds_nothing(tmp_path: Path) -> None:
    """vLLM's driver ended (rank 0 stopped): its Ray workers ended with it; the node's
    daemons and an idle worker remain, and are not vLLM's."""
    procs = {pid: p for pid, p in SPARK_2_RAY_PROCS.items() if pid not in (1100, 1101)}
    asked = _serving_spark(tmp_path, procs, "")
    result = _gather(held_by_ray_node=RAY_CONTAINER, **asked)
    assert result["held_pids"] == []
    assert result["msg"].endswith(
        "(no process runs vllm serve --config /etc/llmfleet/vllm/serve.yaml;"
        " container llmfleet-ray runs no Ray worker with a task or actor)"
    )


def _host_only() -> dict[int, tuple[int, str, int]]:
    return {pid: p for pid, p in SPARK_2_RAY_PROCS.items() if pid < 1000}
