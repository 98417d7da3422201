"""module_utils/_gpu_memory: NVML, nvidia-smi and /proc/meminfo readings, the vLLM fit check.

The fixtures are shared with tests/unit/plugins/modules/test_cuda_free_memory.py:

* ``FakeNvml`` builds a stand-in for NVIDIA's ``pynvml`` module (nvidia-ml-py): the
  same function names, ``NVMLError`` with ``.value`` and the NVML_ERROR_* codes,
  strings as NVML's ``nvmlErrorString``. Injected through ``sys.modules``.
* ``write_nvidia_smi`` writes an executable ``nvidia-smi`` that prints CSV in the real
  ``--format=csv,noheader,nounits`` shape and refuses any other arguments.
* ``MEMINFO_GB10_*`` are /proc/meminfo files of a DGX Spark (119.67 GiB) right after a
  115 GB model was read (page cache full) and after ``echo 3 > drop_caches``.
"""

from __future__ import annotations

import re
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils import _gpu_memory as gm

MIB = 1 << 20
KIB = 1 << 10

# Written out, not imported: a change of the module's command line must fail a test.
NVIDIA_SMI_QUERY = "--query-gpu=index,name,uuid,memory.total,memory.free,memory.used"
NVIDIA_SMI_FORMAT = "--format=csv,noheader,nounits"

H100 = "NVIDIA H100 80GB HBM3"
H100_UUIDS = (
    "GPU-9f3c2a6e-5b1d-4c8e-a0f7-3d2b6e1c4a58",
    "GPU-1b7e0d4c-8a2f-4e6b-9c3d-5f0a7e2b9d16",
)
GB10 = "NVIDIA GB10"
GB10_UUID = "GPU-2dee1e25-b3b5-007e-2b55-79f2d0f2ebe5"
# What both probes give for a GB10: no framebuffer numbers (unified memory).
GB10_UNIFIED_ROW = {
    "index": 0,
    "name": GB10,
    "uuid": GB10_UUID,
    "total": None,
    "free": None,
    "used": None,
}

# Two H100 80GB as nvidia-smi prints them: 81559 MiB total, 554 MiB reserved by the
# driver (in neither free nor used); GPU 1 has a 59.6 GiB process on it.
SMI_H100 = (
    f"0, {H100}, {H100_UUIDS[0]}, 81559, 81004, 1\n"
    f"1, {H100}, {H100_UUIDS[1]}, 81559, 19998, 61007\n"
)
# A DGX Spark: the memory fields are not available on unified memory.
SMI_GB10 = f"0, {GB10}, {GB10_UUID}, [N/A], [N/A], [N/A]\n"

_MEMINFO_TAIL = """\
SwapCached:            0 kB
Active:          2281220 kB
Inactive:      111209844 kB
Unevictable:       30888 kB
Mlocked:           27792 kB
SwapTotal:      16777212 kB
SwapFree:       16777212 kB
Zswap:                 0 kB
Dirty:               412 kB
Writeback:             0 kB
AnonPages:        581208 kB
Mapped:           401532 kB
Shmem:            262144 kB
KReclaimable:     189932 kB
Slab:             512880 kB
SReclaimable:     189932 kB
SUnreclaim:       322948 kB
KernelStack:       22464 kB
PageTables:        16112 kB
CommitLimit:    79518920 kB
Committed_AS:    4915396 kB
VmallocTotal:   133141626880 kB
VmallocUsed:      104236 kB
HugePages_Total:       0
HugePages_Free:        0
Hugepagesize:       2048 kB
"""
# MemTotal 119.67 GiB. Before: MemFree 11.19 GiB, Cached - Shmem = 107.50 GiB.
MEMINFO_GB10_BEFORE_DROP = (
    "MemTotal:       125483416 kB\n"
    "MemFree:        11733565 kB\n"
    "MemAvailable:   122579000 kB\n"
    "Buffers:          120000 kB\n"
    "Cached:        112984064 kB\n" + _MEMINFO_TAIL
)
# After sync; echo 3 > /proc/sys/vm/drop_caches: MemFree 114.20 GiB, cache 1.21 GiB.
MEMINFO_GB10_AFTER_DROP = (
    "MemTotal:       125483416 kB\n"
    "MemFree:        119750000 kB\n"
    "MemAvailable:   120950000 kB\n"
    "Buffers:            5200 kB\n"
    "Cached:          1530000 kB\n" + _MEMINFO_TAIL
)

GB10_BEFORE_MSG = (
    "GPU 0 (NVIDIA GB10): free 11.19 GiB of 119.67 GiB, vLLM needs 0.82 x 119.67 = 98.13 GiB; "
    "107.50 GiB of the rest is page cache: drop caches (preflight_drop_caches) or lower "
    "gpu_memory_utilization"
)
H100_GPU1_MSG = (
    "GPU 1 (NVIDIA H100 80GB HBM3): free 19.53 GiB of 79.65 GiB, vLLM needs 0.9 x 79.65 = "
    "71.68 GiB: stop what else uses the GPU or lower gpu_memory_utilization"
)


# ---------------------------------------------------------------------------
# fakes shared with the module tests
# ---------------------------------------------------------------------------
NVML_ERROR_STRINGS = {
    3: "Not Supported",
    9: "Driver Not Loaded",
    12: "NVML Shared Library Not Found",
    15: "GPU is lost",
}


@dataclass
class FakeDevice:
    name: str
    uuid: str
    # (total, free, used) in bytes; None: the memory query answers NOT_SUPPORTED
    memory: tuple[int, int, int] | None
    memory_error: int | None = None


@dataclass
class FakeNvml:
    devices: list[FakeDevice] = field(default_factory=list)
    init_error: int | None = None
    name_as_bytes: bool = False
    calls: list[str] = field(default_factory=list)

    def module(self) -> ModuleType:
        """A ``pynvml`` module object backed by this fake."""
        mod = ModuleType("pynvml")

        class NVMLError(Exception):
            def __init__(self, value: int) -> None:
                super().__init__(value)
                self.value = value

            def __str__(self) -> str:
                return NVML_ERROR_STRINGS.get(self.value, f"Unknown Error {self.value}")

        fake = self

        def init() -> None:
            fake.calls.append("init")
            if fake.init_error is not None:
                raise NVMLError(fake.init_error)

        def shutdown() -> None:
            fake.calls.append("shutdown")

        def count() -> int:
            return len(fake.devices)

        def handle(index: int) -> FakeDevice:
            return fake.devices[index]

        def name(dev: FakeDevice) -> str | bytes:
            return dev.name.encode() if fake.name_as_bytes else dev.name

        def uuid(dev: FakeDevice) -> str:
            return dev.uuid

        def memory(dev: FakeDevice) -> Any:
            fake.calls.append(f"memory:{dev.uuid}")
            if dev.memory_error is not None:
                raise NVMLError(dev.memory_error)
            if dev.memory is None:
                raise NVMLError(mod.NVML_ERROR_NOT_SUPPORTED)
            total, free, used = dev.memory
            return SimpleNamespace(total=total, free=free, used=used)

        mod.NVMLError = NVMLError
        mod.NVML_ERROR_NOT_SUPPORTED = 3
        mod.NVML_ERROR_DRIVER_NOT_LOADED = 9
        mod.NVML_ERROR_LIBRARY_NOT_FOUND = 12
        mod.NVML_ERROR_GPU_IS_LOST = 15
        mod.nvmlInit = init
        mod.nvmlShutdown = shutdown
        mod.nvmlDeviceGetCount = count
        mod.nvmlDeviceGetHandleByIndex = handle
        mod.nvmlDeviceGetName = name
        mod.nvmlDeviceGetUUID = uuid
        mod.nvmlDeviceGetMemoryInfo = memory
        return mod


def h100_nvml() -> FakeNvml:
    """NVML's view of SMI_H100: ``used`` includes the 554 MiB reserve (v1 memory info)."""
    return FakeNvml(
        devices=[
            FakeDevice(H100, H100_UUIDS[0], (81559 * MIB, 81004 * MIB, 555 * MIB)),
            FakeDevice(H100, H100_UUIDS[1], (81559 * MIB, 19998 * MIB, 61561 * MIB)),
        ]
    )


def gb10_nvml() -> FakeNvml:
    return FakeNvml(devices=[FakeDevice(GB10, GB10_UUID, None)])


def write_nvidia_smi(directory: Path, stdout: str, rc: int = 0, stderr: str = "") -> Path:
    """An executable ``nvidia-smi`` in ``directory`` printing ``stdout`` and exiting ``rc``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "nvidia-smi.out").write_text(stdout, encoding="utf-8")
    (directory / "nvidia-smi.err").write_text(stderr, encoding="utf-8")
    script = directory / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$#" -ne 2 ] || [ "$1" != "{NVIDIA_SMI_QUERY}" ] '
        f'|| [ "$2" != "{NVIDIA_SMI_FORMAT}" ]; then\n'
        '  echo "fake nvidia-smi: unexpected arguments: $*" >&2\n'
        "  exit 2\n"
        "fi\n"
        f'cat "{directory}/nvidia-smi.out"\n'
        f'cat "{directory}/nvidia-smi.err" >&2\n'
        f"exit {rc}\n",
        encoding="utf-8",
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return script


def write_meminfo(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def runner(stdout: str, rc: int = 0, stderr: str = "") -> Any:
    """A ``run(argv)`` like AnsibleModule.run_command that records its argv."""
    seen: list[list[str]] = []

    def run(argv: list[str]) -> tuple[int, str, str]:
        seen.append(list(argv))
        return rc, stdout, stderr

    run.seen = seen  # type: ignore[attr-defined]
    return run


def no_pynvml() -> None:
    return None


# ---------------------------------------------------------------------------
# /proc/meminfo
# ---------------------------------------------------------------------------
def test_parse_meminfo_reads_kib_as_bytes_and_counts_as_counts() -> None:
    info = gm.parse_meminfo(MEMINFO_GB10_BEFORE_DROP + "garbage line\nNoValue:\n")
    assert info["MemTotal"] == 125483416 * KIB
    assert info["MemFree"] == 11733565 * KIB
    assert info["Shmem"] == 262144 * KIB
    assert info["HugePages_Total"] == 0
    assert "NoValue" not in info


@pytest.mark.parametrize(
    ("text", "free_field", "expected"),
    [
        (
            MEMINFO_GB10_BEFORE_DROP,
            "MemFree",
            {"total": 119.67, "free": 11.19, "used": 108.48, "available": 116.9, "cache": 107.5},
        ),
        (
            MEMINFO_GB10_AFTER_DROP,
            "MemFree",
            {"total": 119.67, "free": 114.2, "used": 5.47, "available": 115.35, "cache": 1.21},
        ),
        (
            MEMINFO_GB10_BEFORE_DROP,
            "MemAvailable",
            {"total": 119.67, "free": 116.9, "used": 2.77, "available": 116.9, "cache": 107.5},
        ),
    ],
)
def test_unified_memory_view(text: str, free_field: str, expected: dict[str, float]) -> None:
    view = gm.unified_memory(gm.parse_meminfo(text), free_field)
    assert {
        "total": gm.to_gib(view["total"]),
        "free": gm.to_gib(view["free"]),
        "used": gm.to_gib(view["used"]),
        "available": gm.to_gib(view["available"]),
        "cache": gm.to_gib(view["page_cache"]),
    } == expected


def test_page_cache_is_cached_minus_shmem_never_negative() -> None:
    assert gm.page_cache_bytes({"Cached": 10 * KIB, "Shmem": 4 * KIB}) == 6 * KIB
    assert gm.page_cache_bytes({"Cached": 4 * KIB, "Shmem": 10 * KIB}) == 0
    assert gm.page_cache_bytes({"Cached": 4 * KIB}) == 4 * KIB


def test_unified_memory_refuses_an_unknown_field() -> None:
    with pytest.raises(ValueError, match="MemFree, MemAvailable"):
        gm.unified_memory(gm.parse_meminfo(MEMINFO_GB10_BEFORE_DROP), "Cached")


def test_read_meminfo_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(gm.GpuMemoryError, match=re.escape(str(tmp_path / "absent"))):
        gm.read_meminfo(str(tmp_path / "absent"))
    partial = write_meminfo(tmp_path / "meminfo", "MemTotal: 1 kB\nMemFree: 1 kB\n")
    with pytest.raises(gm.GpuMemoryError, match="has no MemAvailable, Cached line"):
        gm.read_meminfo(str(partial))


# ---------------------------------------------------------------------------
# nvidia-smi
# ---------------------------------------------------------------------------
def test_parse_nvidia_smi_discrete() -> None:
    rows = gm.parse_nvidia_smi(SMI_H100)
    assert rows == [
        {
            "index": 0,
            "name": H100,
            "uuid": H100_UUIDS[0],
            "total": 81559 * MIB,
            "free": 81004 * MIB,
            "used": 1 * MIB,
        },
        {
            "index": 1,
            "name": H100,
            "uuid": H100_UUIDS[1],
            "total": 81559 * MIB,
            "free": 19998 * MIB,
            "used": 61007 * MIB,
        },
    ]


@pytest.mark.parametrize("na", ["[N/A]", "N/A", "[Not Supported]"])
def test_parse_nvidia_smi_unified_memory_fields_are_none(na: str) -> None:
    (row,) = gm.parse_nvidia_smi(f"\n0, {GB10}, {GB10_UUID}, {na}, {na}, {na}\n\n")
    assert row == GB10_UNIFIED_ROW


def test_parse_nvidia_smi_keeps_a_name_with_a_comma() -> None:
    (row,) = gm.parse_nvidia_smi("3, Odd, Name, GPU-x, 100, 60, 40\n")
    assert (row["index"], row["name"], row["uuid"], row["free"]) == (
        3,
        "Odd, Name",
        "GPU-x",
        60 * MIB,
    )


@pytest.mark.parametrize(
    "text",
    [
        "0, NVIDIA H100, GPU-x, 81559\n",
        "x, NVIDIA H100, GPU-x, 81559, 81004, 1\n",
        "0, NVIDIA H100, GPU-x, 81559, [Insufficient Permissions], 1\n",
    ],
)
def test_parse_nvidia_smi_rejects_what_it_cannot_read(text: str) -> None:
    with pytest.raises(gm.ProbeFailed, match="nvidia-smi"):
        gm.parse_nvidia_smi(text)


def test_query_nvidia_smi_runs_the_documented_command() -> None:
    run = runner(SMI_GB10)
    rows = gm.query_nvidia_smi(run, "/usr/bin/nvidia-smi")
    assert run.seen == [["/usr/bin/nvidia-smi", NVIDIA_SMI_QUERY, NVIDIA_SMI_FORMAT]]
    assert rows[0]["name"] == GB10


def test_query_nvidia_smi_no_devices_is_an_empty_answer() -> None:
    assert gm.query_nvidia_smi(runner("No devices were found\n", rc=6), "nvidia-smi") == []


def test_query_nvidia_smi_driver_failure_says_what_nvidia_smi_said() -> None:
    said = (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running."
    )
    with pytest.raises(gm.ProbeFailed) as info:
        gm.query_nvidia_smi(runner(said + "\n", rc=9), "/usr/bin/nvidia-smi")
    assert str(info.value) == f"/usr/bin/nvidia-smi exited 9: {said}"
    assert info.value.short == f"nvidia-smi failed: {said}"


# ---------------------------------------------------------------------------
# NVML
# ---------------------------------------------------------------------------
def test_load_pynvml_is_optional(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    assert gm.load_pynvml() is None
    fake = gb10_nvml().module()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert gm.load_pynvml() is fake


def test_query_nvml_discrete_gpus_and_shutdown() -> None:
    fake = h100_nvml()
    rows = gm.query_nvml(fake.module())
    assert [(r["index"], r["name"], r["uuid"]) for r in rows] == [
        (0, H100, H100_UUIDS[0]),
        (1, H100, H100_UUIDS[1]),
    ]
    assert (rows[1]["total"], rows[1]["free"], rows[1]["used"]) == (
        81559 * MIB,
        19998 * MIB,
        61561 * MIB,
    )
    assert fake.calls[0] == "init"
    assert fake.calls[-1] == "shutdown"


def test_query_nvml_not_supported_memory_is_unified() -> None:
    fake = gb10_nvml()
    fake.name_as_bytes = True  # older nvidia-ml-py releases return bytes
    (row,) = gm.query_nvml(fake.module())
    assert row == GB10_UNIFIED_ROW


@pytest.mark.parametrize(
    ("fake", "message", "short"),
    [
        (FakeNvml(init_error=12), "NVML: NVML Shared Library Not Found", "no NVML library"),
        (FakeNvml(init_error=9), "NVML: Driver Not Loaded", "NVML: Driver Not Loaded"),
        (
            FakeNvml(devices=[FakeDevice(H100, H100_UUIDS[0], None, memory_error=15)]),
            "NVML: GPU is lost",
            "NVML: GPU is lost",
        ),
    ],
)
def test_query_nvml_other_errors_fail_the_probe(fake: FakeNvml, message: str, short: str) -> None:
    with pytest.raises(gm.ProbeFailed) as info:
        gm.query_nvml(fake.module())
    assert str(info.value) == message
    assert info.value.short == short
    if fake.init_error is None:
        assert fake.calls[-1] == "shutdown"


# ---------------------------------------------------------------------------
# probing order
# ---------------------------------------------------------------------------
def test_auto_prefers_nvml() -> None:
    fake = h100_nvml().module()
    run = runner(SMI_H100)
    rows, source, failures = gm.probe("auto", lambda: fake, "/usr/bin/nvidia-smi", run)
    assert (source, failures, len(rows)) == ("nvml", [], 2)
    assert run.seen == []


def test_auto_falls_back_to_nvidia_smi_and_says_why() -> None:
    fake = FakeNvml(init_error=9).module()
    rows, source, failures = gm.probe("auto", lambda: fake, "/usr/bin/nvidia-smi", runner(SMI_GB10))
    assert source == "nvidia-smi"
    assert [str(f) for f in failures] == ["NVML: Driver Not Loaded"]
    assert rows[0]["uuid"] == GB10_UUID


def test_auto_with_nothing_is_no_gpu() -> None:
    rows, source, failures = gm.probe("auto", no_pynvml, None, runner(""), "nvidia-smi")
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
    with pytest.raises(gm.GpuMemoryError) as info:
        gm.probe(method, loader, path, runner(SMI_H100))
    assert str(info.value) == message


def test_explicit_nvidia_smi_does_not_touch_nvml() -> None:
    def loader() -> ModuleType:
        raise AssertionError("NVML must not be loaded for method=nvidia_smi")

    rows, source, _failures = gm.probe("nvidia_smi", loader, "nvidia-smi", runner(SMI_H100))
    assert (source, len(rows)) == ("nvidia-smi", 2)


# ---------------------------------------------------------------------------
# fit check
# ---------------------------------------------------------------------------
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
    problems = gm.validate_fit_args(required, utilization)
    if problem is None:
        assert problems == []
    else:
        assert len(problems) == 1
        assert problem in problems[0]


def test_required_bytes_takes_the_larger_need() -> None:
    total = 100 * gm.GIB
    assert gm.required_bytes(total) == (None, None)
    assert gm.required_bytes(total, gpu_memory_utilization=0.5) == (
        50 * gm.GIB,
        "gpu_memory_utilization",
    )
    assert gm.required_bytes(total, 60, 0.5) == (60 * gm.GIB, "required_gib")
    assert gm.required_bytes(total, 40, 0.5) == (50 * gm.GIB, "gpu_memory_utilization")


def _gather(**kwargs: Any) -> dict[str, Any]:
    kwargs.setdefault("nvml_loader", no_pynvml)
    kwargs.setdefault("nvidia_smi_path", "/usr/bin/nvidia-smi")
    return gm.gather(**kwargs)


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
    fake = FakeNvml(devices=[FakeDevice(GB10, GB10_UUID, (1 * gm.GIB, 1 * gm.GIB, 0))])
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
    with pytest.raises(gm.GpuMemoryError, match="GPU index 4 not found; present GPUs: 0, 1"):
        _gather(run=runner(SMI_H100), gpus=[0, 4])


def test_unified_memory_without_meminfo_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(gm.GpuMemoryError, match="unified-memory GPU"):
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

    with pytest.raises(gm.GpuMemoryError, match=r"got 1\.5"):
        gm.gather(nvml_loader=loader, gpu_memory_utilization=1.5)


# ---------------------------------------------------------------------------
# memory our own vLLM holds (held_by): counted as free when it is about to restart
# ---------------------------------------------------------------------------
def _fake_proc(root: Path, processes: dict[int, tuple[int, str, int]]) -> Path:
    """``{pid: (ppid, cmdline, pss_kib)}`` as /proc/PID/{stat,cmdline,smaps_rollup}."""
    for pid, (ppid, cmdline, pss) in processes.items():
        folder = root / str(pid)
        folder.mkdir(parents=True)
        (folder / "stat").write_text(f"{pid} (py (thread) x) S {ppid} 1 1 0\n")
        (folder / "cmdline").write_text(cmdline.replace(" ", "\0") + "\0")
        (folder / "smaps_rollup").write_text(f"Rss: {pss * 2} kB\nPss: {pss} kB\n")
    (root / "self").mkdir()
    return root


VLLM_PROCS = {
    1: (0, "/sbin/init", 10_000),
    400: (
        1,
        "/opt/vllm/bin/python3 /opt/vllm/bin/vllm serve --config /etc/llmfleet/vllm/serve.yaml",
        1_048_576,
    ),
    401: (400, "VLLM::EngineCore", 2_097_152),
    402: (401, "python3 -c from multiprocessing.resource_tracker import main", 1024),
    500: (1, "/opt/vllm/bin/ray start --block", 524_288),
}


def test_held_pids_are_the_matching_processes_and_their_descendants(tmp_path: Path) -> None:
    proc = _fake_proc(tmp_path, VLLM_PROCS)
    assert gm.held_pids("vllm serve --config /etc/llmfleet/vllm/serve.yaml", str(proc)) == [
        400,
        401,
        402,
    ]
    assert gm.pss_bytes([400, 401, 402, 999], str(proc)) == (1_048_576 + 2_097_152 + 1024) * 1024


def test_a_restarting_vllm_counts_what_it_holds_as_free(tmp_path: Path) -> None:
    proc = _fake_proc(tmp_path / "proc", VLLM_PROCS)
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
    proc = _fake_proc(tmp_path / "proc", VLLM_PROCS)
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


def test_a_discrete_gpu_counts_what_nvidia_smi_says_our_processes_use() -> None:
    apps = gm.parse_compute_apps(
        "GPU-a, 400, 30000\nGPU-a, 77, 1000\nGPU-b, 401, [N/A]\nbad line\n"
    )
    assert apps == {("GPU-a", 400): 30000 * gm.MIB, ("GPU-a", 77): 1000 * gm.MIB, ("GPU-b", 401): 0}
    gpus = [{"uuid": "GPU-a", "unified_memory": False}, {"uuid": "GPU-b", "unified_memory": False}]
    gm.add_held(gpus, [400, 401], apps)
    assert [g["held"] for g in gpus] == [30000 * gm.MIB, 0]
