"""plugin_utils/_capacity/weights: the weights estimated from config.json, each part of a
decoder layer at the bits its quantization gives it, the vision encoder of a multimodal
model counted."""

from __future__ import annotations

import pytest
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._capacity.weights import (
    part_bits,
    parts_named,
    vision_parameters,
)

BF16 = 2


@pytest.mark.parametrize(
    ("pattern", "parts"),
    [
        ("Linear", {"attention", "mlp", "router"}),
        ("re:.*self_attn.*", {"attention"}),
        ("model.layers.*.self_attn", {"attention"}),
        ("re:.*mlp.gate$", {"router"}),
        ("model.layers.*.mlp.router", {"router"}),
        ("mlp.experts", {"mlp"}),
        ("re:.*gate_up_proj", {"mlp"}),
        ("re:.*down_proj", {"mlp"}),
        ("lm_head", set()),
        ("visual", set()),
    ],
)
def test_a_module_pattern_names_the_parts_it_covers(pattern: str, parts: set[str]) -> None:
    assert parts_named(pattern) == parts


def test_without_quantization_every_part_is_at_the_dtype() -> None:
    assert part_bits(None, BF16) == (None, {"attention": 16, "mlp": 16, "router": 16})


def test_awq_quantizes_the_layers_and_leaves_the_routers_and_what_it_skips() -> None:
    method, bits = part_bits(
        {"quant_method": "awq", "bits": 4, "group_size": 128,
         "modules_to_not_convert": ["visual", "self_attn"]},
        BF16,
    )  # fmt: skip
    assert (method, bits) == ("awq", {"attention": 16, "mlp": 4.125, "router": 16})


def test_mxfp4_leaves_attention_and_routers_unquantized_as_gpt_oss_says() -> None:
    # gpt-oss' config.json: modules_to_not_convert names attention, the router, embeddings.
    quantization = {
        "quant_method": "mxfp4",
        "modules_to_not_convert": [
            "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens",
            "lm_head",
        ],
    }  # fmt: skip
    assert part_bits(quantization, BF16)[1] == {"attention": 16, "mlp": 4.25, "router": 16}


def test_compressed_tensors_groups_each_have_their_bits() -> None:
    # Seed 000's FrankenQuant as the profile gives it: groups named after their part.
    named = {
        "quant_method": "compressed-tensors",
        "config_groups": {
            "attention": {"weights": {"num_bits": 8}},
            "experts": {"weights": {"num_bits": 4, "group_size": 32}},
        },
    }
    assert part_bits(named, BF16)[1] == {"attention": 8, "mlp": 4.5, "router": 16}
    # As llm-compressor writes them: targets, and what it ignores.
    targeted = {
        "quant_method": "compressed-tensors",
        "config_groups": {
            "group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "group_size": 128}},
            "group_1": {"targets": ["re:.*self_attn.*"], "weights": {"num_bits": 8}},
        },
        "ignore": ["lm_head", "re:.*mlp.gate$"],
    }
    assert part_bits(targeted, BF16)[1] == {"attention": 8, "mlp": 4.125, "router": 16}
    ignored = {**targeted, "ignore": ["lm_head", "re:.*self_attn.*"]}
    assert part_bits(ignored, BF16)[1] == {"attention": 16, "mlp": 4.125, "router": 16}


def test_a_method_without_known_bits_counts_every_part_at_the_dtype() -> None:
    assert part_bits({"quant_method": "gguf"}, BF16) == (
        "gguf",
        {"attention": 16, "mlp": 16, "router": 16},
    )


def test_qwen3_vl_235b_vision_encoder() -> None:
    # 27 blocks of 4 x 1152^2 (qkv, proj) + 2 x 1152 x 4304 (the MLP) = 15,224,832 each;
    # patches 3 x 2 x 16 x 16 x 1152; positions 2304 x 1152; the merger and three deepstack
    # mergers of 4608^2 + 4608 x 4096 each.
    vision = {
        "depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "in_channels": 3,
        "patch_size": 16, "temporal_patch_size": 2, "spatial_merge_size": 2,
        "out_hidden_size": 4096, "num_position_embeddings": 2304,
        "deepstack_visual_indexes": [8, 16, 24],
    }  # fmt: skip
    expected = 27 * 15_224_832 + 1536 * 1152 + 2304 * 1152 + 4 * (4608**2 + 4608 * 4096)
    assert vision_parameters({"vision_config": vision}) == expected == 575_926_272


def test_a_model_without_a_vision_encoder_has_none() -> None:
    assert vision_parameters({"model_type": "llama"}) == 0
    assert vision_parameters({"vision_config": {"hidden_size": 1152}}) == 0
