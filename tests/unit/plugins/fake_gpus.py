"""Stand-ins for a host's GPUs, shared by the tests of the GPU memory pieces
(tests/unit/plugins/module_utils/) and of cuda_free_memory (tests/unit/plugins/modules/):

* ``FakeNvml`` builds a stand-in for NVIDIA's ``pynvml`` module (nvidia-ml-py): the
  same function names, ``NVMLError`` with ``.value`` and the NVML_ERROR_* codes,
  strings as NVML's ``nvmlErrorString``. Injected through ``sys.modules``.
* ``write_nvidia_smi`` writes an executable ``nvidia-smi`` that prints CSV in the real
  ``--format=csv,noheader,nounits`` shape and refuses any other arguments.
* ``MEMINFO_GB10_*`` are /proc/meminfo files of a DGX Spark (119.67 GiB) right after a
  115 GB model was read (page cache full) and after ``echo 3 > drop_caches``.
* ``fake_proc`` writes a /proc of processes (``VLLM_PROCS``: a vLLM and its children;
  ``SPARK_1_RAY_PROCS``/``SPARK_2_RAY_PROCS``: the two Sparks of a cluster serving on the
  Ray executor, ``OTHER_RAY_CLUSTER``: someone else's Ray on the same host).
* ``MEMINFO_SPARK_2_SERVING``/``SMI_APPS_SPARK_2``: what such a serving rank 1 reports.
* ``commands`` answers several commands (nvidia-smi, systemctl, docker) by their argv.
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


def commands(answers: dict[str, tuple[int, str, str] | str]) -> Any:
    """A ``run(argv)`` that answers the first key found in the joined argv (``rc 127``
    when none is); a plain string answer is stdout with rc 0. Records its argv."""
    seen: list[list[str]] = []

    def run(argv: list[str]) -> tuple[int, str, str]:
        seen.append(list(argv))
        joined = " ".join(argv)
        for key, answer in answers.items():
            if key in joined:
                return (0, answer, "") if isinstance(answer, str) else answer
        return 127, "", "not scripted: " + joined

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


# Two Sparks serving on the Ray executor, as inventory/sparks runs them: each Spark's Ray
# node is its container's entrypoint (`ray start --block ...` under the container's shim,
# PID 1000 on both), vLLM runs in spark-1's container through `docker exec llmfleet-ray
# vllm serve --config ...` (the docker CLI on the host, the command under the same shim).
# vLLM's workers are Ray actors (ray::RayWorkerProc.run, vLLM 0.32's ray_executor_v2),
# children of the raylet, on both Sparks; spark-2 runs no `vllm serve`. Pss in KiB: the
# CPU side only; the model is CUDA memory, in no process's Pss (SMI_APPS_SPARK_*).
RAY_CONTAINER_ID = "3f1c9a7be2d04c51a8e6f0b2c4d7e9a1b3c5d7e9f1a3b5c7d9e1f3a5b7c9d1e3"
RAY_CONTAINER_PID = 1000
_RAY = "/usr/local/lib/python3.12/dist-packages/ray"
_SHIM = (
    "/usr/bin/containerd-shim-runc-v2 -namespace moby -id {0}"
    " -address /run/containerd/containerd.sock"
)
_RAY_START = (
    "/usr/bin/python3 /usr/local/bin/ray start --block --disable-usage-stats"
    " --node-ip-address {0} --object-store-memory 2147483648"
)
SERVE = "vllm serve --config /etc/llmfleet/vllm/serve.yaml"
_HOST = {
    1: (0, "/sbin/init splash", 12_288),
    880: (1, "/usr/bin/containerd", 61_440),
    900: (1, "/usr/bin/dockerd -H fd:// --containerd=/run/containerd/containerd.sock", 92_160),
    950: (1, _SHIM.format(RAY_CONTAINER_ID), 8_192),
}


def _ray_node(address: str, head: bool) -> dict[int, tuple[int, str, int]]:
    role = (
        " --head --port 6379 --dashboard-host 127.0.0.1"
        if head
        else " --address 192.168.100.11:6379"
    )
    node = {
        RAY_CONTAINER_PID: (950, _RAY_START.format(address) + role, 122_880),
        1020: (
            RAY_CONTAINER_PID,
            f"{_RAY}/core/src/ray/raylet/raylet"
            " --raylet_socket_name=/tmp/ray/session_latest/sockets/raylet"
            f" --node_ip_address={address} --object_store_memory=2147483648",
            307_200,
        ),
        1060: (
            1020,
            f"/usr/bin/python3 -u {_RAY}/dashboard/agent.py --node-ip-address={address}",
            153_600,
        ),
        1070: (1020, f"/usr/bin/python3 -u {_RAY}/_private/runtime_env/agent/main.py", 81_920),
        # vLLM's worker of this rank: the model is its CUDA memory.
        1100: (1020, "ray::RayWorkerProc.run", 1_992_294),
        1101: (
            1100,
            "/usr/bin/python3 -c from multiprocessing.resource_tracker import main;main(31)",
            12_288,
        ),
        # A pooled worker with no task: nothing of vLLM's.
        1110: (1020, "ray::IDLE", 163_840),
    }
    if head:
        node.update(
            {
                1010: (
                    RAY_CONTAINER_PID,
                    f"{_RAY}/core/src/ray/gcs/gcs_server --gcs_server_port=6379"
                    f" --node-ip-address={address}",
                    204_800,
                ),
                1030: (
                    RAY_CONTAINER_PID,
                    f"/usr/bin/python3 -u {_RAY}/dashboard/dashboard.py --host=127.0.0.1",
                    256_000,
                ),
                1050: (
                    RAY_CONTAINER_PID,
                    f"/usr/bin/python3 -u {_RAY}/_private/log_monitor.py",
                    61_440,
                ),
            }
        )
    return node


SPARK_1_RAY_PROCS = {
    **_HOST,
    **_ray_node("192.168.100.11", head=True),
    1900: (
        1,
        "/usr/bin/docker exec --env RAY_ADDRESS --env-file /etc/llmfleet/nccl.env"
        f" --env-file /etc/llmfleet/private/vllm.env llmfleet-ray {SERVE}",
        30_720,
    ),
    2000: (950, f"/usr/bin/python3 /usr/local/bin/{SERVE}", 1_258_291),
    2010: (2000, "VLLM::EngineCore", 2_202_009),
}
SPARK_2_RAY_PROCS = {**_HOST, **_ray_node("192.168.100.12", head=False)}

# Someone else's Ray cluster on the same Spark, vLLM on its Ray executor too, even with
# our node's very command line (in a container of its own): not ours.
OTHER_RAY_CLUSTER = {
    3000: (
        1,
        "/home/bob/.venv/bin/python3 /home/bob/.venv/bin/ray start --block --head --port 6380",
        102_400,
    ),
    3020: (3000, f"{_RAY}/core/src/ray/raylet/raylet --node_ip_address=10.0.0.5", 256_000),
    3100: (3020, "ray::RayWorkerProc.run", 1_048_576),
    3150: (1, _SHIM.format("9" * 64), 8_192),
    3200: (3150, _RAY_START.format("192.168.100.12") + " --address 192.168.100.11:6379", 122_880),
    3220: (3200, f"{_RAY}/core/src/ray/raylet/raylet --node_ip_address=192.168.100.12", 256_000),
    3300: (3220, "ray::RayWorkerProc.run", 1_048_576),
}

# spark-2 serving: 15.26 GiB free of 119.67 GiB (the run that failed), 1.75 GiB of page
# cache; its Ray worker holds 88.80 GiB of CUDA memory (90931 MiB) and 1.90 GiB of Pss.
MEMINFO_SPARK_2_SERVING = (
    "MemTotal:       125483416 kB\n"
    "MemFree:        16001270 kB\n"
    "MemAvailable:   17836278 kB\n"
    "Buffers:            4096 kB\n"
    "Cached:          2097152 kB\n" + _MEMINFO_TAIL
)
SMI_APPS_SPARK_2 = f"{GB10_UUID}, 1100, 90931\n{GB10_UUID}, 3100, 8192\n{GB10_UUID}, 3300, 8192\n"
SMI_APPS_SPARK_1 = f"{GB10_UUID}, 2010, 612\n{GB10_UUID}, 1100, 90931\n"
