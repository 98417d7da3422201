# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""How much KV cache vLLM will have on each rank, for every layout of a cluster (pure).

The formulas are vLLM's (v1, as of 0.32):

- KV memory per rank: ``gpu_memory_utilization`` x the GPU's memory less what the model
  needs besides its cache (``gpu_worker.determine_available_memory``: weights, the peak of
  a profiling run, CUDA graphs, memory outside torch); on the CPU backend exactly
  ``VLLM_CPU_KVCACHE_SPACE`` GiB (``platforms/cpu.py`` sets ``kv_cache_memory_bytes``).
- Blocks: that memory // the bytes of one block of every layer of the rank
  (``kv_cache_utils.get_kv_cache_config_from_groups``); a layer's page is block_size x
  2 (K and V) x KV heads on the rank x head size x dtype bytes (``AttentionSpec``), or
  block_size x (kv_lora_rank + qk_rope_head_dim) x dtype bytes for MLA (one latent, not
  split by tensor parallel).
- Maximum concurrency: blocks / the blocks one request of ``max_model_len`` tokens takes
  (``get_max_concurrency_for_kv_cache_config``); the "KV cache size" vLLM prints is that
  concurrency x max_model_len tokens (``get_kv_cache_capacity``).
"""

from __future__ import annotations

import math

from ansible_collections.llmfleet.cluster.plugins.module_utils._memory.units import GIB
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._capacity.inputs import (
    read_model,
    resolve_settings,
)


def tensor_parallel_fits(tensor_parallel_size, heads, kv_heads):
    """vLLM's rule: TP divides the attention heads; it divides the KV heads when there are
    at least as many of them, else the KV heads divide TP (each is then replicated)."""
    tp = int(tensor_parallel_size)
    if tp < 1 or heads % tp:
        return False
    return kv_heads % tp == 0 if kv_heads >= tp else tp % kv_heads == 0


def kv_bytes_per_token_per_layer(model, tp, kv_cache_dtype_bytes):
    """One token's cache in one layer on one rank: K and V of the rank's KV heads
    (``max(1, kv_heads // tp)``, replicated below one head per rank), or MLA's latent."""
    if model["mla"]:
        latent = model["mla"]["kv_lora_rank"] + model["mla"]["qk_rope_head_dim"]
        return latent * kv_cache_dtype_bytes
    return 2 * max(1, model["kv_heads"] // tp) * model["head_dim"] * kv_cache_dtype_bytes


def weights_per_rank(model, tp, pp, encoder_data_parallel=False):
    """Bytes of weights on the fullest rank: its share of the layers (``ceil(layers / pp)``
    of them) and of the embedding matrices (one per stage when pipelined), split over TP,
    and the vision encoder's, split over TP or (run data parallel) whole on every rank."""
    vision = min(model.get("vision_bytes") or 0, model["weight_bytes"])
    language = model["weight_bytes"] - vision
    matrices = 1 if model["tied_embeddings"] else 2
    embeddings = min(model["embedding_bytes"] * matrices, language)
    on_rank = (language - embeddings) * math.ceil(model["layers"] / pp)
    on_rank /= model["layers"]
    on_rank += embeddings / matrices if pp > 1 else embeddings
    return int(on_rank / tp + (vision if encoder_data_parallel else vision / tp))


def _cache_groups(model, settings, pp):
    """``(layers per group on the rank, full groups, sliding groups)`` as vLLM groups the
    layers (``_get_kv_cache_groups_uniform_page_size``): with the hybrid allocator, groups of
    the smaller layer count (the larger when under 1.5 times it), padded."""
    full, sliding = model["full_attention_layers"], model["sliding_window_layers"]
    if sliding and full and not settings["hybrid_kv_cache"]:
        full, sliding = full + sliding, 0  # vLLM keeps every token of sliding layers
    if not (full and sliding):
        return math.ceil((full + sliding) / pp), int(bool(full)), int(bool(sliding))
    size = (
        max(full, sliding) if max(full, sliding) < 1.5 * min(full, sliding) else min(full, sliding)
    )
    return math.ceil(size / pp), math.ceil(full / size), math.ceil(sliding / size)


def blocks_per_request(model, settings, pp, max_model_len):
    """Blocks one request of ``max_model_len`` tokens takes from the shared pool: every
    full-attention group ``ceil(len / block_size)``; a sliding-window group the window plus
    the tokens in flight (``SlidingWindowSpec.max_admission_blocks_per_request``)."""
    full_groups, sliding_groups = _cache_groups(model, settings, pp)[1:]
    block = settings["block_size"]
    batches = pp if settings["device"] == "cpu" or pp > 1 else 2  # async scheduling: 2
    in_flight = batches * settings["max_num_batched_tokens"]
    window = model["sliding_window"] or 0
    held = min(window - 1 + in_flight, max_model_len)
    return full_groups * math.ceil(max_model_len / block) + sliding_groups * (
        math.ceil(held / block) + 1
    )


def kv_cache_capacity(model, settings, tp, pp, kv_cache_bytes):
    """Blocks, the "KV cache size" in tokens and the maximum concurrency vLLM prints for
    ``kv_cache_bytes`` of cache on each rank, and the longest max_model_len that fits."""
    layers_per_group = _cache_groups(model, settings, pp)[0]
    per_layer = kv_bytes_per_token_per_layer(model, tp, settings["kv_cache_dtype_bytes"])
    block_bytes = layers_per_group * settings["block_size"] * per_layer
    blocks = max(0, int(kv_cache_bytes // block_bytes)) if block_bytes else 0
    max_model_len = settings["max_model_len"]
    concurrency = blocks / blocks_per_request(model, settings, pp, max_model_len)
    low, high = 0, max_model_len  # vLLM keeps one block back (the null block)
    while low < high:
        middle = (low + high + 1) // 2
        fits = blocks_per_request(model, settings, pp, middle) <= blocks - 1
        low, high = (middle, high) if fits else (low, middle - 1)
    return {
        "kv_bytes_per_token": per_layer
        * math.ceil((model["full_attention_layers"] + model["sliding_window_layers"]) / pp),
        "kv_cache_blocks": blocks,
        "kv_cache_tokens": int(concurrency * max_model_len),
        "max_concurrency": round(concurrency, 4),
        "longest_max_model_len": low,
    }


def _layout_problems(model, settings, tp, pp, row):
    problems = []
    heads, kv_heads = model["attention_heads"], model["kv_heads"]
    if heads % tp:
        problems.append(
            "tensor parallel {0} does not divide the model's {1} attention heads".format(tp, heads)
        )
    elif not tensor_parallel_fits(tp, heads, kv_heads):
        problems.append(
            "tensor parallel {0} and the model's {1} KV heads: neither divides the other".format(
                tp, kv_heads
            )
        )
    if pp > model["layers"]:
        problems.append(
            "pipeline parallel {0} is more than the model's {1} layers".format(pp, model["layers"])
        )
    explicit_cache = settings["kv_cache_memory_gib"] is not None
    need = row["weights_per_rank_bytes"] + settings["overhead_gib"] * GIB
    need += row["kv_cache_bytes"] if explicit_cache else 0
    if row["memory_budget_bytes"] is not None and need > row["memory_budget_bytes"]:
        problems.append(
            "weights need {0:.2f} GiB per GPU, with the {1:.2f} GiB allowance{2} {3:.2f} GiB, "
            "more than gpu_memory_utilization {4:g} x {5:.2f} GiB = {6:.2f} GiB".format(
                row["weights_per_rank_bytes"] / GIB,
                settings["overhead_gib"],
                " and the KV cache" if explicit_cache else "",
                need / GIB,
                settings["gpu_memory_utilization"],
                settings["memory_per_gpu_gib"],
                row["memory_budget_bytes"] / GIB,
            )
        )
    elif row["longest_max_model_len"] < settings["max_model_len"]:
        problems.append(
            "the KV cache ({0:.2f} GiB per GPU, {1:,} tokens) cannot hold one request of "
            "max_model_len {2:,} tokens; the longest that fits is {3:,}".format(
                row["kv_cache_bytes"] / GIB,
                row["kv_cache_tokens"],
                settings["max_model_len"],
                row["longest_max_model_len"],
            )
        )
    return problems


def layout(model, settings, tp, pp):
    """One layout's numbers per rank (the fullest one) and why it cannot work, if so."""
    weights = weights_per_rank(model, tp, pp, settings["mm_encoder_tp_mode"] == "data")
    budget = None
    if settings["memory_per_gpu_gib"] is not None:
        budget = int(settings["gpu_memory_utilization"] * settings["memory_per_gpu_gib"] * GIB)
    if settings["kv_cache_memory_gib"] is not None:
        kv_cache_bytes = int(settings["kv_cache_memory_gib"] * GIB)
    else:
        kv_cache_bytes = max(0, budget - weights - int(settings["overhead_gib"] * GIB))
    row = {
        "tensor_parallel_size": tp,
        "pipeline_parallel_size": pp,
        "gpus": tp * pp,
        "hosts": math.ceil(tp * pp / settings["gpus_per_host"]),
        "weights_per_rank_bytes": weights,
        "memory_budget_bytes": budget,
        "kv_cache_bytes": kv_cache_bytes,
        **kv_cache_capacity(model, settings, tp, pp, kv_cache_bytes),
    }
    row["problems"] = _layout_problems(model, settings, tp, pp, row)
    row["fits"] = not row["problems"]
    return row


def valid_layouts(model, settings):
    """Every TP x PP over all hosts, then fewer, whose TP suits the heads and PP the layers,
    with its numbers (``fits`` false with ``problems`` when memory is short)."""
    layouts = []
    for hosts in range(settings["hosts"], 0, -1):
        gpus = hosts * settings["gpus_per_host"]
        for pp in range(1, gpus + 1):
            tp = gpus // pp
            if gpus % pp or pp > model["layers"]:
                continue
            if tensor_parallel_fits(tp, model["attention_heads"], model["kv_heads"]):
                layouts.append(layout(model, settings, tp, pp))
    return layouts


def assumptions(model, settings):
    """The planner's assumptions for this model and cluster, one sentence each."""
    kv_dtype = settings["kv_cache_dtype"]
    found = [
        "weights: {0} ({1:.2f} GiB), split evenly over TP, and over PP by layers: the "
        "fullest stage holds ceil(layers / PP) of them and an embedding matrix".format(
            model["weights_source"], model["weight_bytes"] / GIB
        ),
        "dtype {0}; KV cache {1} = {2} byte(s) per value; block size {3} tokens".format(
            settings["dtype"], kv_dtype, settings["kv_cache_dtype_bytes"], settings["block_size"]
        ),
    ]
    if settings["kv_cache_memory_gib"] is not None:
        found.append(
            "KV cache per rank: exactly {0:g} GiB (kv_cache_memory_gib, as "
            "VLLM_CPU_KVCACHE_SPACE or --kv-cache-memory-bytes)".format(
                settings["kv_cache_memory_gib"]
            )
        )
    else:
        found.append(
            "KV cache per rank: gpu_memory_utilization {0:g} x {1:.2f} GiB - weights - "
            "{2:.2f} GiB allowance for what vLLM measures at start and the planner cannot "
            "know (activation peak, CUDA graphs, CUDA context, NCCL and torch buffers); off "
            "by the difference, about 1-4 GiB per GPU".format(
                settings["gpu_memory_utilization"],
                settings["memory_per_gpu_gib"],
                settings["overhead_gib"],
            )
        )
    if model.get("vision_bytes"):
        found.append(
            "vision encoder: {0:.2f} GiB at {1}, {2}".format(
                model["vision_bytes"] / GIB,
                model["dtype"],
                "whole on every rank (mm_encoder_tp_mode data)"
                if settings["mm_encoder_tp_mode"] == "data"
                else "split over TP like the rest",
            )
        )
    if model["mla"]:
        found.append(
            "MLA: one latent of kv_lora_rank + qk_rope_head_dim values per token and layer, "
            "the same on every TP rank (not split)"
        )
    elif model["kv_heads"] < settings["tensor_parallel_size"]:
        found.append("KV heads fewer than TP ranks are replicated: one per rank")
    if model["sliding_window_layers"]:
        found.append(
            "sliding window: {0} of {1} layers keep {2} tokens; {3}".format(
                model["sliding_window_layers"],
                model["layers"],
                model["sliding_window"],
                "with vLLM's hybrid allocator a request holds window - 1 + the tokens in "
                "flight (max_num_batched_tokens {0} x batches) there".format(
                    settings["max_num_batched_tokens"]
                )
                if settings["hybrid_kv_cache"] and model["full_attention_layers"]
                else "counted at full length (no hybrid allocator)",
            )
        )
    if model["state_layers"]:
        found.append(
            "{0} layers keep a fixed-size state (linear attention, Mamba) that the planner "
            "does not count; vLLM's figures for such models may differ by more than 5%".format(
                model["state_layers"]
            )
        )
    return found


def plan_capacity(model_config, cluster, serving=None, checkpoint_bytes=None):
    """The plan as plain data: the model read from ``model_config`` (config.json), the
    settings, the layout asked for (``layout``, with its problems) and every valid one,
    and the assumptions."""
    model = read_model(model_config, checkpoint_bytes)
    settings = resolve_settings(model, cluster, serving)
    tp, pp = settings["tensor_parallel_size"], settings["pipeline_parallel_size"]
    asked = layout(model, settings, tp, pp)
    gpus = settings["hosts"] * settings["gpus_per_host"]
    if tp * pp != gpus:
        asked["problems"].insert(
            0,
            (
                "tensor parallel {0} x pipeline parallel {1} = {2} ranks, but the cluster has "
                "{3} GPUs: vLLM runs one rank per GPU it is started on".format(
                    tp, pp, tp * pp, gpus
                )
            ),
        )
        asked["fits"] = False
    return {
        "model": model,
        "settings": settings,
        "layout": asked,
        "layouts": valid_layouts(model, settings),
        "assumptions": assumptions(model, settings),
    }


def _layout_name(row):
    hosts = row["hosts"]
    return "tensor parallel {0} x pipeline parallel {1} on {2} host{3}".format(
        row["tensor_parallel_size"], row["pipeline_parallel_size"], hosts, "" if hosts == 1 else "s"
    )


def plan_problems(plan):
    """Why the layout asked for cannot work, one sentence each, and the layouts of the same
    cluster that would; empty when it fits."""
    asked = plan["layout"]
    if asked["fits"]:
        return []
    problems = ["{0}: {1}".format(_layout_name(asked), problem) for problem in asked["problems"]]
    fitting = [_layout_name(row) for row in plan["layouts"] if row["fits"]]
    problems.append(
        "layouts that fit: {0}".format(", ".join(fitting))
        if fitting
        else "no layout of this cluster fits at max_model_len {0:,}".format(
            plan["settings"]["max_model_len"]
        )
    )
    return problems


def plan_table(plan):
    """The plan as text: a markdown table of the layouts, the one asked for, assumptions."""
    lines = [
        "| hosts | TP | PP | weights/GPU | KV/token | KV cache/GPU | KV tokens | "
        "max concurrency | fits |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in plan["layouts"]:
        lines.append(
            "| {0} | {1} | {2} | {3:.2f} GiB | {4:,} B | {5:.2f} GiB | {6:,} | {7:.2f}x | {8} "
            "|".format(
                row["hosts"],
                row["tensor_parallel_size"],
                row["pipeline_parallel_size"],
                row["weights_per_rank_bytes"] / GIB,
                row["kv_bytes_per_token"],
                row["kv_cache_bytes"] / GIB,
                row["kv_cache_tokens"],
                row["max_concurrency"],
                "yes" if row["fits"] else "no: " + "; ".join(row["problems"]),
            )
        )
    asked = plan["layout"]
    lines += [
        "",
        "Asked for: {0}, max_model_len {1:,}: {2}".format(
            _layout_name(asked),
            plan["settings"]["max_model_len"],
            "fits, {0:,} tokens, {1:.2f}x".format(
                asked["kv_cache_tokens"], asked["max_concurrency"]
            )
            if asked["fits"]
            else "does not fit",
        ),
        *("- " + problem for problem in plan_problems(plan)),
        "",
        "Assumptions:",
        *("- " + assumption for assumption in plan["assumptions"]),
    ]
    return "\n".join(lines) + "\n"
