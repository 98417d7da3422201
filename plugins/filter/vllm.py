"""Filters for launching vLLM: a model profile and a topology become `vllm serve --config` YAML."""

from __future__ import annotations

import hashlib
import json
import posixpath
import re

from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._images import speculative

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
    "python_files",
    "python_packages",
    "ray_env",
    "speculative_config",
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
    "speculative_config": "set the profile's speculative_config (checked against the image)",
}
# Profile keys vLLM reads as whole numbers above 0, and what they count.
POSITIVE_INTEGERS = {
    "max_model_len": ("tokens", "e.g. 131072, not '128k'"),
    "max_num_seqs": ("sequences", "e.g. 16"),
    "max_num_batched_tokens": ("tokens", "e.g. 8192"),
}
DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")
PYTHON_MODULE_FILE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\.py$")
# A distribution name (PEP 508's) and at most one version bound of the kinds a profile needs.
REQUIREMENT = re.compile(
    r"^(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)"
    r"\s*(?:(?P<op>==|>=|<=)\s*(?P<version>[0-9][0-9A-Za-z.+!-]*))?$"
)


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
    for key in ("generation_config", "args", "env", "model_config", "python_files", "ray_env"):
        if not isinstance(profile.get(key) or {}, dict):
            raise AnsibleFilterError(f"vLLM profile key '{key}' must be a mapping")
    config = profile.get("speculative_config")
    if not _empty(config):
        problem = speculative.shape_problem(config, profile.get("args"))
        if problem:
            raise AnsibleFilterError(f"vLLM profile {problem}")
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
    args = {str(key).replace("-", "_"): value for key, value in (profile.get("args") or {}).items()}
    for key, (counted, example) in POSITIVE_INTEGERS.items():
        for where, value in ((key, profile.get(key)), (f"args {key}", args.get(key))):
            if not _empty(value) and _positive_integer(value) is None:
                raise AnsibleFilterError(
                    f"vLLM profile {where} is {value!r}; expected a whole number of {counted}"
                    f" above 0 ({example})"
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
    _check_python(profile)


def _check_python(profile):
    """The profile's Ray environment, Python files and packages."""
    for key in profile.get("ray_env") or {}:
        if not re.match(r"^RAY_[A-Za-z0-9_]+$", str(key)):
            raise AnsibleFilterError(
                f"vLLM profile ray_env has {key!r}; expected Ray's own variables (RAY_...), which"
                " `ray start` reads on every node (vLLM's go under 'env')"
            )
    for name, source in (profile.get("python_files") or {}).items():
        if not PYTHON_MODULE_FILE.match(str(name)):
            raise AnsibleFilterError(
                f"vLLM profile python_files has {name!r}; expected a module's file name"
                " (e.g. sitecustomize.py), installed where the serving Python imports it"
            )
        if not isinstance(source, str) or not source.strip():
            raise AnsibleFilterError(
                f"vLLM profile python_files[{name!r}] is {source!r}; expected the file to install:"
                " a file of the role's files/python/ (e.g. gb10_cudnn_conv3d.py) or an absolute"
                " path on the controller"
            )
    packages = profile.get("python_packages") or []
    if not isinstance(packages, list):
        raise AnsibleFilterError(
            f"vLLM profile python_packages is {packages!r}; expected a list of pip requirements"
            " (e.g. ['qwen-vl-utils==0.0.14'])"
        )
    for requirement in packages:
        if parse_requirement(requirement) is None:
            raise AnsibleFilterError(
                f"vLLM profile python_packages has {requirement!r}; expected a pip requirement"
                " (a distribution name, optionally with one ==, >= or <= version, e.g."
                " qwen-vl-utils==0.0.14), never a pip option"
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


def _special_options(profile):
    """The options of the profile keys with their own handling: the parsers, speculative
    decoding, the generation defaults."""
    options = {}
    if not _empty(profile.get("tool_call_parser")):
        # Claude Code sends tools with tool_choice=auto: without both flags every request is a 400.
        options["enable-auto-tool-choice"] = True
        options["tool-call-parser"] = profile["tool_call_parser"]
    if not _empty(profile.get("reasoning_parser")):
        options["reasoning-parser"] = profile["reasoning_parser"]
    if not _empty(profile.get("speculative_config")):
        options["speculative-config"] = speculative.rendered(profile["speculative_config"])
    if not _empty(profile.get("generation_config")):
        options["override-generation-config"] = json.dumps(
            profile["generation_config"], separators=(",", ":"), sort_keys=True
        )
    return options


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
    config.update(_special_options(profile))

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


def parse_requirement(requirement):
    """``'qwen-vl-utils==0.0.14'`` -> ``('qwen-vl-utils', '==', '0.0.14')``; a name alone ->
    ``(name, None, None)``; anything else (pip options, URLs, markers) -> None."""
    if not isinstance(requirement, str):
        return None
    match = REQUIREMENT.match(requirement.strip())
    if not match:
        return None
    return match["name"], match["op"], match["version"]


def _normalized(name):
    return re.sub(r"[-_.]+", "-", str(name)).lower()


def _version_key(version):
    """A version's release numbers for ordering (``'0.0.14'`` -> (0, 0, 14)); what follows
    the first part that is not a number is ignored."""
    key = []
    for part in str(version).split("+", maxsplit=1)[0].split("."):
        digits = re.match(r"^\d+", part)
        if not digits:
            break
        key.append(int(digits.group()))
        if digits.group() != part:
            break
    while key and key[-1] == 0:
        key.pop()
    return tuple(key)


def vllm_python_files(contents, host_dir, target_dir):
    """The profile's Python files (``contents``: file name -> text) as the role installs
    them: each is written on the host to ``host_dir``/<stem>-<12 hex of its sha256>.py and
    mounted read-only at ``target_dir``/<name> (the directory the container's Python imports
    it from). The content in the file's name makes a change of content a change of the
    mount, so the container engine recreates the container with the new file (a single file
    mounted from the host keeps showing the file it was created with after it is replaced)."""
    if not isinstance(contents, dict):
        raise AnsibleFilterError("vllm_python_files expects a mapping of file names to their text")
    files = []
    for name in sorted(contents):
        text = contents[name]
        if not PYTHON_MODULE_FILE.match(str(name)) or not isinstance(text, str):
            raise AnsibleFilterError(
                f"vllm_python_files: {name!r} is not a module file name with text"
            )
        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        host_path = posixpath.join(host_dir, f"{name[:-3]}-{digest}.py")
        target = posixpath.join(target_dir, name)
        files.append(
            {
                "name": name,
                "content": text,
                "path": host_path,
                "target": target,
                "mount": f"{host_path}:{target}:ro",
            }
        )
    return files


def python_package_names(requirements):
    """The distribution names of pip requirements (what role vllm_server asks the serving
    Python about)."""
    names = []
    for requirement in requirements or []:
        parsed = parse_requirement(requirement)
        if parsed is None:
            raise AnsibleFilterError(f"{requirement!r} is not a pip requirement")
        names.append(parsed[0])
    return names


def python_package_problems(report, requirements, where):
    """What the serving Python's report says is missing from ``where`` (the image or the
    virtualenv) for ``requirements``: one sentence per requirement that is not installed, or
    not at a version it accepts. ``report`` is a JSON mapping of distribution names to their
    installed version (null where none), as role vllm_server's __vllm_server_package_report
    prints it: its stdout, or the mapping."""
    if isinstance(report, str):
        try:
            report = json.loads(report.strip().splitlines()[-1]) if report.strip() else None
        except ValueError:
            report = None
    if not isinstance(report, dict):
        return [f"{where}: its Python did not say which packages it has (no python3 there?)"]
    installed = {_normalized(name): version for name, version in report.items()}
    problems = []
    for requirement in requirements or []:
        parsed = parse_requirement(requirement)
        if parsed is None:
            raise AnsibleFilterError(f"{requirement!r} is not a pip requirement")
        name, op, version = parsed
        found = installed.get(_normalized(name))
        if found is None:
            problems.append(f"{where} lacks {name} (the profile requires {requirement})")
            continue
        if op is None:
            continue
        have, want = _version_key(found), _version_key(version)
        fits = {"==": have == want, ">=": have >= want, "<=": have <= want}[op]
        if not fits:
            problems.append(f"{where} has {name} {found}; the profile requires {requirement}")
    return problems


def speculative_model_problems(profile, model_config):
    """Why the model cannot serve the profile's speculative method (an MTP method and a model
    without MTP layers), as a list of one sentence or none."""
    problem = speculative.model_problem((profile or {}).get("speculative_config"), model_config)
    return [problem] if problem else []


def vllm_profile_problems(profile, launch):
    """Why ``profile`` renders no `vllm serve` configuration for ``launch`` (the sentence
    vllm_serve_config fails with), as a list of one sentence or none."""
    try:
        vllm_serve_config(profile, launch)
    except AnsibleFilterError as error:
        return [error.message]
    return []


class FilterModule:
    """vLLM launch filters."""

    def filters(self):
        return {
            "vllm_serve_config": vllm_serve_config,
            "vllm_profile_problems": vllm_profile_problems,
            "smoke_failures": smoke_failures,
            "vllm_python_files": vllm_python_files,
            "python_package_names": python_package_names,
            "python_package_problems": python_package_problems,
            "speculative_model_problems": speculative_model_problems,
        }
