"""Filters for launching vLLM: a model profile and a topology become `vllm serve --config` YAML."""

from __future__ import annotations

import json
import re

from ansible.errors import AnsibleFilterError

# Profile keys that map one-to-one onto a `vllm serve` option (underscores -> dashes).
PROFILE_OPTIONS = (
    "served_model_name",
    "max_model_len",
    "max_num_seqs",
    "max_num_batched_tokens",
    "gpu_memory_utilization",
    "kv_cache_dtype",
    "load_format",
    "quantization",
    "dtype",
    "trust_remote_code",
    "enable_prefix_caching",
)
# Profile keys with their own handling.
PROFILE_SPECIAL = (
    "model",
    "tool_call_parser",
    "reasoning_parser",
    "generation_config",
    "args",
    "env",
    "model_config",
    "checkpoint_bytes",
)
PROFILE_KEYS = PROFILE_SPECIAL[:1] + PROFILE_OPTIONS + PROFILE_SPECIAL[1:]

LAUNCH_KEYS = (
    "host",
    "port",
    "tensor_parallel_size",
    "executor",
    "nnodes",
    "node_rank",
    "master_addr",
    "master_port",
)
EXECUTORS = ("mp", "ray")
# vllm serve options the launch decides (the topology, the bind address) and the key, which
# reaches vLLM through its environment only: a profile's `args` must not set them.
ARGS_REFUSED = {
    "api_key": "the API key reaches vLLM through its environment: set llmfleet_api_key (vaulted)",
    "host": "set vllm_server_host",
    "port": "set vllm_server_port",
    "model": "set the profile's 'model'",
    "tensor_parallel_size": "it follows vllm_server_nodes and vllm_server_gpus_per_node",
    "pipeline_parallel_size": "this collection launches tensor parallel layouts only",
    "data_parallel_size": "this collection launches tensor parallel layouts only",
    "distributed_executor_backend": "set vllm_server_executor",
    "nnodes": "it follows vllm_server_nodes",
    "node_rank": "it follows the host's place in vllm_server_nodes",
    "master_addr": "it is rank 0's fabric address",
    "master_port": "set vllm_server_master_port",
    "headless": "every rank but 0 is headless",
}
# Profile keys vLLM reads as whole numbers above 0, and what they count.
POSITIVE_INTEGERS = {
    "max_model_len": ("tokens", "e.g. 131072, not '128k'"),
    "max_num_seqs": ("sequences", "e.g. 16"),
    "max_num_batched_tokens": ("tokens", "e.g. 8192"),
}
DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")


def _empty(value):
    return value is None or value in ("", {}, [])


def _check_profile(profile):
    if not isinstance(profile, dict):
        raise AnsibleFilterError(f"a vLLM profile must be a mapping, got {type(profile).__name__}")
    unknown = sorted(set(profile) - set(PROFILE_KEYS))
    if unknown:
        raise AnsibleFilterError(
            f"vLLM profile has unknown keys {unknown}; expected some of {list(PROFILE_KEYS)}"
            " (other vllm serve options go under 'args')"
        )
    if _empty(profile.get("model")):
        raise AnsibleFilterError("vLLM profile has no 'model' (a Hugging Face id or a local path)")
    for key in ("generation_config", "args", "env", "model_config"):
        if not isinstance(profile.get(key) or {}, dict):
            raise AnsibleFilterError(f"vLLM profile key '{key}' must be a mapping")
    check_values(profile)


def _positive_integer(value):
    """The whole number in ``value`` (an int, or a string of digits), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value) or None
    return None


def check_values(profile):
    """Refuse the values vLLM would refuse at start (a crash loop under systemd)."""
    utilization = profile.get("gpu_memory_utilization")
    if not _empty(utilization):
        try:
            fraction = float(utilization)
        except (TypeError, ValueError):
            fraction = -1.0
        if not 0 < fraction <= 1:
            raise AnsibleFilterError(
                f"vLLM profile gpu_memory_utilization is {utilization!r}; expected a fraction above"
                " 0 and at most 1 (e.g. 0.82), the share of each GPU's memory vLLM may take"
            )
    for key, (counted, example) in POSITIVE_INTEGERS.items():
        value = profile.get(key)
        if not _empty(value) and _positive_integer(value) is None:
            raise AnsibleFilterError(
                f"vLLM profile {key} is {value!r}; expected a whole number of {counted} above 0"
                f" ({example})"
            )
    dtype = profile.get("dtype")
    if not _empty(dtype) and dtype not in DTYPES:
        raise AnsibleFilterError(f"vLLM profile dtype is {dtype!r}; expected one of {list(DTYPES)}")
    for key in profile.get("args") or {}:
        name = str(key).replace("-", "_")
        if name in ARGS_REFUSED:
            raise AnsibleFilterError(
                f"vLLM profile args sets {key!r}, which the role owns: {ARGS_REFUSED[name]}"
                " (the args of the profile, of its overrides and of vllm_server_args)"
            )
    for key in profile.get("env") or {}:
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", str(key)):
            raise AnsibleFilterError(
                f"vLLM profile env has {key!r}; expected environment variable names"
            )
        if str(key) == "VLLM_API_KEY":
            raise AnsibleFilterError(
                "vLLM profile env sets VLLM_API_KEY: set llmfleet_api_key (vaulted) instead"
            )


def _check_launch(launch):
    unknown = sorted(set(launch) - set(LAUNCH_KEYS))
    if unknown:
        raise AnsibleFilterError(f"unknown launch keys {unknown}; expected {list(LAUNCH_KEYS)}")
    executor = launch.get("executor")
    if executor is not None and executor not in EXECUTORS:
        raise AnsibleFilterError(f"executor is {executor!r}; expected one of {list(EXECUTORS)}")
    nnodes = int(launch.get("nnodes") or 1)
    if nnodes > 1 and executor == "mp":
        rank = launch.get("node_rank")
        if rank is None or not 0 <= int(rank) < nnodes:
            raise AnsibleFilterError(f"node_rank {rank!r} is not in 0..{nnodes - 1}")
        if _empty(launch.get("master_addr")):
            raise AnsibleFilterError("a multi-node launch without Ray needs master_addr")


def vllm_serve_config(profile, launch):
    """The `vllm serve --config` mapping for one node.

    ``launch`` says where this node sits: ``host`` (required unless headless) and ``port`` to bind,
    ``tensor_parallel_size``, ``executor`` (None: vLLM picks, single node;
    ``mp``: multiprocessing, across nodes with ``nnodes``/``node_rank``/
    ``master_addr``/``master_port``, every rank but 0 ``--headless``; ``ray``:
    the Ray executor, run on the head of a running Ray cluster).
    """
    _check_profile(profile)
    launch = dict(launch or {})
    _check_launch(launch)
    config = {"model": profile["model"]}
    for key in PROFILE_OPTIONS:
        value = profile.get(key)
        if not _empty(value) and value is not False:
            config[key.replace("_", "-")] = value
    if not _empty(profile.get("tool_call_parser")):
        # Claude Code sends tools with tool_choice=auto: without both flags every request is a 400.
        config["enable-auto-tool-choice"] = True
        config["tool-call-parser"] = profile["tool_call_parser"]
    if not _empty(profile.get("reasoning_parser")):
        config["reasoning-parser"] = profile["reasoning_parser"]
    if not _empty(profile.get("generation_config")):
        config["override-generation-config"] = json.dumps(
            profile["generation_config"], separators=(",", ":"), sort_keys=True
        )

    nnodes = int(launch.get("nnodes") or 1)
    rank = int(launch.get("node_rank") or 0)
    headless = nnodes > 1 and launch.get("executor") == "mp" and rank > 0
    if not headless:
        if _empty(launch.get("host")):
            raise AnsibleFilterError("the API needs an explicit bind address (launch 'host')")
        config["host"] = str(launch["host"])
        config["port"] = int(launch.get("port") or 8000)
    if int(launch.get("tensor_parallel_size") or 1) > 1:
        config["tensor-parallel-size"] = int(launch["tensor_parallel_size"])
    executor = launch.get("executor")
    if executor is not None:
        config["distributed-executor-backend"] = executor
    if nnodes > 1 and executor == "mp":
        config["nnodes"] = nnodes
        config["node-rank"] = rank
        config["master-addr"] = str(launch["master_addr"])
        config["master-port"] = int(launch.get("master_port") or 29501)
        if headless:
            config["headless"] = True
    for key, value in (profile.get("args") or {}).items():
        config[str(key).replace("_", "-")] = value
    return config


# What an answer must hold, per API of the smoke requests (role vllm_server, smoke.yml).
SMOKE_ANSWER_KEYS = {"openai": "choices", "anthropic": "content"}
SMOKE_BODY_CHARS = 300


def smoke_failures(results, base_url=""):
    """One sentence per smoke request that got no answer: the URL, the HTTP status (or what
    the client said) and the start of the body. An answer is HTTP 200 with a JSON body that
    holds the API's answer (``choices`` for OpenAI's chat completions, ``content`` for
    Anthropic's messages)."""
    if not isinstance(results, list):
        raise AnsibleFilterError("smoke_failures expects a loop's results (a list)")
    failures = []
    for result in results:
        item = result.get("item") or {}
        url = "{0}{1}".format(base_url, item.get("path", ""))
        status = result.get("status", -1)
        body = result.get("json")
        key = SMOKE_ANSWER_KEYS.get(item.get("kind", "openai"), "choices")
        if status == 200 and isinstance(body, dict) and body.get(key):
            continue
        said = result.get("content") or result.get("msg") or "no answer"
        said = " ".join(str(said).split())[:SMOKE_BODY_CHARS]
        if status == 200:
            failures.append("{0} answered HTTP 200 without {1!r}: {2}".format(url, key, said))
        elif status == -1:
            failures.append("{0} did not answer: {1}".format(url, said))
        else:
            failures.append("{0} answered HTTP {1}: {2}".format(url, status, said))
    return failures


class FilterModule:
    """vLLM launch filters."""

    def filters(self):
        return {"vllm_serve_config": vllm_serve_config, "smoke_failures": smoke_failures}
