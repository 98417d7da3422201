# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""The capacity planner's inputs, read and checked (pure): what a model's ``config.json``
says about its KV cache and weights, and the cluster's and vLLM's settings.

vLLM sizes a layer's KV cache from the language model's settings: layers, KV heads and head
size (``vllm/transformers_utils/model_arch_config_convertor.py``: ``get_head_size``,
``get_total_num_kv_heads``), or for MLA one latent of ``kv_lora_rank + qk_rope_head_dim``
per token. Multimodal models keep those settings in ``text_config``. The weights are the
checkpoint's size when it is known, else estimated from the shapes and the quantization
config (``weights``).
"""

from __future__ import annotations

from ansible_collections.llmfleet.cluster.plugins.plugin_utils._capacity.weights import (
    estimate_weights,
    optional_int,
    parameter_estimate,
    quantized_bits,
    vision_parameters,
)

# Where a multimodal or wrapped model keeps its language model's settings.
NESTED_CONFIGS = ("text_config", "llm_config", "language_config")

# Bytes per value of a dtype as config.json and vLLM's --dtype / --kv-cache-dtype spell it.
DTYPE_BYTES = {
    "float32": 4,
    "float": 4,
    "float16": 2,
    "half": 2,
    "bfloat16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
}

# Layer kinds of ``layer_types`` that keep one K and V per token, and the sliding ones.
FULL_ATTENTION = ("full_attention", "attention", "global_attention")
SLIDING_ATTENTION = ("sliding_attention", "local_attention")
# Models whose config.json names a window but not which layers use it.
_SLIDING_EVERY_OTHER_LAYER = ("gemma2",)

# What a rank needs besides weights and KV cache, when vLLM profiles it: the activation
# peak, CUDA graphs, the CUDA context, NCCL and torch buffers. vLLM measures them at start;
# the planner can only allow for them.
DEFAULT_OVERHEAD_GIB = 2.0

CLUSTER_DEFAULTS = {
    "hosts": 1,
    "gpus_per_host": 1,
    "memory_per_gpu_gib": None,
    "unified_memory_gib": None,
    "device": "gpu",
}
SERVING_DEFAULTS = {
    "tensor_parallel_size": None,  # hosts x GPUs per host, as the collection launches
    "pipeline_parallel_size": 1,
    "max_model_len": None,  # the model's max_position_embeddings
    "gpu_memory_utilization": 0.9,
    "kv_cache_memory_gib": None,  # VLLM_CPU_KVCACHE_SPACE / --kv-cache-memory-bytes
    "kv_cache_dtype": "auto",
    "dtype": "auto",
    "block_size": None,  # vLLM's default: 16 on GPUs, 128 on the CPU backend (16 with MLA)
    "overhead_gib": DEFAULT_OVERHEAD_GIB,
    "max_num_batched_tokens": 8192,
    "hybrid_kv_cache": True,
    "mm_encoder_tp_mode": "weights",  # vLLM's --mm-encoder-tp-mode: data keeps it whole
}


class CapacityInputError(ValueError):
    """An input the planner cannot use; the message names the field, value and expectation."""


def language_config(config):
    """The mapping that holds the language model's settings (``text_config`` and the like
    for multimodal models, else ``config`` itself)."""
    if not isinstance(config, dict):
        raise CapacityInputError(
            "model config is {0!r}; expected config.json as a mapping".format(config)
        )
    for key in NESTED_CONFIGS:
        nested = config.get(key)
        if isinstance(nested, dict) and nested.get("num_hidden_layers"):
            return key, nested
    return None, config


def _positive_int(text, key, where, what):
    value = text.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise CapacityInputError(
            "config.json: {0}{1} is {2!r}; expected a positive integer ({3})".format(
                where, key, value, what
            )
        )
    return value


def model_dtype(config, text):
    """The checkpoint's dtype name (``torch_dtype`` or ``dtype``, nested or top level)."""
    for source in (text, config):
        for key in ("torch_dtype", "dtype"):
            if isinstance(source.get(key), str):
                return source[key]
    return "bfloat16"


def dtype_bytes(name, field):
    """Bytes per value of dtype ``name``; ``field`` names the setting in the error."""
    if name not in DTYPE_BYTES:
        raise CapacityInputError(
            "{0} is {1!r}; expected one of {2}".format(field, name, ", ".join(DTYPE_BYTES))
        )
    return DTYPE_BYTES[name]


def attention_layers(config, text, layers):
    """``(full, sliding, state, window)``: layers that keep every token's K and V, layers
    that keep a sliding window of ``window`` tokens, and layers of other kinds (linear
    attention, Mamba) that keep a fixed-size state instead."""
    window = text.get("sliding_window") if isinstance(text.get("sliding_window"), int) else 0
    kinds = text.get("layer_types")
    if isinstance(text.get("attn_type_list"), list):  # MiniMax: 1 softmax, 0 linear
        kinds = [FULL_ATTENTION[0] if kind == 1 else "linear" for kind in text["attn_type_list"]]
    if isinstance(kinds, list) and kinds:
        full = sum(kind in FULL_ATTENTION for kind in kinds)
        sliding = sum(kind in SLIDING_ATTENTION for kind in kinds)
        state = len(kinds) - full - sliding
        if not window:  # no window given: those layers keep every token
            return full + sliding, 0, state, 0
        return full, sliding, state, window
    if not window or text.get("use_sliding_window") is False:
        return layers, 0, 0, 0
    pattern = optional_int(text, "sliding_window_pattern")
    if not pattern and config.get("model_type") in _SLIDING_EVERY_OTHER_LAYER:
        pattern = 2
    if pattern:
        full = layers // pattern
        return full, layers - full, 0, window
    if "max_window_layers" in text:  # Qwen2: the first max_window_layers layers are full
        full = min(layers, optional_int(text, "max_window_layers"))
        return full, layers - full, 0, window
    return 0, layers, 0, window


def _mla(text):
    if optional_int(text, "kv_lora_rank"):
        return {
            "kv_lora_rank": text["kv_lora_rank"],
            "qk_rope_head_dim": optional_int(text, "qk_rope_head_dim"),
        }
    return None


def _checkpoint_bytes(checkpoint_bytes):
    if (
        isinstance(checkpoint_bytes, bool)
        or not isinstance(checkpoint_bytes, (int, float))
        or checkpoint_bytes <= 0
    ):
        raise CapacityInputError(
            "checkpoint_bytes is {0!r}; expected the checkpoint's size in bytes, more "
            "than 0".format(checkpoint_bytes)
        )
    return int(checkpoint_bytes)


def read_model(config, checkpoint_bytes=None):
    """What the planner needs of a model, from its ``config.json`` mapping: layers and their
    kinds, heads, head size or MLA latent, dtype, and the weights in bytes (the checkpoint's
    size when given, else an estimate; ``weights_source`` says which)."""
    nested, text = language_config(config)
    where = "{0}.".format(nested) if nested else ""
    layers = _positive_int(text, "num_hidden_layers", where, "the model's layers")
    heads = _positive_int(text, "num_attention_heads", where, "the attention heads")
    kv_heads = text.get("num_key_value_heads") or heads
    if not isinstance(kv_heads, int) or isinstance(kv_heads, bool) or kv_heads < 1:
        raise CapacityInputError(
            "config.json: {0}num_key_value_heads is {1!r}; expected a positive integer "
            "(the KV heads, the attention heads when absent)".format(where, kv_heads)
        )
    head_dim = optional_int(text, "head_dim") or optional_int(text, "hidden_size") // heads
    mla = _mla(text)
    if not head_dim and not mla:
        raise CapacityInputError(
            "config.json: {0}head_dim and hidden_size are missing; expected either (the "
            "head size is head_dim, else hidden_size / num_attention_heads)".format(where)
        )
    full, sliding, state, window = attention_layers(config, text, layers)
    if not full + sliding:
        raise CapacityInputError(
            "config.json: {0}layer_types has no attention layers; expected a model whose "
            "layers keep a KV cache (the planner does not size Mamba or linear attention "
            "states)".format(where)
        )
    dtype = model_dtype(config, text)
    bytes_per_value = dtype_bytes(dtype, "config.json: torch_dtype (or dtype)")
    quantization = config.get("quantization_config") or text.get("quantization_config")
    method, bits = quantized_bits(quantization) if isinstance(quantization, dict) else (None, None)
    tied = bool(text.get("tie_word_embeddings", config.get("tie_word_embeddings", False)))
    embedding_bytes = parameter_estimate(text)[1] * bytes_per_value
    weight_bytes, bits_by_part, source = estimate_weights(
        config, text, quantization, dtype=dtype, dtype_bytes=bytes_per_value, tied=tied
    )
    if checkpoint_bytes is not None:
        weight_bytes, source = _checkpoint_bytes(checkpoint_bytes), "the checkpoint's size"
    return {
        "layers": layers,
        "attention_heads": heads,
        "kv_heads": kv_heads,
        "head_dim": head_dim,
        "mla": mla,
        "full_attention_layers": full,
        "sliding_window_layers": sliding,
        "sliding_window": window if sliding else None,
        "state_layers": state,
        "dtype": dtype,
        "quantization": {"method": method, "bits": bits} if method else None,
        "max_position_embeddings": optional_int(text, "max_position_embeddings") or None,
        "weight_bytes": weight_bytes,
        "weights_source": source,
        "bits_by_part": bits_by_part,
        # In weight_bytes, the checkpoint's or the estimate's: a rank holds all of it when
        # vLLM runs the encoder data parallel (--mm-encoder-tp-mode data).
        "vision_bytes": vision_parameters(config) * bytes_per_value,
        "embedding_bytes": embedding_bytes,
        "tied_embeddings": tied,
    }


def _checked(mapping, defaults, name):
    mapping = mapping or {}
    if not isinstance(mapping, dict):
        raise CapacityInputError("{0} is {1!r}; expected a mapping".format(name, mapping))
    unknown = sorted(set(mapping) - set(defaults))
    if unknown:
        raise CapacityInputError(
            "{0} has unknown keys {1}; expected some of {2}".format(
                name, ", ".join(unknown), ", ".join(defaults)
            )
        )
    return {**defaults, **{key: value for key, value in mapping.items() if value is not None}}


def _number(settings, key, name, low, *, high=None, integer=False):
    value = settings[key]
    kind = int if integer else (int, float)
    if (
        isinstance(value, bool)
        or not isinstance(value, kind)
        or value < low
        or (high is not None and value > high)
    ):
        expected = "an integer" if integer else "a number"
        bound = (
            "at least {0:g}".format(low) if high is None else "in {0:g}..{1:g}".format(low, high)
        )
        raise CapacityInputError(
            "{0}.{1} is {2!r}; expected {3} {4}".format(name, key, value, expected, bound)
        )
    return value


def resolve_settings(model, cluster, serving):
    """The cluster and serving settings with defaults filled in, checked (an error names the
    key, its value and what is expected)."""
    settings = {
        **_checked(cluster, CLUSTER_DEFAULTS, "cluster"),
        **_checked(serving, SERVING_DEFAULTS, "serving"),
    }
    hosts = settings["hosts"]
    settings["host_names"] = list(hosts) if isinstance(hosts, list) else None
    settings["hosts"] = len(hosts) if isinstance(hosts, list) else hosts
    _number(settings, "hosts", "cluster", 1, integer=True)
    _number(settings, "gpus_per_host", "cluster", 1, integer=True)
    if settings["device"] not in ("gpu", "cpu"):
        raise CapacityInputError(
            "cluster.device is {0!r}; expected gpu or cpu (vLLM's CPU backend)".format(
                settings["device"]
            )
        )
    memory = settings["memory_per_gpu_gib"]
    if memory is None and settings["unified_memory_gib"] is not None:
        memory = _number(settings, "unified_memory_gib", "cluster", 0) / settings["gpus_per_host"]
    settings["memory_per_gpu_gib"] = memory
    if memory is not None:
        _number(settings, "memory_per_gpu_gib", "cluster", 0)
    elif settings["kv_cache_memory_gib"] is None:
        raise CapacityInputError(
            "cluster needs memory_per_gpu_gib or unified_memory_gib (GiB per node), or "
            "serving.kv_cache_memory_gib; got none of them"
        )
    if settings["device"] == "cpu" and settings["kv_cache_memory_gib"] is None:
        raise CapacityInputError(
            "serving.kv_cache_memory_gib is missing; expected VLLM_CPU_KVCACHE_SPACE in GiB "
            "(the CPU backend's KV cache size) for cluster.device cpu"
        )
    if settings["kv_cache_memory_gib"] is not None:
        _number(settings, "kv_cache_memory_gib", "serving", 0)
    settings["tensor_parallel_size"] = settings["tensor_parallel_size"] or (
        settings["hosts"] * settings["gpus_per_host"]
    )
    settings["max_model_len"] = settings["max_model_len"] or model["max_position_embeddings"]
    if settings["max_model_len"] is None:
        raise CapacityInputError(
            "serving.max_model_len is missing and config.json has no max_position_embeddings; "
            "expected a positive integer"
        )
    for key in ("tensor_parallel_size", "pipeline_parallel_size", "max_model_len"):
        _number(settings, key, "serving", 1, integer=True)
    _number(settings, "max_num_batched_tokens", "serving", 1, integer=True)
    _number(settings, "gpu_memory_utilization", "serving", 0.01, high=1)
    _number(settings, "overhead_gib", "serving", 0)
    if settings["mm_encoder_tp_mode"] not in ("weights", "data"):
        raise CapacityInputError(
            "serving.mm_encoder_tp_mode is {0!r}; expected weights or data (vLLM's "
            "--mm-encoder-tp-mode)".format(settings["mm_encoder_tp_mode"])
        )
    default_block = 128 if settings["device"] == "cpu" and not model["mla"] else 16
    settings["block_size"] = settings["block_size"] or default_block
    _number(settings, "block_size", "serving", 1, integer=True)
    dtype = model["dtype"] if settings["dtype"] == "auto" else settings["dtype"]
    settings["dtype"] = "bfloat16" if dtype in ("float32", "float") else dtype  # vLLM's auto
    dtype_bytes(settings["dtype"], "serving.dtype")
    kv_dtype = settings["kv_cache_dtype"]
    settings["kv_cache_dtype_bytes"] = dtype_bytes(
        settings["dtype"] if kv_dtype == "auto" else kv_dtype, "serving.kv_cache_dtype"
    )
    return settings
