# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""``/proc/meminfo`` and unified memory (pure).

Unified memory (GB10, the DGX Spark's chip): the GPU has no memory of its own, so its
total and free memory are the operating system's: total is ``MemTotal``; free is
``MemFree`` by default, because that is what CUDA's ``cudaMemGetInfo`` (and therefore
vLLM's start-up check) reports there - it does not count the page cache as free. The
reclaimable page cache is estimated as ``Cached - Shmem`` (shared memory and tmpfs
pages are counted in ``Cached`` but ``drop_caches`` cannot free them).
"""

from __future__ import annotations

from ansible_collections.llmfleet.cluster.plugins.module_utils._memory.units import (
    KIB,
)

UNIFIED_FREE_FIELDS = ("MemFree", "MemAvailable")
# Names of GPUs known to share the OS's memory, used when the driver does report
# numbers for them (it does not today): those numbers would not be vLLM's.
UNIFIED_MEMORY_NAMES = ("GB10",)
MEMINFO_FIELDS = ("MemTotal", "MemFree", "MemAvailable", "Cached", "Shmem")


def parse_meminfo(text):
    """``/proc/meminfo`` as a dict of field -> bytes (the file's ``kB`` are KiB).

    Lines without a unit (``HugePages_Total``) keep their count.
    """
    values = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        parts = rest.split()
        if not sep or not parts:
            continue
        try:
            number = int(parts[0])
        except ValueError:
            continue
        if len(parts) > 1 and parts[1].lower() == "kb":
            number *= KIB
        values[key.strip()] = number
    return values


def page_cache_bytes(meminfo):
    """Reclaimable page cache estimate: ``Cached - Shmem`` (never negative)."""
    return max(meminfo.get("Cached", 0) - meminfo.get("Shmem", 0), 0)


def unified_memory(meminfo, free_field="MemFree"):
    """The OS's memory as a unified-memory GPU's: total, free, available, page cache."""
    if free_field not in UNIFIED_FREE_FIELDS:
        raise ValueError("free_field must be one of {0}".format(", ".join(UNIFIED_FREE_FIELDS)))
    total = meminfo["MemTotal"]
    free = meminfo[free_field]
    return {
        "total": total,
        "free": free,
        "used": max(total - free, 0),
        "available": meminfo["MemAvailable"],
        "page_cache": page_cache_bytes(meminfo),
    }


def is_unified_name(name):
    upper = (name or "").upper()
    return any(marker in upper for marker in UNIFIED_MEMORY_NAMES)
