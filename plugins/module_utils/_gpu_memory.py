# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Free memory per NVIDIA GPU, and whether vLLM's start-up memory check will pass.

Pure functions, no AnsibleModule: the module ``cuda_free_memory`` is a thin
wrapper around them and unit tests call them directly.

Where the numbers come from, in order (``method: auto``):

1. NVML through ``pynvml`` (the ``nvidia-ml-py`` package), imported lazily and
   only if present. Any NVML error other than "Not Supported" on the memory
   query (the library is missing, the driver is not loaded...) moves on to 2.
2. ``nvidia-smi --query-gpu=index,name,uuid,memory.total,memory.free,memory.used
   --format=csv,noheader,nounits`` (values in MiB).
3. Neither: no GPU, which is a result, not an error.

Unified memory (GB10, the DGX Spark's chip): the GPU has no memory of its own,
NVML answers NVML_ERROR_NOT_SUPPORTED for the memory query and nvidia-smi prints
``[N/A]``. The GPU's total and free memory are then the operating system's, read
from ``/proc/meminfo``: total is ``MemTotal``; free is ``MemFree`` by default,
because that is what CUDA's ``cudaMemGetInfo`` (and therefore vLLM's start-up
check) reports there: it does not count the page cache as free, so after a 115 GB
model was read from disk vLLM sees about 11 GiB free of 119.67 GiB although
``MemAvailable`` says most of the memory is available. The reclaimable page
cache is estimated as ``Cached - Shmem`` (shared memory and tmpfs pages are
counted in ``Cached`` but ``drop_caches`` cannot free them); it is what
``sync; echo 3 > /proc/sys/vm/drop_caches`` would give back.

Memory our own processes hold (``held_by``: a running vLLM that is about to be
restarted) counts as free for the fit check: it is released before the new process
starts. On unified memory that is the processes' proportional set size (``Pss`` of
``/proc/PID/smaps_rollup``, shared pages split between their users); on a GPU with
memory of its own, what ``nvidia-smi --query-compute-apps`` reports for their PIDs.
With ``reclaim_cache_when_held`` the reclaimable page cache of a unified-memory GPU
counts too while our vLLM holds memory there: the caller drops it just before that
vLLM restarts (``drop_cache_before_restart`` in the result says the fit needs it).

Sizes are bytes inside, GiB (2**30) rounded to 2 decimals in results.
"""

from __future__ import annotations

import contextlib
import importlib
import os

GIB = 1 << 30
MIB = 1 << 20
KIB = 1 << 10

NVIDIA_SMI_FIELDS = ("index", "name", "uuid", "memory.total", "memory.free", "memory.used")
NVIDIA_SMI_ARGS = (
    "--query-gpu=" + ",".join(NVIDIA_SMI_FIELDS),
    "--format=csv,noheader,nounits",
)
# nvidia-smi's exit status when the driver answers but there is no GPU.
NVIDIA_SMI_RC_NO_DEVICES = 6

METHODS = ("auto", "nvml", "nvidia_smi")
SOURCE_NVML = "nvml"
SOURCE_NVIDIA_SMI = "nvidia-smi"
SOURCE_NONE = "none"
UNIFIED_FREE_FIELDS = ("MemFree", "MemAvailable")
NO_GPU_MSG = "no NVIDIA GPU found ({0})"

# Names of GPUs known to share the OS's memory, used when the driver does report
# numbers for them (it does not today): those numbers would not be vLLM's.
UNIFIED_MEMORY_NAMES = ("GB10",)
# What nvidia-smi prints in place of a value it does not have.
_NOT_AVAILABLE = frozenset(("[n/a]", "n/a", "[not supported]", "not supported"))

# NVML return codes (nvml.h); pynvml's own constants are preferred when present.
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_LIBRARY_NOT_FOUND = 12

MEMINFO_FIELDS = ("MemTotal", "MemFree", "MemAvailable", "Cached", "Shmem")


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


class ProbeFailed(Exception):
    """One method could not answer. ``short`` is the phrase used in the no-GPU
    message (for example ``no nvidia-smi``); ``str()`` is the full reason."""

    def __init__(self, message, short=None):
        super().__init__(message)
        self.message = message
        self.short = short or message

    def __str__(self):
        return self.message


def to_gib(n_bytes):
    """Bytes to GiB rounded to 2 decimals; None stays None."""
    if n_bytes is None:
        return None
    return round(n_bytes / GIB, 2)


# ---------------------------------------------------------------------------
# /proc/meminfo
# ---------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------
# nvidia-smi
# ---------------------------------------------------------------------------
def _mib(text, line):
    value = text.strip()
    if value.lower() in _NOT_AVAILABLE:
        return None
    try:
        return int(float(value) * MIB)
    except ValueError:
        raise ProbeFailed(
            "nvidia-smi printed {0!r} where a size in MiB was expected: {1!r}".format(value, line)
        ) from None


def parse_nvidia_smi(text):
    """Rows of ``nvidia-smi --query-gpu=<NVIDIA_SMI_FIELDS> --format=csv,noheader,nounits``.

    Each row: index, name, uuid, and total/free/used in bytes, or None where
    nvidia-smi printed ``[N/A]`` (unified memory). A name containing a comma is
    kept whole: the index is the first field and the last four are fixed.
    """
    rows = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < len(NVIDIA_SMI_FIELDS):
            raise ProbeFailed("cannot parse nvidia-smi output line {0!r}".format(line))
        try:
            index = int(fields[0])
        except ValueError:
            raise ProbeFailed("cannot parse nvidia-smi output line {0!r}".format(line)) from None
        rows.append(
            {
                "index": index,
                "name": ", ".join(fields[1:-4]),
                "uuid": fields[-4],
                "total": _mib(fields[-3], line),
                "free": _mib(fields[-2], line),
                "used": _mib(fields[-1], line),
            }
        )
    return rows


def query_nvidia_smi(run, path):
    """Run nvidia-smi through ``run(argv) -> (rc, stdout, stderr)`` and parse it.

    Raises ProbeFailed when it fails; ``[]`` when it says there is no device.
    """
    rc, out, err = run([path, *NVIDIA_SMI_ARGS])
    said = " ".join((out or "").split() + (err or "").split())
    if rc == NVIDIA_SMI_RC_NO_DEVICES or (rc != 0 and "no devices were found" in said.lower()):
        return []
    if rc != 0:
        raise ProbeFailed(
            "{0} exited {1}: {2}".format(path, rc, said or "no output"),
            short="nvidia-smi failed: {0}".format(said or "exit {0}".format(rc)),
        )
    return parse_nvidia_smi(out or "")


# ---------------------------------------------------------------------------
# NVML
# ---------------------------------------------------------------------------
def query_compute_apps(run, path):
    """What each process uses on each GPU with memory of its own ({} when unknown)."""
    rc, out, _err = run(
        [path, "--query-compute-apps=gpu_uuid,pid,used_memory", "--format=csv,noheader,nounits"]
    )
    if rc != 0:
        return {}
    try:
        return parse_compute_apps(out)
    except ProbeFailed:
        return {}


def load_pynvml(importer=importlib.import_module):
    """The ``pynvml`` module, or None when it is not installed."""
    try:
        return importer("pynvml")
    except ImportError:
        return None


def _nvml_code(error):
    return getattr(error, "value", None)


def _text(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def query_nvml(pynvml):
    """Rows like parse_nvidia_smi's, from NVML.

    Memory is None for a device whose memory query answers Not Supported
    (unified memory). Any other NVML error raises ProbeFailed.
    """
    nvml_error = getattr(pynvml, "NVMLError", None)
    not_supported = getattr(pynvml, "NVML_ERROR_NOT_SUPPORTED", NVML_ERROR_NOT_SUPPORTED)
    library_not_found = getattr(
        pynvml, "NVML_ERROR_LIBRARY_NOT_FOUND", NVML_ERROR_LIBRARY_NOT_FOUND
    )
    if nvml_error is None:
        raise ProbeFailed("the pynvml module has no NVMLError: not NVIDIA's nvidia-ml-py")
    try:
        pynvml.nvmlInit()
    except nvml_error as error:
        if _nvml_code(error) == library_not_found:
            raise ProbeFailed("NVML: {0}".format(error), short="no NVML library") from None
        raise ProbeFailed("NVML: {0}".format(error)) from None
    except OSError as error:
        raise ProbeFailed("NVML: {0}".format(error), short="no NVML library") from None
    rows = []
    try:
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            row = {
                "index": index,
                "name": _text(pynvml.nvmlDeviceGetName(handle)),
                "uuid": _text(pynvml.nvmlDeviceGetUUID(handle)),
                "total": None,
                "free": None,
                "used": None,
            }
            try:
                memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            except nvml_error as error:
                if _nvml_code(error) != not_supported:
                    raise
            else:
                row.update(total=int(memory.total), free=int(memory.free), used=int(memory.used))
            rows.append(row)
    except nvml_error as error:
        raise ProbeFailed("NVML: {0}".format(error)) from None
    except (AttributeError, TypeError, ValueError, OSError) as error:
        # a pynvml that is not the API this code knows (very old, or a look-alike)
        raise ProbeFailed("NVML: unexpected pynvml behaviour: {0!r}".format(error)) from None
    finally:
        # shutting down after an error must not hide that error
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()
    return rows


# ---------------------------------------------------------------------------
# gathering
# ---------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------
# memory our own processes hold
# ---------------------------------------------------------------------------
def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def held_pids(cmdline, proc="/proc"):
    """PIDs whose command line contains ``cmdline``, with all their descendants."""
    parents = {}
    roots = set()
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        stat = _read(os.path.join(proc, name, "stat"))
        command = _read(os.path.join(proc, name, "cmdline"))
        if stat is None or command is None:
            continue
        # "PID (comm) STATE PPID ...": comm may hold spaces and parentheses.
        fields = stat.rpartition(")")[2].split()
        if len(fields) > 1:
            parents[int(name)] = int(fields[1])
        if cmdline in command.replace("\0", " "):
            roots.add(int(name))
    pids = set(roots)
    grew = True
    while grew:
        children = {pid for pid, parent in parents.items() if parent in pids} - pids
        grew = bool(children)
        pids |= children
    return sorted(pids)


def pss_bytes(pids, proc="/proc"):
    """The proportional set size of ``pids`` together (processes that ended count 0)."""
    total = 0
    for pid in pids:
        rollup = _read(os.path.join(proc, str(pid), "smaps_rollup")) or ""
        total += parse_meminfo(rollup).get("Pss", 0)
    return total


def parse_compute_apps(text):
    """``nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory`` (MiB) as
    ``{(uuid, pid): bytes}``; unavailable values count 0."""
    apps = {}
    for line in text.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 3 or not parts[1].isdigit():
            continue
        used = 0 if parts[2].lower() in _NOT_AVAILABLE else _mib(parts[2], line)
        apps[(parts[0], int(parts[1]))] = used
    return apps


def add_held(gpus, pids, compute_apps, proc="/proc"):
    """Set ``held`` (bytes) on every GPU: what ``pids`` use there."""
    wanted = set(pids)
    shared = None
    for gpu in gpus:
        if gpu["unified_memory"]:
            if shared is None:
                shared = pss_bytes(pids, proc)
            gpu["held"] = shared
        else:
            gpu["held"] = sum(
                used
                for (uuid, pid), used in compute_apps.items()
                if uuid == gpu["uuid"] and pid in wanted
            )


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


# ---------------------------------------------------------------------------
# fit check
# ---------------------------------------------------------------------------
def validate_fit_args(required_gib=None, gpu_memory_utilization=None):
    """A list of messages for arguments that make no sense (empty when fine)."""
    problems = []
    if gpu_memory_utilization is not None and not 0 < gpu_memory_utilization <= 1:
        problems.append(
            "gpu_memory_utilization must be greater than 0 and at most 1 (the fraction of "
            "each GPU's total memory vLLM takes, as --gpu-memory-utilization), got {0:g}".format(
                gpu_memory_utilization
            )
        )
    if required_gib is not None and required_gib < 0:
        problems.append("required_gib must be 0 or more, got {0:g}".format(required_gib))
    return problems


def required_bytes(total, required_gib=None, gpu_memory_utilization=None):
    """``(bytes needed, which rule binds)``; ``(None, None)`` when nothing is asked.

    The rule is ``gpu_memory_utilization`` (vLLM: free must be at least
    utilization x total) or ``required_gib``; the larger need binds.
    """
    needs = []
    if gpu_memory_utilization is not None:
        needs.append((gpu_memory_utilization * total, "gpu_memory_utilization"))
    if required_gib is not None:
        needs.append((required_gib * GIB, "required_gib"))
    if not needs:
        return None, None
    return max(needs, key=lambda need: need[0])


def misfit_message(gpu, need, rule, gpu_memory_utilization=None):
    """One GPU that does not fit, with the numbers, in vLLM's own shape."""
    total = to_gib(gpu["total"])
    held = gpu.get("held") or 0
    if rule == "gpu_memory_utilization":
        needs = "vLLM needs {0:g} x {1:.2f} = {2:.2f} GiB".format(
            gpu_memory_utilization, total, need / GIB
        )
        lower = "lower gpu_memory_utilization"
    else:
        needs = "needs {0:.2f} GiB (required_gib)".format(need / GIB)
        lower = "lower required_gib"
    text = "GPU {0} ({1}): free {2:.2f} GiB of {3:.2f} GiB{4}, {5}".format(
        gpu["index"],
        gpu["name"],
        gpu["free"] / GIB,
        total,
        " plus {0:.2f} GiB our vLLM holds until it restarts".format(held / GIB) if held else "",
        needs,
    )
    cache = gpu.get("page_cache")
    if gpu.get("unified_memory") and cache:
        if gpu["free"] + held + cache >= need:
            return (
                "{0}; {1:.2f} GiB of the rest is page cache: drop caches "
                "(preflight_drop_caches) or {2}".format(text, cache / GIB, lower)
            )
        return (
            "{0}; only {1:.2f} GiB of the rest is page cache, so dropping caches is not "
            "enough: stop what uses the memory or {2}".format(text, cache / GIB, lower)
        )
    return "{0}: stop what else uses the GPU or {1}".format(text, lower)


def fit_check(gpus, required_gib=None, gpu_memory_utilization=None, reclaim_cache_when_held=False):
    """Set ``required``/``fits`` (and ``cache_needed``) on every GPU; return the misfit messages.

    ``reclaim_cache_when_held``: the page cache of a unified-memory GPU where our vLLM
    holds memory counts as available (it is dropped before that vLLM restarts);
    ``cache_needed`` is set where the fit depends on it.
    """
    problems = []
    for gpu in gpus:
        need, rule = required_bytes(gpu["total"], required_gib, gpu_memory_utilization)
        gpu["required"] = need
        held = gpu.get("held") or 0
        gpu["cache_needed"] = False
        if need is None:
            gpu["fits"] = None
            continue
        gpu["fits"] = gpu["free"] + held >= need
        if (
            not gpu["fits"]
            and reclaim_cache_when_held
            and held
            and gpu["unified_memory"]
            and gpu["free"] + held + (gpu.get("page_cache") or 0) >= need
        ):
            gpu["fits"] = gpu["cache_needed"] = True
        if gpu["fits"] is False:
            problems.append(misfit_message(gpu, need, rule, gpu_memory_utilization))
    return problems


# ---------------------------------------------------------------------------
# the whole result
# ---------------------------------------------------------------------------
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
        "fits": gpu.get("fits"),
        "cache_needed": gpu.get("cache_needed", False),
    }


def _summary(gpus, source):
    described = ", ".join(
        "GPU {0} {1} {2:.2f}/{3:.2f} GiB free{4}{5}".format(
            g["index"],
            g["name"],
            g["free"] / GIB,
            g["total"] / GIB,
            " (unified memory)" if g["unified_memory"] else "",
            " + {0:.2f} GiB our vLLM holds".format(g["held"] / GIB) if g.get("held") else "",
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
    proc="/proc",
    reclaim_cache_when_held=False,
):
    """The module's result, without ``changed``.

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
    pids = held_pids(held_by, proc) if held_by else []
    result["held_pids"] = pids
    if pids:
        discrete = [g for g in entries if not g["unified_memory"]]
        apps = query_compute_apps(run, nvidia_smi_path) if discrete and nvidia_smi_path else {}
        add_held(entries, pids, apps, proc)
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
    if misfits:
        result["failed"] = True
        result["msg"] = " | ".join(misfits)
    elif cache_needed:
        result["msg"] = (
            "{0}; every GPU has the memory asked for once {1:.2f} GiB of page cache is dropped"
            " before our vLLM restarts".format(_summary(entries, source), page_cache / GIB)
        )
    elif checked:
        result["msg"] = "{0}; every GPU has the memory asked for".format(_summary(entries, source))
    else:
        result["msg"] = _summary(entries, source)
    return result
