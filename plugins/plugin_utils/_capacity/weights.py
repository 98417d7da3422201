# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""A model's weights estimated from its ``config.json`` (pure), for the capacity planner when
the checkpoint's size is not given: the language model's parts (attention, the MLP or the
experts, the MoE routers) each at the bits its quantization gives it, the embeddings at the
model's dtype, and the vision encoder of a multimodal model at the model's dtype.

Mixed-precision checkpoints quantize their parts differently: compressed-tensors' groups
each name what they quantize (``targets``, or a name like ``attention``) with their own
bits, and ``ignore`` / ``modules_to_not_convert`` / ``llm_int8_skip_modules`` name what
stays in the model's dtype (MoE routers always do in vLLM's quantized MoE layers).
"""

from __future__ import annotations

import re

PARTS = ("attention", "mlp", "router")
# Words of a module name or pattern, by the part of a decoder layer they name. A router
# is a gate that is not a projection (`mlp.gate`, not `gate_proj`).
_ROUTER = re.compile(r"router|gate(?![_a-z])")
_ATTENTION = re.compile(r"attn|attention|[qkvo]_proj|qkv")
_MLP = re.compile(r"mlp|expert|moe|ffn|gate_proj|up_proj|down_proj|w[123]\b")


def optional_int(mapping, key):
    """``mapping[key]`` when it is a positive integer, else 0."""
    value = mapping.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def quantized_bits(quantization):
    """``(method, bits per weight including group scales)`` of a ``quantization_config``,
    the lowest of its groups; ``(method, None)`` for a method this estimate does not know."""
    method = str(quantization.get("quant_method") or "").lower()
    algo = str(quantization.get("quant_algo") or "").upper()
    bits = quantization.get("bits") or quantization.get("w_bit") or quantization.get("num_bits")
    group = quantization.get("group_size") or quantization.get("q_group_size")
    scale = 16  # bits of the scale each group of weights carries
    if method == "compressed-tensors":
        groups = [_group_bits(group_config) for group_config in _groups(quantization).values()]
        lowest = min((bits for bits in groups if bits is not None), default=None)
        return method, lowest
    if method in ("fp8", "fbgemm_fp8", "ptpc_fp8") or algo == "FP8":
        bits, group = 8, 0
    elif method == "mxfp4":
        bits, group, scale = 4, 32, 8
    elif algo == "NVFP4":
        bits, group, scale = 4, 16, 8
    elif method == "bitsandbytes":
        bits = 4 if quantization.get("load_in_4bit") else 8
    if not isinstance(bits, int) or bits < 1:
        return method, None
    return method, bits + (scale / group if isinstance(group, int) and group > 0 else 0)


def _groups(quantization):
    groups = quantization.get("config_groups")
    return groups if isinstance(groups, dict) else {}


def _group_bits(group_config):
    """Bits per weight of a compressed-tensors group (its scale per group included)."""
    weights = (group_config or {}).get("weights") or {}
    bits, group = weights.get("num_bits"), weights.get("group_size")
    if not isinstance(bits, int) or bits < 1:
        return None
    return bits + (16 / group if isinstance(group, int) and group > 0 else 0)


def parts_named(pattern):
    """The parts of a decoder layer a module name or pattern covers (``Linear``: all)."""
    text = str(pattern).lower()
    if text == "linear":
        return set(PARTS)
    if _ROUTER.search(text):
        return {"router"}
    named = (("attention", _ATTENTION), ("mlp", _MLP))
    return {part for part, words in named if words.search(text)}


def part_bits(quantization, dtype_bytes):
    """``(method, {part: bits per weight})``: each part at its quantization's bits, the MoE
    routers and what the checkpoint leaves unquantized at the dtype's."""
    unquantized = 8 * dtype_bytes
    if not isinstance(quantization, dict):
        return None, dict.fromkeys(PARTS, unquantized)
    method, lowest = quantized_bits(quantization)
    if lowest is None:
        return method, dict.fromkeys(PARTS, unquantized)
    bits = {**dict.fromkeys(PARTS, lowest), "router": unquantized}
    if method == "compressed-tensors":
        covered = {}
        # Groups that name a part win over one that targets every Linear layer.
        for name, group_config in sorted(
            _groups(quantization).items(),
            key=lambda item: "Linear" not in ((item[1] or {}).get("targets") or []),
        ):
            group_bits = _group_bits(group_config)
            for target in (group_config or {}).get("targets") or [name]:
                for part in parts_named(target) - {"router"}:
                    if group_bits is not None:
                        covered[part] = group_bits
        if covered:
            bits.update(covered)
    for key in ("ignore", "modules_to_not_convert", "llm_int8_skip_modules"):
        for pattern in quantization.get(key) or []:
            for part in parts_named(pattern):
                bits[part] = unquantized
    return method, bits


def parameter_parts(text):
    """``({part: parameters of the decoder layers}, parameters of one embedding matrix)``
    from the shapes: attention (GQA or MLA), a dense MLP or experts (routed and shared), and
    the MoE routers."""
    hidden = optional_int(text, "hidden_size")
    layers = optional_int(text, "num_hidden_layers")
    heads = optional_int(text, "num_attention_heads")
    kv_heads = optional_int(text, "num_key_value_heads") or heads
    head_dim = optional_int(text, "head_dim") or (hidden // heads if heads else 0)
    if optional_int(text, "kv_lora_rank"):
        rope, nope = optional_int(text, "qk_rope_head_dim"), optional_int(text, "qk_nope_head_dim")
        value_dim = optional_int(text, "v_head_dim") or head_dim
        q_rank = optional_int(text, "q_lora_rank")
        query = (
            hidden * q_rank + q_rank * heads * (nope + rope)
            if q_rank
            else hidden * heads * (nope + rope)
        )
        rank = text["kv_lora_rank"]
        attention = query + hidden * (rank + rope) + rank * heads * (nope + value_dim)
        attention += heads * value_dim * hidden
    else:
        attention = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
    experts = 0
    for key in ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"):
        experts = experts or optional_int(text, key)
    dense = 3 * hidden * optional_int(text, "intermediate_size")
    mlp, router = layers * dense, 0
    if experts:
        expert_size = optional_int(text, "moe_intermediate_size") or optional_int(
            text, "intermediate_size"
        )
        shared = optional_int(text, "n_shared_experts") * expert_size + optional_int(
            text, "shared_expert_intermediate_size"
        )
        moe_layers = layers - min(layers, optional_int(text, "first_k_dense_replace"))
        mlp = (layers - moe_layers) * dense
        mlp += moe_layers * (3 * hidden * expert_size * experts + 3 * hidden * shared)
        router = moe_layers * hidden * experts
    parts = {"attention": layers * attention, "mlp": mlp, "router": router}
    return parts, optional_int(text, "vocab_size") * hidden


def parameter_estimate(text):
    """``(parameters of the decoder layers, parameters of one embedding matrix)``."""
    parts, embedding = parameter_parts(text)
    return sum(parts.values()), embedding


def vision_parameters(config):
    """Parameters of a multimodal model's vision encoder (``vision_config``: its blocks, the
    patch and position embeddings and the mergers that project into the language model, the
    deepstack ones included), 0 when the model has none or its config does not say."""
    vision = config.get("vision_config")
    if not isinstance(vision, dict):
        return 0
    depth = optional_int(vision, "depth") or optional_int(vision, "num_hidden_layers")
    hidden = optional_int(vision, "hidden_size") or optional_int(vision, "embed_dim")
    if not (depth and hidden):
        return 0
    inner = optional_int(vision, "intermediate_size") or 4 * hidden
    blocks = depth * (4 * hidden * hidden + 2 * hidden * inner)
    channels = optional_int(vision, "in_channels") or optional_int(vision, "num_channels") or 3
    patch = optional_int(vision, "patch_size") or 14
    patches = channels * (optional_int(vision, "temporal_patch_size") or 1) * patch * patch
    out = optional_int(vision, "out_hidden_size")
    merged = hidden * (optional_int(vision, "spatial_merge_size") or 1) ** 2
    deepstack = vision.get("deepstack_visual_indexes")
    mergers = (1 + len(deepstack if isinstance(deepstack, list) else [])) if out else 0
    positions = optional_int(vision, "num_position_embeddings") * hidden
    return blocks + patches * hidden + positions + mergers * (merged * merged + merged * out)


def estimate_weights(config, text, quantization, *, dtype, dtype_bytes, tied):
    """``(bytes, bits per part, where the figure comes from)``: the decoder layers' parts at
    their bits, the embeddings and the vision encoder at the dtype."""
    parts, embedding = parameter_parts(text)
    bits = part_bits(quantization, dtype_bytes)[1]
    matrices = 1 if tied else 2
    vision = vision_parameters(config)
    weight_bytes = int(sum(parts[part] * bits[part] / 8 for part in PARTS))
    weight_bytes += (embedding * matrices + vision) * dtype_bytes
    source = (
        "estimated from config.json: {0:,} parameters in the layers (attention at {1:g} bits,"
        " the MLP or experts at {2:g}, the routers at {3:g}), {4} embedding matrices at {5}"
    ).format(
        sum(parts.values()),
        round(bits["attention"], 2),
        round(bits["mlp"], 2),
        round(bits["router"], 2),
        matrices,
        dtype,
    )
    if vision:
        source += ", the vision encoder's {0:,} parameters at {1}".format(vision, dtype)
    return weight_bytes, bits, source
