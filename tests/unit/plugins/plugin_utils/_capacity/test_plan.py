"""plugin_utils/_capacity/plan: KV bytes per token, KV cache tokens and maximum concurrency
per rank as vLLM computes and prints them, the layouts of a cluster, and why one fails."""

from __future__ import annotations

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._memory.units import GIB, MIB
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._capacity.inputs import (
    read_model,
    resolve_settings,
)
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._capacity.plan import (
    kv_bytes_per_token_per_layer,
    kv_cache_capacity,
    plan_capacity,
    plan_problems,
    plan_table,
    tensor_parallel_fits,
    weights_per_rank,
)

from .test_inputs import LAB_MODEL, QWEN3_VL

# The lab: two CPU nodes of 8 GiB, tensor parallel 2, VLLM_CPU_KVCACHE_SPACE=1 (the
# tiny_lab profile of roles/vllm_server).
LAB_CLUSTER = {"hosts": ["spark-1", "spark-2"], "device": "cpu", "unified_memory_gib": 8}

# MiniMax M2 / M2.1 (MiniMaxAI/MiniMax-M2 config.json): 62 layers, 48 heads, 8 KV heads, 128.
MINIMAX_M2 = {
    "architectures": ["MiniMaxM2ForCausalLM"],
    "model_type": "minimax_m2",
    "hidden_size": 3072,
    "intermediate_size": 1536,
    "num_hidden_layers": 62,
    "num_attention_heads": 48,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "num_local_experts": 256,
    "vocab_size": 200064,
    "max_position_embeddings": 196608,
    "torch_dtype": "bfloat16",
}
# Seed 000's checkpoint (MiniMax-M2.1-FP8-INT4-AWQ): FP8 attention, INT4 AWQ experts in
# groups of 32, as its model card describes them (the exact config.json was not at hand).
SEED_000_QUANTIZATION = {
    "quant_method": "compressed-tensors",
    "config_groups": {
        "attention": {"weights": {"num_bits": 8}},
        "experts": {"weights": {"num_bits": 4, "group_size": 32}},
    },
}
GH200_96GB = 97871 * MIB / GIB  # nvidia-smi: "NVIDIA GH200 480GB, 97871 MiB"


def lab_plan(kv_cache_gib: float = 1, max_model_len: int = 131072, **serving) -> dict:
    return plan_capacity(
        LAB_MODEL,
        LAB_CLUSTER,
        {"kv_cache_memory_gib": kv_cache_gib, "max_model_len": max_model_len, **serving},
    )


@pytest.mark.parametrize(
    ("kv_cache_gib", "max_model_len", "tokens", "concurrency"),
    [
        # 2 layers x 2 (K, V) x max(1, 1 KV head // TP 2) x 64 x 2 bytes = 512 bytes a token;
        # blocks of 128 tokens: 2^30 // (128 x 512) = 16,384 blocks = 2,097,152 tokens,
        # 16,384 / (131,072 / 128) = 16x.
        (1, 131072, 2_097_152, 16.0),
        (2, 2048, 4_194_304, 2048.0),
        # 5,000 tokens take ceil(5000 / 128) = 40 blocks: 16,384 / 40 = 409.6x, and vLLM
        # prints 409.6 x 5,000 = 2,048,000 tokens, not the 2,097,152 its blocks hold.
        (1, 5000, 2_048_000, 409.6),
    ],
)
def test_the_lab_model_gets_the_kv_cache_vllm_prints(
    kv_cache_gib: float, max_model_len: int, tokens: int, concurrency: float
) -> None:
    layout = lab_plan(kv_cache_gib, max_model_len)["layout"]
    assert layout["kv_bytes_per_token"] == 512
    assert layout["kv_cache_bytes"] == kv_cache_gib * GIB
    assert layout["kv_cache_tokens"] == tokens
    assert layout["max_concurrency"] == concurrency
    assert layout["fits"]


def test_block_size_16_gives_the_same_tokens_when_it_divides_evenly() -> None:
    # floor(2^30 / (16 x 2 x 2 x 1 x 64 x 2)) x 16 = 131,072 blocks x 16 tokens.
    layout = lab_plan(block_size=16)["layout"]
    assert layout["kv_cache_blocks"] == 131_072
    assert layout["kv_cache_tokens"] == 131_072 * 16 == 2_097_152
    assert layout["max_concurrency"] == 16.0


def test_pipeline_parallel_halves_the_layers_and_doubles_the_tokens() -> None:
    layout = lab_plan(tensor_parallel_size=1, pipeline_parallel_size=2)["layout"]
    assert layout["kv_bytes_per_token"] == 256  # one layer on each rank
    assert (layout["kv_cache_tokens"], layout["max_concurrency"]) == (4_194_304, 32.0)


def test_kv_heads_are_split_by_tensor_parallel_and_replicated_below_one() -> None:
    model = read_model(MINIMAX_M2)
    # 2 x max(1, 8 // TP) x 128 x 2 bytes
    assert [kv_bytes_per_token_per_layer(model, tp, 2) for tp in (1, 2, 8, 16)] == [
        4096,
        2048,
        512,
        512,
    ]
    assert kv_bytes_per_token_per_layer(model, 2, 1) == 1024  # fp8 KV cache


def test_mla_keeps_one_latent_on_every_tensor_parallel_rank() -> None:
    model = read_model(
        {**MINIMAX_M2, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "num_key_value_heads": 48}
    )
    # (512 + 64) x 2 bytes, whatever TP is: the latent is not split.
    assert [kv_bytes_per_token_per_layer(model, tp, 2) for tp in (1, 8)] == [1152, 1152]


@pytest.mark.parametrize(
    ("tp", "heads", "kv_heads", "fits"),
    [
        (2, 2, 1, True),
        (3, 2, 1, False),
        (4, 48, 8, True),
        (16, 48, 8, True),
        (32, 64, 8, True),
        (6, 48, 8, False),
        (4, 64, 6, False),
        (1, 7, 7, True),
        (12, 48, 8, False),  # more ranks than KV heads, and 8 does not divide 12
        (0, 2, 1, False),
    ],
)
def test_tensor_parallel_rule(tp: int, heads: int, kv_heads: int, fits: bool) -> None:
    assert tensor_parallel_fits(tp, heads, kv_heads) is fits


def test_weights_per_rank_hold_their_layers_and_one_embedding_matrix() -> None:
    model = read_model(LAB_MODEL, checkpoint_bytes=4_784_128)
    # Embeddings 2 x 8192 x 128 x 2 bytes = 4,194,304; layers 589,824.
    assert weights_per_rank(model, 1, 1) == 4_784_128
    assert weights_per_rank(model, 2, 1) == 4_784_128 // 2
    # PP 2: one layer (294,912 bytes) and one matrix (2,097,152) on each stage.
    assert weights_per_rank(model, 1, 2) == 294_912 + 2_097_152


def test_seed_000_minimax_m2_1_on_two_gh200_is_reproduced() -> None:
    """Seed 000: TP 2 on two GH200 96GB, gpu_memory_utilization 0.95, max_model_len
    163,840: vLLM printed "GPU KV cache size: 235,280 tokens" and "Maximum concurrency for
    163,840 tokens per request: 1.44x"."""
    model = read_model({**MINIMAX_M2, "quantization_config": SEED_000_QUANTIZATION})
    settings = resolve_settings(
        model,
        {"gpus_per_host": 2, "memory_per_gpu_gib": GH200_96GB},
        {"gpu_memory_utilization": 0.95, "max_model_len": 163840},
    )
    # 62 layers x 2 x (8 / 2) x 128 x 2 bytes = 126,976 bytes a token per GPU; vLLM's
    # 235,280 tokens are 14,705 blocks of 16, 27.82 GiB a GPU: given that memory, the
    # planner prints vLLM's figures exactly.
    capacity = kv_cache_capacity(model, settings, 2, 1, 14_705 * 16 * 126_976)
    assert capacity["kv_bytes_per_token"] == 126_976
    assert capacity["kv_cache_tokens"] == 235_280
    assert f"{capacity['max_concurrency']:.2f}" == "1.44"  # 14,705 / 10,240 blocks
    # Forward, from the GPU's memory: 0.95 x 95.58 GiB = 90.80 GiB, less the weights estimated
    # from config.json (the FP8 attention's 2.73e9 parameters at 8 bits, the INT4 experts'
    # 224.7e9 at 4.5, the routers' 48.8e6 and two embedding matrices at bf16: 122.63 GiB,
    # 61.31 GiB a GPU) and the 2 GiB allowance: 27.49 GiB, 14,526 blocks, 232,416 tokens,
    # 1.42x, 1.2% under what vLLM printed. The note's "~140GB" of weights (65.2 GiB a GPU)
    # cannot be exact: 90.80 - 27.82 leaves 62.98 GiB a GPU for weights and all the rest.
    layout = plan_capacity(
        {**MINIMAX_M2, "quantization_config": SEED_000_QUANTIZATION},
        {"gpus_per_host": 2, "memory_per_gpu_gib": GH200_96GB},
        {"gpu_memory_utilization": 0.95, "max_model_len": 163840},
    )["layout"]
    weights = 2_730_491_904 * 8 / 8 + 224_680_476_672 * 4.5 / 8 + 48_758_784 * 2
    assert layout["weights_per_rank_bytes"] == int(weights + 2 * 614_596_608 * 2) // 2
    assert layout["kv_cache_tokens"] == 14_526 * 16 == 232_416
    assert abs(layout["kv_cache_tokens"] - 235_280) / 235_280 < 0.02
    assert f"{layout['max_concurrency']:.2f}" == "1.42"


def test_qwen3_vl_on_two_sparks() -> None:
    # Seed 003: two Sparks (one GB10 each, unified memory), TP 2, gpu_memory_utilization 0.7.
    plan = plan_capacity(
        QWEN3_VL,
        {"hosts": ["spark-1", "spark-2"], "unified_memory_gib": 120},
        {"gpu_memory_utilization": 0.7, "max_model_len": 262144},
    )
    layout = plan["layout"]
    # 94 layers x 2 x (4 / 2) x 128 x 2 bytes
    assert layout["kv_bytes_per_token"] == 96_256
    # Weights 124,001,758,208 / 2 = 62,000,879,104 bytes (the vision encoder split over TP
    # like the rest); KV memory 0.7 x 120 GiB - that - 2 GiB = 26,045,950,464 bytes; blocks of
    # 16 tokens take 94 x 16 x 1,024 = 1,540,096 bytes: 16,911 blocks, 16,911 / 16,384 =
    # 1.03x at 262,144.
    assert layout["weights_per_rank_bytes"] == 62_000_879_104
    assert layout["kv_cache_bytes"] == 26_045_950_464
    assert layout["kv_cache_blocks"] == 16_911
    assert layout["kv_cache_tokens"] == 270_576
    assert layout["max_concurrency"] == 1.0322
    assert layout["fits"]
    # Four GPUs would split the 4 KV heads once each; three do not divide 64 heads.
    assert [
        (row["tensor_parallel_size"], row["pipeline_parallel_size"]) for row in plan["layouts"]
    ] == [
        (2, 1),
        (1, 2),
        (1, 1),
    ]


def test_a_hybrid_sliding_window_model_holds_the_window_and_the_tokens_in_flight() -> None:
    gpt_oss = {
        "num_hidden_layers": 36,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "sliding_window": 128,
        "layer_types": ["sliding_attention", "full_attention"] * 18,
        "torch_dtype": "bfloat16",
        "max_position_embeddings": 131072,
    }
    hybrid = plan_capacity(gpt_oss, {"memory_per_gpu_gib": 80}, {"kv_cache_memory_gib": 10})
    # Groups of 18 layers, 2 x 8 x 64 x 2 = 2,048 bytes a token each: blocks of 16 tokens
    # take 589,824 bytes, 10 GiB hold 18,204. A request: 131,072 / 16 = 8,192 blocks of
    # the full group, ceil((128 - 1 + 2 x 8,192) / 16) + 1 = 1,033 of the sliding one.
    assert hybrid["layout"]["kv_cache_blocks"] == 18_204
    assert hybrid["layout"]["max_concurrency"] == round(18_204 / 9_225, 4)
    assert hybrid["layout"]["kv_cache_tokens"] == int(18_204 / 9_225 * 131_072) == 258_648
    assert any(
        "sliding window: 18 of 36 layers keep 128 tokens" in a for a in hybrid["assumptions"]
    )
    # Without the hybrid allocator every layer keeps every token: 36 layers a block.
    full = plan_capacity(
        gpt_oss, {"memory_per_gpu_gib": 80}, {"kv_cache_memory_gib": 10, "hybrid_kv_cache": False}
    )
    assert full["layout"]["kv_cache_blocks"] == 10 * GIB // (36 * 16 * 2048) == 9_102
    assert full["layout"]["kv_cache_tokens"] == 9_102 * 16


def test_layouts_over_all_hosts_then_fewer() -> None:
    plan = plan_capacity(
        MINIMAX_M2,
        {"hosts": 2, "gpus_per_host": 2, "memory_per_gpu_gib": 96},
        {"max_model_len": 8192},
    )
    assert [
        (row["hosts"], row["tensor_parallel_size"], row["pipeline_parallel_size"])
        for row in plan["layouts"]
    ] == [
        (2, 4, 1),
        (2, 2, 2),
        (2, 1, 4),
        (1, 2, 1),
        (1, 1, 2),
    ]
    # bf16 weights (227,459,727,360 x 2 + 2 x 614,596,608 x 2 bytes = 425.97 GiB) fit on
    # none of them: a quarter is 106.49 GiB.
    assert not any(row["fits"] for row in plan["layouts"])
    assert plan["layouts"][0]["problems"][0].startswith("weights need 106.49 GiB per GPU")


def test_a_layout_that_does_not_divide_the_heads_is_refused_with_those_that_fit() -> None:
    plan = plan_capacity(
        LAB_MODEL,
        {**LAB_CLUSTER, "hosts": ["spark-1", "spark-2", "spark-3"]},
        {"kv_cache_memory_gib": 1, "max_model_len": 131072},
    )
    assert plan_problems(plan) == [
        "tensor parallel 3 x pipeline parallel 1 on 3 hosts: tensor parallel 3 does not divide "
        "the model's 2 attention heads",
        "layouts that fit: tensor parallel 2 x pipeline parallel 1 on 2 hosts, tensor parallel 1 "
        "x pipeline parallel 2 on 2 hosts, tensor parallel 1 x pipeline parallel 1 on 1 host",
    ]


def test_kv_heads_that_do_not_divide_tensor_parallel_are_refused() -> None:
    plan = plan_capacity(
        {**LAB_MODEL, "num_attention_heads": 12, "num_key_value_heads": 3, "head_dim": 64},
        {"gpus_per_host": 4, "memory_per_gpu_gib": 80},
        {"max_model_len": 4096},
    )
    assert plan["layout"]["problems"] == [
        "tensor parallel 4 and the model's 3 KV heads: neither divides the other"
    ]


def test_a_kv_cache_shorter_than_max_model_len_is_refused_with_the_longest_that_fits() -> None:
    plan = lab_plan(max_model_len=4_194_304)
    # 16,384 blocks, one kept back by vLLM: 16,383 x 128 = 2,097,024 tokens at most.
    assert plan["layout"]["longest_max_model_len"] == 2_097_024
    assert plan_problems(plan)[0] == (
        "tensor parallel 2 x pipeline parallel 1 on 2 hosts: the KV cache (1.00 GiB per GPU, "
        "2,097,152 tokens) cannot hold one request of max_model_len 4,194,304 tokens; the "
        "longest that fits is 2,097,024"
    )
    assert plan_problems(plan)[-1] == "no layout of this cluster fits at max_model_len 4,194,304"


def test_weights_and_allowance_beyond_the_memory_are_refused() -> None:
    plan = plan_capacity(
        {**MINIMAX_M2, "quantization_config": SEED_000_QUANTIZATION},
        {"memory_per_gpu_gib": 80},
        {"max_model_len": 163840},
    )
    (problem,) = plan["layout"]["problems"]
    assert problem == (
        "weights need 122.63 GiB per GPU, with the 2.00 GiB allowance 124.63 GiB, more than "
        "gpu_memory_utilization 0.9 x 80.00 GiB = 72.00 GiB"
    )


def test_ranks_that_are_not_the_clusters_gpus_are_refused() -> None:
    plan = lab_plan(tensor_parallel_size=1)
    assert plan["layout"]["problems"][0] == (
        "tensor parallel 1 x pipeline parallel 1 = 1 ranks, but the cluster has 2 GPUs: vLLM "
        "runs one rank per GPU it is started on"
    )
    assert not plan["layout"]["fits"]


def test_a_fitting_layout_has_no_problems() -> None:
    assert plan_problems(lab_plan()) == []


def test_the_table_shows_every_layout_and_the_assumptions() -> None:
    table = plan_table(lab_plan())
    assert "| 2 | 2 | 1 | 0.00 GiB | 512 B | 1.00 GiB | 2,097,152 | 16.00x | yes |" in table
    assert "| 1 | 1 | 1 | 0.00 GiB | 512 B | 1.00 GiB | 2,097,152 | 16.00x | yes |" in table
    assert (
        "Asked for: tensor parallel 2 x pipeline parallel 1 on 2 hosts, max_model_len 131,072: "
        "fits, 2,097,152 tokens, 16.00x"
    ) in table
    assert "- KV cache per rank: exactly 1 GiB (kv_cache_memory_gib" in table
    assert "- KV heads fewer than TP ranks are replicated: one per rank" in table


def test_gpu_assumptions_name_the_allowance_and_what_the_planner_cannot_know() -> None:
    plan = plan_capacity(
        MINIMAX_M2, {"memory_per_gpu_gib": 96, "gpus_per_host": 8}, {"overhead_gib": 3}
    )
    (memory,) = [a for a in plan["assumptions"] if a.startswith("KV cache per rank")]
    assert "gpu_memory_utilization 0.9 x 96.00 GiB - weights - 3.00 GiB allowance" in memory
    assert "activation peak, CUDA graphs" in memory
