"""vllm_serve_config: profiles and topologies become the options vllm serve reads."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.filter.vllm import (
    FilterModule,
    smoke_failures,
    vllm_profile_problems,
    vllm_serve_config,
)

ROLE_DEFAULTS = Path(__file__).parents[4] / "roles" / "vllm_server" / "defaults" / "main.yml"
PROFILES = yaml.safe_load(ROLE_DEFAULTS.read_text())["vllm_server_profiles"]
TINY = {
    "model": "/opt/models/llmfleet-tiny",
    "served_model_name": "tiny",
    "tool_call_parser": "hermes",
}


def test_single_node_tensor_parallel_binds_explicitly() -> None:
    config = vllm_serve_config(
        PROFILES["minimax_m21_gh200"], {"host": "0.0.0.0", "port": 8000, "tensor_parallel_size": 2}
    )
    assert config == {
        "model": "/models/MiniMax-M2.1-FP8-INT4-AWQ",
        "served-model-name": "MiniMax-M2.1-FP8",
        "max-model-len": 163840,
        "max-num-seqs": 16,
        "gpu-memory-utilization": 0.95,
        "trust-remote-code": True,
        "enable-auto-tool-choice": True,
        "tool-call-parser": "minimax_m2",
        "reasoning-parser": "minimax_m2_append_think",
        "override-generation-config": json.dumps(
            {
                "frequency_penalty": 0.4,
                "repetition_penalty": 1.1,
                "temperature": 1,
                "top_k": 40,
                "top_p": 0.95,
            },
            separators=(",", ":"),
        ),
        "host": "0.0.0.0",
        "port": 8000,
        "tensor-parallel-size": 2,
        "disable-uvicorn-access-log": True,
    }


def test_ray_launch_runs_on_the_head_with_the_ray_executor() -> None:
    config = vllm_serve_config(
        PROFILES["minimax_m27_two_sparks"],
        {
            "host": "0.0.0.0",
            "port": 8000,
            "tensor_parallel_size": 2,
            "executor": "ray",
            "nnodes": 2,
            "node_rank": 0,
            "master_addr": "192.168.100.11",
        },
    )
    assert config["distributed-executor-backend"] == "ray"
    assert config["tensor-parallel-size"] == 2
    # Ray places the ranks: none of the multiprocessing rendezvous options.
    assert not {"nnodes", "node-rank", "master-addr", "master-port", "headless"} & set(config)
    for key, value in {
        "load-format": "fastsafetensors",
        "kv-cache-dtype": "fp8",
        "gpu-memory-utilization": 0.82,
        "max-num-batched-tokens": 8192,
        "enable-prefix-caching": True,
    }.items():
        assert config[key] == value


@pytest.mark.parametrize(("rank", "headless"), [(0, False), (1, True)])
def test_multi_node_without_ray(rank: int, headless: bool) -> None:
    config = vllm_serve_config(
        TINY,
        {
            "host": "0.0.0.0",
            "port": 8000,
            "tensor_parallel_size": 2,
            "executor": "mp",
            "nnodes": 2,
            "node_rank": rank,
            "master_addr": "192.168.100.11",
            "master_port": 29501,
        },
    )
    tail = {
        "tensor-parallel-size": 2,
        "distributed-executor-backend": "mp",
        "nnodes": 2,
        "node-rank": rank,
        "master-addr": "192.168.100.11",
        "master-port": 29501,
    }
    assert {k: config[k] for k in tail} == tail
    assert ("headless" in config) is headless
    # Only rank 0 serves the API.
    assert ("port" in config) is not headless


def test_tool_parser_always_comes_with_auto_tool_choice() -> None:
    config = vllm_serve_config({"model": "m", "tool_call_parser": "hermes"}, {"host": "::"})
    assert config["enable-auto-tool-choice"] is True
    assert "enable-auto-tool-choice" not in vllm_serve_config({"model": "m"}, {"host": "::"})


def test_an_option_that_takes_several_values_is_a_yaml_list() -> None:
    """vllm serve --config turns a list into the option followed by each value (how the lab
    loads its scripted model's logits processor)."""
    processors = ["llmfleet_lab_scripted_processor:ScriptedReplies"]
    config = vllm_serve_config({**TINY, "args": {"logits_processors": processors}}, {"host": "::"})
    assert config["logits-processors"] == processors
    assert yaml.safe_load(yaml.safe_dump(config))["logits-processors"] == processors


def test_every_shipped_profile_renders_and_round_trips_through_yaml() -> None:
    assert set(PROFILES) >= {
        "minimax_m27_two_sparks",
        "minimax_m21_gh200",
        "qwen3_vl_two_sparks",
        "tiny_lab",
    }
    for profile in PROFILES.values():
        config = vllm_serve_config(profile, {"host": "127.0.0.1", "tensor_parallel_size": 2})
        assert yaml.safe_load(yaml.safe_dump(config, sort_keys=False)) == config
        assert all("_" not in key for key in config)


@pytest.mark.parametrize(
    ("profile", "launch", "message"),
    [
        ({"model": "m", "max_len": 4}, {}, "unknown keys ['max_len']"),
        ({"served_model_name": "x"}, {}, "has no 'model'"),
        ({"model": "m", "env": ["A=1"]}, {}, "'env' must be a mapping"),
        ({"model": "m"}, {"host": "::", "executor": "spark"}, "executor is 'spark'"),
        (
            {"model": "m"},
            {"executor": "mp", "nnodes": 2, "node_rank": 2, "master_addr": "a"},
            "node_rank 2 is not in 0..1",
        ),
        ({"model": "m"}, {"executor": "mp", "nnodes": 2, "node_rank": 0}, "needs master_addr"),
        ({"model": "m"}, {"rank": 1}, "unknown launch keys ['rank']"),
        ({"model": "m"}, {"port": 8000}, "needs an explicit bind address"),
    ],
)
def test_bad_input_is_refused_naming_the_key(profile: dict, launch: dict, message: str) -> None:
    with pytest.raises(AnsibleFilterError, match=message.replace("[", r"\[").replace("]", r"\]")):
        vllm_serve_config(profile, launch)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "gpu_memory_utilization",
            0,
            "gpu_memory_utilization is 0; expected a fraction above 0 and at most 1",
        ),
        ("gpu_memory_utilization", 1.2, "gpu_memory_utilization is 1.2; expected a fraction"),
        ("gpu_memory_utilization", "most", "gpu_memory_utilization is 'most'; expected a fraction"),
        (
            "max_model_len",
            "128k",
            "max_model_len is '128k'; expected a whole number of tokens above 0",
        ),
        ("max_model_len", -1, "max_model_len is -1; expected a whole number of tokens"),
        ("max_num_seqs", 0, "max_num_seqs is 0; expected a whole number of sequences above 0"),
        ("max_num_seqs", True, "max_num_seqs is True; expected a whole number of sequences"),
        (
            "max_num_batched_tokens",
            2.5,
            "max_num_batched_tokens is 2.5; expected a whole number of tokens",
        ),
        ("dtype", "fp4", "dtype is 'fp4'; expected one of"),
        (
            "args",
            {"api_key": "k"},
            "args sets 'api_key', which the role owns: the API key reaches vLLM through its env",
        ),
        ("args", {"api-key": "k"}, "args sets 'api-key', which the role owns"),
        (
            "args",
            {"tensor-parallel-size": 3},
            "args sets 'tensor-parallel-size', which the role owns: it follows vllm_server_nodes",
        ),
        ("args", {"port": 9000}, "args sets 'port', which the role owns: set vllm_server_port"),
        # vllm_server_args reach the profile's args: the same numbers are checked there.
        (
            "args",
            {"max_num_seqs": 0},
            "args max_num_seqs is 0; expected a whole number of sequences",
        ),
        (
            "args",
            {"max-model-len": "128k"},
            "args max_model_len is '128k'; expected a whole number",
        ),
        ("env", {"VLLM_API_KEY": "k"}, "env sets VLLM_API_KEY: set llmfleet_api_key"),
        ("env", {"BAD NAME": "1"}, "env has 'BAD NAME'; expected environment variable names"),
        ("model_config", [2], "'model_config' must be a mapping"),
    ],
)
def test_values_vllm_would_refuse_are_refused_before_it_starts(
    key: str, value: object, message: str
) -> None:
    with pytest.raises(AnsibleFilterError, match=re.escape(message)):
        vllm_serve_config({**TINY, key: value}, {"host": "0.0.0.0"})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("gpu_memory_utilization", 1),
        ("gpu_memory_utilization", "0.82"),
        ("max_model_len", "131072"),
        ("dtype", "bfloat16"),
    ],
)
def test_good_values_pass(key: str, value: object) -> None:
    assert (
        vllm_serve_config({**TINY, key: value}, {"host": "0.0.0.0"})[key.replace("_", "-")] == value
    )


def test_filter_is_registered() -> None:
    assert FilterModule().filters()["vllm_serve_config"] is vllm_serve_config


OPENAI = {"api": "OpenAI chat completions", "kind": "openai", "path": "/v1/chat/completions"}
ANTHROPIC = {"api": "Anthropic messages", "kind": "anthropic", "path": "/v1/messages"}
BASE = "http://127.0.0.1:8000"


def test_smoke_answers_on_both_apis_are_no_failure() -> None:
    results = [
        {"item": OPENAI, "status": 200, "json": {"choices": [{"message": {"content": "Hi"}}]}},
        {"item": ANTHROPIC, "status": 200, "json": {"content": [{"type": "text", "text": "Hi"}]}},
    ]
    assert smoke_failures(results, BASE) == []


@pytest.mark.parametrize(
    ("result", "sentence"),
    [
        pytest.param(
            {"item": ANTHROPIC, "status": 404, "content": '{"detail":\n  "Not Found"}'},
            'http://127.0.0.1:8000/v1/messages answered HTTP 404: {"detail": "Not Found"}',
            id="an HTTP error, its body on one line",
        ),
        pytest.param(
            {"item": OPENAI, "status": -1, "msg": "Request failed: <urlopen error refused>"},
            "http://127.0.0.1:8000/v1/chat/completions did not answer: "
            "Request failed: <urlopen error refused>",
            id="no answer at all",
        ),
        pytest.param(
            {"item": ANTHROPIC, "status": 200, "json": {"choices": []}, "content": "{}"},
            "http://127.0.0.1:8000/v1/messages answered HTTP 200 without 'content': {}",
            id="an answer of the other API's shape",
        ),
        pytest.param(
            {"item": OPENAI, "status": 500, "content": "x" * 1000},
            "http://127.0.0.1:8000/v1/chat/completions answered HTTP 500: " + "x" * 300,
            id="a long body, cut",
        ),
    ],
)
def test_smoke_failures_say_the_url_the_status_and_the_body(result: dict, sentence: str) -> None:
    assert smoke_failures([result], BASE) == [sentence]


def test_smoke_failures_needs_a_loops_results() -> None:
    with pytest.raises(AnsibleFilterError, match="a list"):
        smoke_failures({"results": []})


def test_profile_problems_are_the_sentence_the_render_fails_with() -> None:
    # The overrides of one profile given keyed by its name (as vllm_server_profiles is): a key
    # the profile does not know. A check lists it with the role's other problems.
    keyed = {**TINY, "tiny_lab": {"tool_call_parser": "hermess"}}
    problems = vllm_profile_problems(keyed, {"host": "0.0.0.0"})
    assert len(problems) == 1
    assert problems[0].startswith("vLLM profile has unknown keys ['tiny_lab']")
    with pytest.raises(AnsibleFilterError, match=re.escape(problems[0])):
        vllm_serve_config(keyed, {"host": "0.0.0.0"})
    assert vllm_profile_problems({"served_model_name": "x"}, {"host": "0.0.0.0"}) == [
        "vLLM profile has no 'model' (a Hugging Face id or a local path)"
    ]
    assert vllm_profile_problems(TINY, {}) == [
        "the API needs an explicit bind address (launch 'host')"
    ]
    assert vllm_profile_problems(TINY, {"host": "0.0.0.0"}) == []
