"""plugin_utils/_capacity/inputs: what the planner reads from config.json (layers, heads,
head size, MLA, sliding windows, dtype, quantization, weights) and the settings it checks."""

from __future__ import annotations

import re

import pytest
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._capacity.inputs import (
    CapacityInputError,
    attention_layers,
    parameter_estimate,
    read_model,
    resolve_settings,
)

# The lab's model, as the lab image generates it (lab/src/llmfleet_lab/assets/image/
# make_tiny_model.py); its model.safetensors is 4,787,648 bytes.
LAB_MODEL = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "dtype": "bfloat16",
    "head_dim": 64,
    "hidden_size": 128,
    "intermediate_size": 256,
    "max_position_embeddings": 131072,
    "num_attention_heads": 2,
    "num_hidden_layers": 2,
    "num_key_value_heads": 1,
    "tie_word_embeddings": False,
    "vocab_size": 8192,
}

# Qwen3-VL-235B-A22B (seed 003): the language model lives in text_config.
QWEN3_VL = {
    "architectures": ["Qwen3VLMoeForConditionalGeneration"],
    "model_type": "qwen3_vl_moe",
    "torch_dtype": "bfloat16",
    "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128},
    "vision_config": {"depth": 27, "hidden_size": 1152},
    "text_config": {
        "hidden_size": 4096,
        "num_hidden_layers": 94,
        "num_attention_heads": 64,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "num_experts": 128,
        "moe_intermediate_size": 1536,
        "vocab_size": 151936,
        "max_position_embeddings": 262144,
        "tie_word_embeddings": False,
    },
}


def test_the_lab_model_is_read_as_vllm_sizes_it() -> None:
    model = read_model(LAB_MODEL)
    assert {key: model[key] for key in ("layers", "attention_heads", "kv_heads", "head_dim")} == {
        "layers": 2,
        "attention_heads": 2,
        "kv_heads": 1,
        "head_dim": 64,
    }
    assert (model["full_attention_layers"], model["sliding_window_layers"]) == (2, 0)
    assert model["dtype"] == "bfloat16"
    assert model["mla"] is None
    assert model["max_position_embeddings"] == 131072


def test_the_lab_models_weights_are_estimated_within_a_tenth_of_a_percent() -> None:
    # Per layer: q and o 2 x 128 x 2 x 64 = 32,768, k and v 2 x 128 x 1 x 64 = 16,384,
    # MLP 3 x 128 x 256 = 98,304: 147,456, two layers 294,912. Embeddings 8,192 x 128.
    assert parameter_estimate(LAB_MODEL) == (294_912, 1_048_576)
    model = read_model(LAB_MODEL)
    # (294,912 + 2 x 1,048,576) x 2 bytes; the real file holds 4,787,648 (norms, header).
    assert model["weight_bytes"] == 4_784_128
    assert abs(model["weight_bytes"] - 4_787_648) / 4_787_648 < 0.001
    assert model["weights_source"].startswith(
        "estimated from config.json: 294,912 parameters in the layers (attention at 16 bits"
    )


def test_the_checkpoint_size_wins_over_the_estimate() -> None:
    model = read_model(LAB_MODEL, checkpoint_bytes=4_787_648)
    assert model["weight_bytes"] == 4_787_648
    assert model["weights_source"] == "the checkpoint's size"


def test_a_multimodal_model_is_read_from_its_text_config() -> None:
    model = read_model(QWEN3_VL)
    assert (model["layers"], model["attention_heads"], model["kv_heads"], model["head_dim"]) == (
        94,
        64,
        4,
        128,
    )
    assert model["max_position_embeddings"] == 262144
    assert model["quantization"] == {"method": "awq", "bits": 4.125}  # 4 + a 16-bit scale / 128
    # Per layer: attention 2 x 4096 x 64 x 128 + 2 x 4096 x 4 x 128 = 71,303,168; experts
    # 3 x 4096 x 1536 x 128 + router 4096 x 128 = 2,416,443,392; x 94 layers.
    layers, embedding = parameter_estimate(QWEN3_VL["text_config"])
    assert (layers, embedding) == (233_848_176_640, 622_329_856)
    # Attention and experts at 4.125 bits, the routers (94 x 4096 x 128) and two embedding
    # matrices at bf16, and the vision encoder at bf16: 27 blocks of 4 x 1152^2 + 2 x 1152
    # x 4608 and a patch embedding of 3 x 14 x 14 x 1152 (the other shapes at their defaults).
    assert model["vision_bytes"] == (27 * 15_925_248 + 677_376) * 2 == 861_318_144
    assert model["weight_bytes"] == int(
        233_798_893_568 * 4.125 / 8 + 49_283_072 * 2 + 2 * 622_329_856 * 2 + 861_318_144
    )


def test_mla_keeps_one_latent_and_its_own_parameter_count() -> None:
    deepseek = {
        "model_type": "deepseek_v3",
        "hidden_size": 7168,
        "num_hidden_layers": 61,
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "kv_lora_rank": 512,
        "q_lora_rank": 1536,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128,
        "v_head_dim": 128,
        "torch_dtype": "bfloat16",
    }
    assert read_model(deepseek)["mla"] == {"kv_lora_rank": 512, "qk_rope_head_dim": 64}
    # q: 7168 x 1536 + 1536 x 128 x 192; kv_a: 7168 x 576; kv_b: 512 x 128 x 256;
    # o: 128 x 128 x 7168 = 11,010,048 + 37,748,736 + 4,128,768 + 16,777,216 + 117,440,512.
    assert parameter_estimate(deepseek)[0] == 61 * 187_105_280


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        # gpt-oss: layer_types alternate, window 128.
        (
            {"sliding_window": 128, "layer_types": ["sliding_attention", "full_attention"] * 18},
            (18, 18, 0, 128),
        ),
        # Gemma 3 27B (older config.json): every 6th layer is global: 10 of 62.
        ({"sliding_window": 1024, "sliding_window_pattern": 6}, (10, 52, 0, 1024)),
        # Gemma 2 names the window only; its layers alternate.
        ({"model_type": "gemma2", "sliding_window": 4096}, (31, 31, 0, 4096)),
        # Qwen2/Qwen3 name a window they do not use.
        (
            {"sliding_window": 32768, "use_sliding_window": False, "max_window_layers": 28},
            (62, 0, 0, 0),
        ),
        # ... or use it above max_window_layers.
        (
            {"sliding_window": 32768, "use_sliding_window": True, "max_window_layers": 28},
            (28, 34, 0, 32768),
        ),
        # Mistral 7B v0.1: every layer slides.
        ({"sliding_window": 4096}, (0, 62, 0, 4096)),
        # No window, or a null one: every layer keeps every token.
        ({"sliding_window": None}, (62, 0, 0, 0)),
        # layer_types that slide without a window keep every token too.
        ({"layer_types": ["sliding_attention", "full_attention"] * 31}, (62, 0, 0, 0)),
        # MiniMax-Text-01: 7 lightning (linear) layers, then one softmax layer.
        ({"attn_type_list": ([0] * 7 + [1]) * 7 + [0] * 6}, (7, 0, 55, 0)),
    ],
)
def test_sliding_window_layers(config: dict, expected: tuple) -> None:
    assert attention_layers(config, config, 62) == expected


@pytest.mark.parametrize(
    ("quantization", "bits"),
    [
        ({"quant_method": "fp8", "weight_block_size": [128, 128]}, 8),
        ({"quant_method": "gptq", "bits": 8, "group_size": -1}, 8),
        ({"quant_method": "mxfp4"}, 4.25),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, 4.5),
        ({"quant_method": "bitsandbytes", "load_in_4bit": True}, 4),
        # Mixed (seed 000's FP8 attention + INT4 AWQ experts): the lowest precision is taken.
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {
                    "attention": {"weights": {"num_bits": 8}},
                    "experts": {"weights": {"num_bits": 4, "group_size": 32}},
                },
            },
            4.5,
        ),
        ({"quant_method": "something-new"}, None),
    ],
)
def test_quantized_bits_per_weight(quantization: dict, bits: float | None) -> None:
    model = read_model({**LAB_MODEL, "quantization_config": quantization})
    assert model["quantization"] == {"method": quantization["quant_method"], "bits": bits}
    if bits is None:  # unknown methods count as unquantized
        assert model["weight_bytes"] == read_model(LAB_MODEL)["weight_bytes"]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ([], "model config is []; expected config.json as a mapping"),
        ({"num_hidden_layers": 2}, "config.json: num_attention_heads is None; expected a positive"),
        (
            {"text_config": {"num_hidden_layers": 94, "num_attention_heads": 0}},
            "config.json: text_config.num_attention_heads is 0; expected a positive integer",
        ),
        ({**LAB_MODEL, "num_key_value_heads": "1"}, "num_key_value_heads is '1'"),
        (
            {**LAB_MODEL, "dtype": "int3"},
            "config.json: torch_dtype (or dtype) is 'int3'; expected one of",
        ),
        (
            {**LAB_MODEL, "layer_types": ["linear_attention", "linear_attention"]},
            "layer_types has no attention layers",
        ),
    ],
)
def test_a_config_that_cannot_be_read_is_named(config: object, message: str) -> None:
    with pytest.raises(CapacityInputError, match=re.escape(message)):
        read_model(config)


def test_settings_get_vllms_defaults() -> None:
    settings = resolve_settings(
        read_model(LAB_MODEL), {"hosts": ["a", "b"], "memory_per_gpu_gib": 80}, {}
    )
    assert settings["hosts"] == 2
    assert settings["host_names"] == ["a", "b"]
    assert settings["tensor_parallel_size"] == 2
    assert settings["pipeline_parallel_size"] == 1
    assert settings["max_model_len"] == 131072
    assert settings["block_size"] == 16
    assert settings["kv_cache_dtype_bytes"] == 2
    cpu = resolve_settings(read_model(LAB_MODEL), {"device": "cpu"}, {"kv_cache_memory_gib": 1})
    assert cpu["block_size"] == 128  # vLLM's CPU backend default
    unified = resolve_settings(
        read_model(LAB_MODEL),
        {"gpus_per_host": 2, "unified_memory_gib": 128},
        {"kv_cache_dtype": "fp8"},
    )
    assert unified["memory_per_gpu_gib"] == 64
    assert unified["kv_cache_dtype_bytes"] == 1


def test_a_float32_checkpoint_runs_in_bfloat16_as_vllms_auto_dtype() -> None:
    model = read_model({**LAB_MODEL, "dtype": "float32"})
    settings = resolve_settings(model, {"memory_per_gpu_gib": 80}, {})
    assert (settings["dtype"], settings["kv_cache_dtype_bytes"]) == ("bfloat16", 2)


@pytest.mark.parametrize(
    ("cluster", "serving", "message"),
    [
        ({"hosts": 2}, {}, "cluster needs memory_per_gpu_gib or unified_memory_gib"),
        ({"device": "cpu", "memory_per_gpu_gib": 8}, {}, "serving.kv_cache_memory_gib is missing"),
        (
            {"device": "tpu", "memory_per_gpu_gib": 8},
            {},
            "cluster.device is 'tpu'; expected gpu or cpu",
        ),
        (
            {"hosts": 0, "memory_per_gpu_gib": 8},
            {},
            "cluster.hosts is 0; expected an integer at least 1",
        ),
        (
            {"memory_per_gpu_gib": 8, "gpus": 2},
            {},
            "cluster has unknown keys gpus; expected some of",
        ),
        (
            {"memory_per_gpu_gib": 8},
            {"gpu_memory_utilization": 1.5},
            "serving.gpu_memory_utilization is 1.5; expected a number in 0.01..1",
        ),
        (
            {"memory_per_gpu_gib": 8},
            {"max_model_len": 0.5},
            "serving.max_model_len is 0.5; expected an integer",
        ),
        ({"memory_per_gpu_gib": 8}, {"kv_cache_dtype": "int3"}, "serving.kv_cache_dtype is 'int3'"),
        ({"memory_per_gpu_gib": 8}, "fast", "serving is 'fast'; expected a mapping"),
    ],
)
def test_bad_settings_are_named(cluster: dict, serving: object, message: str) -> None:
    with pytest.raises(CapacityInputError, match=re.escape(message)):
        resolve_settings(read_model(LAB_MODEL), cluster, serving)


def test_max_model_len_is_required_without_max_position_embeddings() -> None:
    model = read_model(
        {key: value for key, value in LAB_MODEL.items() if key != "max_position_embeddings"}
    )
    with pytest.raises(CapacityInputError, match=re.escape("serving.max_model_len is missing")):
        resolve_settings(model, {"memory_per_gpu_gib": 8}, {})
