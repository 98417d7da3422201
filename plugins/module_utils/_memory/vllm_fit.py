# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Whether vLLM's start-up memory check will pass on each GPU, and why not (pure).

vLLM needs free memory of at least ``gpu_memory_utilization`` x total on every GPU it
uses; ``required_gib`` asks for a size instead. Memory our own vLLM holds counts as free
(it is released before the restart) and, with ``reclaim_cache_when_held``, so does the
reclaimable page cache of a unified-memory GPU (dropped just before that restart).
"""

from __future__ import annotations

from ansible_collections.llmfleet.cluster.plugins.module_utils._memory.units import (
    GIB,
    to_gib,
)


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


def held_by_text(gpu):
    """Who holds what on ``gpu``: ``NAME: 1.20 GiB, NAME: 0.50 GiB``."""
    return ", ".join(
        "{0}: {1:.2f} GiB".format(name, held / GIB) for name, held in gpu.get("held_by", [])
    )


def _held_text(gpu, held):
    if not held:
        return ""
    by = held_by_text(gpu)
    return " plus {0:.2f} GiB our vLLM holds until it restarts{1}".format(
        held / GIB, " ({0})".format(by) if by else ""
    )


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
        _held_text(gpu, held),
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
