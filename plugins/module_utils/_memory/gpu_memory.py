# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Free memory per NVIDIA GPU, and whether vLLM's start-up memory check will pass.

Pure functions, no AnsibleModule: the module ``cuda_free_memory`` is a thin
wrapper around ``gather`` and unit tests call the pieces directly.

Where the numbers come from, in order (``method: auto``; ``nvidia_query``):

1. NVML through ``pynvml`` (the ``nvidia-ml-py`` package), imported lazily and
   only if present. Any NVML error other than "Not Supported" on the memory
   query (the library is missing, the driver is not loaded...) moves on to 2.
2. ``nvidia-smi --query-gpu=index,name,uuid,memory.total,memory.free,memory.used
   --format=csv,noheader,nounits`` (values in MiB).
3. Neither: no GPU, which is a result, not an error.

A unified-memory GPU (GB10, the DGX Spark's chip) has no memory of its own; its total
and free memory are the operating system's, read from ``/proc/meminfo`` (``meminfo``):
free is ``MemFree`` by default, what CUDA's ``cudaMemGetInfo`` (and therefore vLLM's
start-up check) reports, so after a 115 GB model was read from disk vLLM sees about
11 GiB free of 119.67 GiB although ``MemAvailable`` says most of the memory is
available; the reclaimable page cache is what ``sync; echo 3 >
/proc/sys/vm/drop_caches`` would give back.

Memory our own processes hold (our vLLM by its command line, ``held_by``; under the Ray
executor the Ray workers of our Ray node, ``held_by_ray_node``; see ``held_memory``)
counts as free for the fit check (``vllm_fit``). With ``reclaim_cache_when_held``
the reclaimable page cache of a unified-memory GPU counts too while our vLLM holds memory
there: the caller drops it just before that vLLM restarts (``drop_cache_before_restart``
in the result says the fit needs it).

Sizes are bytes inside, GiB (2**30) rounded to 2 decimals in results.
"""

from __future__ import annotations

from ansible_collections.llmfleet.cluster.plugins.module_utils._memory.held_memory import (
    add_held,
    all_pids,
    find_holders,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._memory.meminfo import (
    is_unified_name,
    parse_meminfo,
    unified_memory,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._memory.nvidia_query import (
    ProbeFailed,
    load_pynvml,
    query_compute_apps,
    query_nvidia_smi,
    query_nvml,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._memory.units import (
    GIB,
    to_gib,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._memory.vllm_fit import (
    fit_check,
    held_by_text,
    validate_fit_args,
)

METHODS = ("auto", "nvml", "nvidia_smi")
SOURCE_NVML = "nvml"
SOURCE_NVIDIA_SMI = "nvidia-smi"
SOURCE_NONE = "none"
NO_GPU_MSG = "no NVIDIA GPU found ({0})"


class GpuMemoryError(Exception):
    """Something the task must fail on (an explicit method that does not work,
    an unreadable /proc/meminfo on a unified-memory GPU, a GPU index that is not
    there). ``details`` is merged into the failed result."""

    def __init__(self, message, **details):
        super().__init__(message)
        self.message = message
        self.details = details

    def __str__(self):
        return self.message


def read_meminfo(path):
    """Parse ``path``; GpuMemoryError when it cannot be read or lacks a needed field."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as error:
        raise GpuMemoryError(
            "a unified-memory GPU reports no memory of its own and {0} cannot be read: {1}".format(
                path, error.strerror or error
            ),
            meminfo_path=path,
        ) from error
    values = parse_meminfo(text)
    missing = [f for f in ("MemTotal", "MemFree", "MemAvailable", "Cached") if f not in values]
    if missing:
        raise GpuMemoryError(
            "{0} has no {1} line".format(path, ", ".join(missing)), meminfo_path=path
        )
    return values


def probe(method, nvml_loader, nvidia_smi_path, run, nvidia_smi_wanted="nvidia-smi"):
    """Ask NVML and/or nvidia-smi as ``method`` says.

    Returns ``(rows, source, failures)``: ``source`` is ``nvml``, ``nvidia-smi``
    or ``none``; ``failures`` lists the ProbeFailed of each method that did not
    answer, in the order tried. An explicit method that fails raises
    GpuMemoryError. ``nvidia_smi_path`` is the resolved executable, None when it
    was not found; ``nvidia_smi_wanted`` is what was looked for (for messages).
    """
    if method not in METHODS:
        raise ValueError("method must be one of {0}".format(", ".join(METHODS)))
    failures = []
    if method in ("auto", "nvml"):
        pynvml = nvml_loader()
        try:
            if pynvml is None:
                raise ProbeFailed(
                    "the Python module pynvml (package nvidia-ml-py) is not installed",
                    short="no NVML library",
                )
            return query_nvml(pynvml), SOURCE_NVML, failures
        except ProbeFailed as failure:
            if method == "nvml":
                raise GpuMemoryError("method=nvml: {0}".format(failure)) from None
            failures.append(failure)
    try:
        if not nvidia_smi_path:
            raise ProbeFailed(
                "{0} not found (searched PATH and the sbin directories)".format(nvidia_smi_wanted),
                short="no nvidia-smi",
            )
        return query_nvidia_smi(run, nvidia_smi_path), SOURCE_NVIDIA_SMI, failures
    except ProbeFailed as failure:
        if method == "nvidia_smi":
            raise GpuMemoryError("method=nvidia_smi: {0}".format(failure)) from None
        failures.append(failure)
    return [], SOURCE_NONE, failures


def gpu_entries(rows, source, meminfo_loader, unified_free="MemFree"):
    """Rows with memory filled in (from /proc/meminfo for unified memory).

    Returns ``(gpus, page_cache)``: sizes still in bytes; ``page_cache`` is None
    when no GPU uses unified memory.
    """
    gpus = []
    page_cache = None
    meminfo = None
    for row in rows:
        unified = row["total"] is None or row["free"] is None or is_unified_name(row["name"])
        entry = dict(row, unified_memory=unified, source=source)
        entry.update(available=None, page_cache=None)
        if unified:
            if meminfo is None:
                meminfo = meminfo_loader()
            os_memory = unified_memory(meminfo, unified_free)
            page_cache = os_memory["page_cache"]
            entry.update(os_memory)
            entry["source"] = "os-meminfo {0} (unified memory)".format(unified_free)
        elif entry["used"] is None:
            entry["used"] = max(entry["total"] - entry["free"], 0)
        gpus.append(entry)
    return gpus, page_cache


def select_gpus(gpus, wanted):
    """Only the GPUs (rows or entries) whose index is in ``wanted`` (all when empty)."""
    if not wanted:
        return gpus
    present = [g["index"] for g in gpus]
    missing = [i for i in wanted if i not in present]
    if missing:
        raise GpuMemoryError(
            "GPU index {0} not found; present GPUs: {1}".format(
                ", ".join(str(i) for i in missing), ", ".join(str(i) for i in present)
            ),
            available=present,
        )
    keep = set(wanted)
    return [g for g in gpus if g["index"] in keep]


def public_gpu(gpu):
    """A GPU entry as the module returns it (GiB, fixed keys)."""
    return {
        "index": gpu["index"],
        "name": gpu["name"],
        "uuid": gpu["uuid"],
        "total_gib": to_gib(gpu["total"]),
        "free_gib": to_gib(gpu["free"]),
        "used_gib": to_gib(gpu["used"]),
        "available_gib": to_gib(gpu["available"]),
        "page_cache_gib": to_gib(gpu["page_cache"]),
        "unified_memory": gpu["unified_memory"],
        "source": gpu["source"],
        "required_gib": to_gib(gpu.get("required")),
        "held_gib": to_gib(gpu.get("held") or 0),
        "held_by": [
            {"name": name, "held_gib": to_gib(held)} for name, held in gpu.get("held_by", [])
        ],
        "fits": gpu.get("fits"),
        "cache_needed": gpu.get("cache_needed", False),
    }


def _held_summary(gpu, by_holder):
    if not gpu.get("held"):
        return ""
    text = " + {0:.2f} GiB our vLLM holds".format(gpu["held"] / GIB)
    if by_holder:
        text += " ({0})".format(held_by_text(gpu))
    return text


def _summary(gpus, source, by_holder=False):
    described = ", ".join(
        "GPU {0} {1} {2:.2f}/{3:.2f} GiB free{4}{5}".format(
            g["index"],
            g["name"],
            g["free"] / GIB,
            g["total"] / GIB,
            " (unified memory)" if g["unified_memory"] else "",
            _held_summary(g, by_holder),
        )
        for g in gpus
    )
    return "{0} NVIDIA GPU{1} via {2}: {3}".format(
        len(gpus), "" if len(gpus) == 1 else "s", source, described
    )


def gather(
    *,
    method="auto",
    nvml_loader=load_pynvml,
    nvidia_smi_path=None,
    run=None,
    meminfo_path="/proc/meminfo",
    nvidia_smi_wanted="nvidia-smi",
    gpus=None,
    required_gib=None,
    gpu_memory_utilization=None,
    unified_free="MemFree",
    held_by=None,
    held_by_ray_node=None,
    which=None,
    proc="/proc",
    reclaim_cache_when_held=False,
):
    """The module's result, without ``changed``.

    ``held_by_ray_node`` (``{unit}`` or ``{container, engine}``) needs ``run`` and
    ``which(name)`` (an executable's path, or None) to find the node's first process.

    ``failed`` is set when a fit check fails; GpuMemoryError is raised for the
    other failures. A host without GPU gives ``gpu_count: 0`` and no failure
    (the caller decides whether that is fatal).
    """
    problems = validate_fit_args(required_gib, gpu_memory_utilization)
    if problems:
        raise GpuMemoryError("; ".join(problems))
    rows, source, failures = probe(method, nvml_loader, nvidia_smi_path, run, nvidia_smi_wanted)
    fallback_reason = "; ".join(str(f) for f in failures) or None
    result = {
        "source": source,
        "fallback_reason": fallback_reason,
        "gpus": [],
        "gpu_count": 0,
        "fits": None,
        "page_cache_gib": None,
        "drop_cache_before_restart": False,
        "unified_memory_free": unified_free,
    }
    if not rows:
        if source == SOURCE_NONE:
            why = ", ".join(f.short for f in failures)
        elif source == SOURCE_NVML:
            why = "NVML reports 0 devices"
        else:
            why = "nvidia-smi: No devices were found"
        result["msg"] = NO_GPU_MSG.format(why)
        return result
    rows = select_gpus(rows, gpus)
    entries, page_cache = gpu_entries(
        rows, source, lambda: read_meminfo(meminfo_path), unified_free
    )
    holders = find_holders(held_by, held_by_ray_node, run, which, proc)
    pids = all_pids(holders)
    result["held_pids"] = pids
    result["holders"] = holders
    if pids:
        # What CUDA allocated, unified memory included (there it is in no process's PSS).
        apps = query_compute_apps(run, nvidia_smi_path) if nvidia_smi_path else {}
        add_held(entries, holders, apps, proc)
    misfits = fit_check(entries, required_gib, gpu_memory_utilization, reclaim_cache_when_held)
    checked = [g["fits"] for g in entries if g["fits"] is not None]
    cache_needed = any(g["cache_needed"] for g in entries)
    result.update(
        gpus=[public_gpu(g) for g in entries],
        gpu_count=len(entries),
        fits=all(checked) if checked else None,
        page_cache_gib=to_gib(page_cache),
        drop_cache_before_restart=cache_needed,
    )
    by_holder = bool(held_by_ray_node)
    if misfits:
        result["failed"] = True
        result["msg"] = " | ".join(misfits) + _nothing_held(holders)
    elif cache_needed:
        result["msg"] = (
            "{0}; every GPU has the memory asked for once {1:.2f} GiB of page cache is dropped"
            " before our vLLM restarts".format(
                _summary(entries, source, by_holder), page_cache / GIB
            )
        )
    elif checked:
        result["msg"] = "{0}; every GPU has the memory asked for".format(
            _summary(entries, source, by_holder)
        )
    else:
        result["msg"] = _summary(entries, source, by_holder)
    return result


def _nothing_held(holders):
    """Why nothing of ours was counted, when something was looked for and nothing found."""
    if not holders or all_pids(holders):
        return ""
    return "; nothing of ours holds memory here ({0})".format(
        "; ".join(holder["why"] for holder in holders)
    )
