"""Stand-ins for a host's GPUs, shared by the tests of the GPU memory pieces
(tests/unit/plugins/module_utils/) and of cuda_free_memory (tests/unit/plugins/modules/):

* ``FakeNvml`` builds a stand-in for NVIDIA's ``pynvml`` module (nvidia-ml-py): the
  same function names, ``NVMLError`` with ``.value`` and the NVML_ERROR_* codes,
  strings as NVML's ``nvmlErrorString``. Injected through ``sys.modules``.
* ``write_nvidia_smi`` writes an executable ``nvidia-smi`` that prints CSV in the real
  ``--format=csv,noheader,nounits`` shape and refuses any other arguments.
* ``MEMINFO_GB10_*`` are /proc/meminfo files of a DGX Spark (119.67 GiB) right after a
  115 GB model was read (page cache full) and after ``echo 3 > drop_caches``.
* ``fake_proc`` writes a /proc of processes (``VLLM_PROCS``: a vLLM and its children).
"""

from __future__ import annotations

import stat
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

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


def fake_proc(root: Path, processes: dict[int, tuple[int, str, int]]) -> Path:
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
