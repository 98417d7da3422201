"""module_utils/_memory/nvidia_query: nvidia-smi's CSV and NVML, as rows of GPUs."""

from __future__ import annotations

import sys

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._memory import (
    nvidia_query as _nvidia_query,
)

from tests.unit.plugins.fake_gpus import (
    GB10,
    GB10_UNIFIED_ROW,
    GB10_UUID,
    H100,
    H100_UUIDS,
    MIB,
    NVIDIA_SMI_FORMAT,
    NVIDIA_SMI_QUERY,
    SMI_GB10,
    SMI_H100,
    FakeDevice,
    FakeNvml,
    gb10_nvml,
    h100_nvml,
    runner,
)


def test_parse_nvidia_smi_discrete() -> None:
    rows = _nvidia_query.parse_nvidia_smi(SMI_H100)
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
    (row,) = _nvidia_query.parse_nvidia_smi(f"\n0, {GB10}, {GB10_UUID}, {na}, {na}, {na}\n\n")
    assert row == GB10_UNIFIED_ROW


def test_parse_nvidia_smi_keeps_a_name_with_a_comma() -> None:
    (row,) = _nvidia_query.parse_nvidia_smi("3, Odd, Name, GPU-x, 100, 60, 40\n")
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
    with pytest.raises(_nvidia_query.ProbeFailed, match="nvidia-smi"):
        _nvidia_query.parse_nvidia_smi(text)


def test_query_nvidia_smi_runs_the_documented_command() -> None:
    run = runner(SMI_GB10)
    rows = _nvidia_query.query_nvidia_smi(run, "/usr/bin/nvidia-smi")
    assert run.seen == [["/usr/bin/nvidia-smi", NVIDIA_SMI_QUERY, NVIDIA_SMI_FORMAT]]
    assert rows[0]["name"] == GB10


def test_query_nvidia_smi_no_devices_is_an_empty_answer() -> None:
    assert (
        _nvidia_query.query_nvidia_smi(runner("No devices were found\n", rc=6), "nvidia-smi") == []
    )


def test_query_nvidia_smi_driver_failure_says_what_nvidia_smi_said() -> None:
    said = (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running."
    )
    with pytest.raises(_nvidia_query.ProbeFailed) as info:
        _nvidia_query.query_nvidia_smi(runner(said + "\n", rc=9), "/usr/bin/nvidia-smi")
    assert str(info.value) == f"/usr/bin/nvidia-smi exited 9: {said}"
    assert info.value.short == f"nvidia-smi failed: {said}"


# ---------------------------------------------------------------------------
# NVML
# ---------------------------------------------------------------------------
def test_load_pynvml_is_optional(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    assert _nvidia_query.load_pynvml() is None
    fake = gb10_nvml().module()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert _nvidia_query.load_pynvml() is fake


def test_query_nvml_discrete_gpus_and_shutdown() -> None:
    fake = h100_nvml()
    rows = _nvidia_query.query_nvml(fake.module())
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
    (row,) = _nvidia_query.query_nvml(fake.module())
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
    with pytest.raises(_nvidia_query.ProbeFailed) as info:
        _nvidia_query.query_nvml(fake.module())
    assert str(info.value) == message
    assert info.value.short == short
    if fake.init_error is None:
        assert fake.calls[-1] == "shutdown"
