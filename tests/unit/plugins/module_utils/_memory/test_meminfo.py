"""module_utils/_memory/meminfo: /proc/meminfo in bytes and the unified-memory view."""

from __future__ import annotations

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._memory import meminfo as _meminfo
from ansible_collections.llmfleet.cluster.plugins.module_utils._memory import units as _memory_units

from tests.unit.plugins.fake_gpus import (
    KIB,
    MEMINFO_GB10_AFTER_DROP,
    MEMINFO_GB10_BEFORE_DROP,
)


def test_parse_meminfo_reads_kib_as_bytes_and_counts_as_counts() -> None:
    info = _meminfo.parse_meminfo(MEMINFO_GB10_BEFORE_DROP + "garbage line\nNoValue:\n")
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
    view = _meminfo.unified_memory(_meminfo.parse_meminfo(text), free_field)
    assert {
        "total": _memory_units.to_gib(view["total"]),
        "free": _memory_units.to_gib(view["free"]),
        "used": _memory_units.to_gib(view["used"]),
        "available": _memory_units.to_gib(view["available"]),
        "cache": _memory_units.to_gib(view["page_cache"]),
    } == expected


def test_page_cache_is_cached_minus_shmem_never_negative() -> None:
    assert _meminfo.page_cache_bytes({"Cached": 10 * KIB, "Shmem": 4 * KIB}) == 6 * KIB
    assert _meminfo.page_cache_bytes({"Cached": 4 * KIB, "Shmem": 10 * KIB}) == 0
    assert _meminfo.page_cache_bytes({"Cached": 4 * KIB}) == 4 * KIB


def test_unified_memory_refuses_an_unknown_field() -> None:
    with pytest.raises(ValueError, match="MemFree, MemAvailable"):
        _meminfo.unified_memory(_meminfo.parse_meminfo(MEMINFO_GB10_BEFORE_DROP), "Cached")
