"""Checks of the whole inventory: the layout against the model's heads, ports, keys."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.filter.inventory_checks import (
    FilterModule,
    absolute_path_problems,
    bind_address_problems,
    byte_size_problems,
    disagreement_problems,
    env_file_problems,
    failed_checks,
    parallel_layout_problems,
    port_collisions,
    ports_held_elsewhere,
    range_problems,
    secret_problems,
)

LAB_MODEL = {"num_attention_heads": 2, "num_key_value_heads": 1, "num_hidden_layers": 2}
MINIMAX_M2 = {"num_attention_heads": 48, "num_key_value_heads": 8}
SPARKS = ["spark-1", "spark-2", "spark-3", "spark-4"]


def test_three_sparks_for_two_heads_names_the_layouts_that_work() -> None:
    problems = parallel_layout_problems(LAB_MODEL, SPARKS[:3], 1, "llmfleet_vllm_hosts")
    assert problems == [
        "3 hosts (spark-1, spark-2, spark-3) give tensor parallel 3, which does not divide the"
        " model's 2 attention heads and 1 KV heads (vLLM refuses it at start); layouts that work:"
        " tensor parallel 2 on 2 hosts (llmfleet_vllm_hosts: ['spark-1', 'spark-2']), or"
        " pipeline parallel across 3 hosts (tensor parallel 1, pipeline parallel 3), which this"
        " collection does not launch yet"
    ]


@pytest.mark.parametrize("hosts", [SPARKS[:1], SPARKS[:2], SPARKS[:4]])
def test_layouts_that_divide_the_heads_pass(hosts: list[str]) -> None:
    assert parallel_layout_problems(MINIMAX_M2, hosts) == []


def test_gpus_per_node_count_in_the_tensor_parallel_size() -> None:
    # GH200 box: 2 GPUs, one host; 3 GPUs would not divide 2 heads.
    assert parallel_layout_problems(LAB_MODEL, ["gh200-1"], 2) == []
    (problem,) = parallel_layout_problems(LAB_MODEL, ["gh200-1"], 3)
    assert problem.startswith("1 host x 3 GPUs (gh200-1) give tensor parallel 3")


def test_heads_of_a_multimodal_model_are_read_from_its_text_config() -> None:
    config = {
        "architectures": ["Qwen3VLMoe"],
        "text_config": {"num_attention_heads": 64, "num_key_value_heads": 4},
    }
    assert parallel_layout_problems(config, SPARKS[:2]) == []
    assert "64 attention heads and 4 KV heads" in parallel_layout_problems(config, SPARKS[:3])[0]


@pytest.mark.parametrize("config", [{}, None, {"architectures": ["X"]}])
def test_an_unknown_model_is_not_judged(config: object) -> None:
    assert parallel_layout_problems(config, SPARKS[:3]) == []


def test_layout_needs_hosts() -> None:
    with pytest.raises(AnsibleFilterError, match="needs a list of hosts"):
        parallel_layout_problems(LAB_MODEL, "spark-1")


def test_port_collisions_name_both_variables() -> None:
    assert port_collisions(
        {"vllm_server_port": 8000, "claude_code_router_port": "8000", "ray_node_port": 6379}
    ) == [
        "vllm_server_port and claude_code_router_port both use port 8000;"
        " each service on a host needs its own port"
    ]


def test_port_collisions_refuse_ports_out_of_range_and_ignore_absent_services() -> None:
    assert port_collisions(
        {"a_port": 0, "b_port": "http", "c_port": None, "d_port": "", "e_port": 65536}
    ) == [
        "a_port is 0; expected a TCP port 1..65535",
        "b_port is 'http'; expected a TCP port 1..65535",
        "e_port is 65536; expected a TCP port 1..65535",
    ]
    assert port_collisions({}) == []
    with pytest.raises(AnsibleFilterError, match="needs a mapping"):
        port_collisions([8000])


@pytest.mark.parametrize(
    "value",
    [
        "changeme",
        "CHANGE_ME-please-0123456789",
        "<your api key>",
        "xxxxxxxxxxxxxxxxxxxx",
        "your-api-key-goes-here!!",
    ],
)
def test_placeholders_are_refused_without_repeating_them(value: str) -> None:
    problems = secret_problems(value, "llmfleet_api_key")
    assert any("looks like a placeholder" in p for p in problems)
    assert all(value not in p for p in problems)


def test_short_and_empty_keys_are_refused() -> None:
    assert secret_problems("k3y-0f-12-chars", "llmfleet_api_key") == [
        "llmfleet_api_key has 15 characters; expected 16 or more (e.g. `openssl rand -hex 24`)"
    ]
    assert secret_problems("", "llmfleet_api_key")[0].startswith("llmfleet_api_key is empty")
    assert secret_problems(None, "x")[0].startswith("x is empty")


def test_a_generated_key_passes() -> None:
    assert secret_problems("3f1d2c9a8b7e6d5c4b3a29180706f5e4", "llmfleet_api_key") == []
    assert secret_problems("llmfleet-lab-key", "llmfleet_api_key") == []


def test_filters_are_registered() -> None:
    assert set(FilterModule().filters()) == {
        "parallel_layout_problems",
        "disagreement_problems",
        "port_collisions",
        "ports_held_elsewhere",
        "range_problems",
        "failed_checks",
        "secret_problems",
        "env_file_problems",
        "byte_size_problems",
        "absolute_path_problems",
        "bind_address_problems",
    }


@pytest.mark.parametrize(
    "key", ["a key with spaces in it!", 'k3y"quoted"-0123456', "line\nbreak-0123456789"]
)
def test_a_key_the_files_and_headers_cannot_hold_is_refused_without_repeating_it(key: str) -> None:
    (problem,) = secret_problems(key, "llmfleet_api_key")
    assert problem == (
        "llmfleet_api_key holds a space, a quote, a backslash or a control character; expected"
        " printable characters only (it is written into environment files and HTTP headers)"
    )


def test_an_environment_the_files_can_hold_passes() -> None:
    env = {"VLLM_USE_V1": "1", "OMP_NUM_THREADS": 4, "JSON": '{"a": 1}', "EMPTY": "", "NONE": None}
    assert env_file_problems(env, "vllm_server_env") == []
    assert env_file_problems(None, "vllm_server_env") == []


def test_each_line_the_files_cannot_hold_is_named_without_its_value() -> None:
    env = {
        "GOOD": "1",
        "BAD NAME": "1",
        "9LIVES": "1",
        "SPLIT": "a\nLD_PRELOAD=/tmp/x.so",
        "QUOTED": '"1"',
        "NESTED": {"a": 1},
    }
    problems = env_file_problems(env, "vllm_server_env")
    assert problems == [
        "vllm_server_env has 'BAD NAME'; expected environment variable names (letters, digits"
        " and _, not starting with a digit)",
        "vllm_server_env has '9LIVES'; expected environment variable names (letters, digits"
        " and _, not starting with a digit)",
        "vllm_server_env.SPLIT holds a line break, which would split the environment file;"
        " expected one line",
        "vllm_server_env.QUOTED starts with '\"', which systemd strips and the container engine"
        " keeps; expected a value without surrounding quotes or spaces",
        "vllm_server_env.NESTED is a dict; expected a string (JSON given as a string)",
    ]
    assert all("LD_PRELOAD" not in p for p in problems)
    assert env_file_problems(["A=1"], "ray_node_env") == [
        "ray_node_env is ['A=1']; expected a mapping of environment variables"
    ]


def test_range_problems_name_the_variable_the_value_and_the_range() -> None:
    assert range_problems(
        {
            "interval": [0, 1, None, "seconds"],
            "oom": ["5000", -1000, 1000, ""],
            "floor": [3.5, 0, 50, "percent"],
            "port": [8000, 1, 65535, ""],
            "unset": [None, 1, None, "seconds"],
            "word": ["soon", 1, None, "seconds"],
        }
    ) == [
        "interval is 0; expected 1 or more seconds",
        "oom is 5000; expected -1000..1000",
        "word is 'soon'; expected a number, 1 or more seconds",
    ]
    with pytest.raises(AnsibleFilterError, match="needs a mapping"):
        range_problems([1])
    with pytest.raises(AnsibleFilterError, match=r"needs \[value, low, high, unit\]"):
        range_problems({"interval": [1, 2]})


# `ss -ltnpH` on a served lab node (root), with sshd and another server beside our services.
SS_LISTENING = """\
LISTEN 0 128  0.0.0.0:22 0.0.0.0:* users:(("sshd",pid=130,fd=3))
LISTEN 0 128  [::]:22 [::]:* users:(("sshd",pid=130,fd=4))
LISTEN 0 2048 0.0.0.0:8000 0.0.0.0:* users:(("vllm",pid=2899,fd=12))
LISTEN 0 5    0.0.0.0:8009 0.0.0.0:* users:(("llmfleet-vllm-p",pid=3008,fd=3))
LISTEN 0 4096 *:6379 *:* users:(("gcs_server",pid=1976,fd=44))
LISTEN 0 511  0.0.0.0:3456 0.0.0.0:* users:(("node",pid=4364,fd=20))
LISTEN 0 4096 10.89.0.101:9100 0.0.0.0:* users:(("prometheus-node",pid=4090,fd=3))
LISTEN 0 4096 127.0.0.1:11434 0.0.0.0:* users:(("ollama",pid=77,fd=3))
LISTEN 0 4096 0.0.0.0:8080 0.0.0.0:*
"""


def test_ports_held_elsewhere_name_the_process_and_let_our_services_through() -> None:
    ours = {
        "vllm_server_port": 8000,
        "vllm_server_probe_port": "8009",
        "ray_node_port": 6379,
        "claude_code_router_port": 3456,
        "monitoring_node_exporter_port": 9100,
        "unset_port": None,
    }
    assert ports_held_elsewhere(ours, SS_LISTENING) == []
    assert ports_held_elsewhere(
        {"vllm_server_port": 22, "serving_gateway_port": 11434, "other_port": 8080}, SS_LISTENING
    ) == [
        "vllm_server_port is 22, where sshd (pid 130) already listens on this host;"
        " expected a port no other service holds",
        "serving_gateway_port is 11434, where ollama (pid 77) already listens on this host;"
        " expected a port no other service holds",
    ]
    # No ss output (a host not judged): no problem.
    assert ports_held_elsewhere({"vllm_server_port": 22}, "") == []
    with pytest.raises(AnsibleFilterError, match="needs a mapping"):
        ports_held_elsewhere([22], SS_LISTENING)


def test_sizes_the_container_engine_cannot_read_or_of_zero_are_named() -> None:
    assert byte_size_problems(
        {"vllm_server_shm_size": "16gigs", "ray_node_shm_size": "lots", "other": "0"}
    ) == [
        f"{variable} is {value!r}; expected a size above 0 such as 16g or 512m"
        " (a number, then B, K, M, G or T)"
        for variable, value in (
            ("vllm_server_shm_size", "16gigs"),
            ("ray_node_shm_size", "lots"),
            ("other", "0"),
        )
    ]


@pytest.mark.parametrize("size", ["16g", "16G", "512m", "1.5g", "16 g", "1073741824", None, ""])
def test_sizes_community_docker_reads_pass(size: object) -> None:
    assert byte_size_problems({"vllm_server_shm_size": size}) == []


def test_relative_paths_are_named_and_absolute_or_unset_ones_pass() -> None:
    assert absolute_path_problems(
        {
            "vllm_server_compile_cache_dir": "relative/cache",
            "ray_node_compile_cache_dir": "/var/cache/llmfleet/compile",
            "gpu_container_compile_cache_dir": "",
        }
    ) == [
        "vllm_server_compile_cache_dir is 'relative/cache'; expected an absolute path"
        " (starting with /)"
    ]


HOST_ADDRESSES = ["10.89.0.11", "192.168.100.11", "fe80::1%enp1s0f0np0"]


def test_an_address_the_host_does_not_have_is_named_with_those_it_has() -> None:
    assert bind_address_problems({"monitoring_listen_address": "1.2.3.4"}, HOST_ADDRESSES) == [
        "monitoring_listen_address is 1.2.3.4, an address this host does not have; expected"
        " 0.0.0.0 (every address), 127.0.0.1 or one of its addresses: 10.89.0.11,"
        " 192.168.100.11, fe80::1"
    ]


def test_digits_and_dots_that_are_no_address_are_named_even_without_facts() -> None:
    assert bind_address_problems({"vllm_server_host": "10.0.0.999"}, []) == [
        "vllm_server_host is '10.0.0.999', which is no IPv4 address; expected 0.0.0.0"
        " (every address), 127.0.0.1 or an address of this host"
    ]


@pytest.mark.parametrize(
    "address", ["0.0.0.0", "::", "[::]", "127.0.0.1", "::1", "192.168.100.11", "fe80::1",
                "localhost", "spark-1.lan", None, ""]
)  # fmt: skip
def test_wildcards_loopback_own_addresses_and_names_pass(address: object) -> None:
    assert bind_address_problems({"vllm_server_host": address}, HOST_ADDRESSES) == []


def test_without_the_hosts_addresses_a_well_formed_address_is_not_judged() -> None:
    assert bind_address_problems({"vllm_server_host": "1.2.3.4"}, []) == []


def test_the_form_checks_need_a_mapping() -> None:
    for check in (byte_size_problems, absolute_path_problems):
        with pytest.raises(AnsibleFilterError, match="needs a mapping"):
            check(["16g"])


class _ProblemReadOnce(dict):  # a check whose problem must not be read when it passed
    def __getitem__(self, key: str) -> object:
        if key == "problem":
            raise AssertionError("the problem of a check that passed was read")
        return super().__getitem__(key)


def test_failed_checks_give_the_problems_of_the_failed_checks_in_order() -> None:
    checks = [
        {"passed": False, "problem": "a is 1; expected 2"},
        _ProblemReadOnce(passed=True, problem="never read"),
        {"passed": False, "problem": "c is empty; expected a name"},
    ]
    assert failed_checks(checks) == ["a is 1; expected 2", "c is empty; expected a name"]
    assert failed_checks([{"passed": True, "problem": "x"}]) == []
    assert failed_checks([]) == []


@pytest.mark.parametrize(
    "checks",
    [[{"passed": "False", "problem": "x"}], [{"problem": "x"}], ["x"], "x", {"passed": True}],
)
def test_failed_checks_refuse_a_check_without_a_boolean(checks: object) -> None:
    with pytest.raises(AnsibleFilterError, match="failed_checks"):
        failed_checks(checks)


def test_settings_that_follow_one_variable_and_differ_are_named_with_it() -> None:
    shared = {
        "llmfleet_ray_port": {"ray_node_port": 6380, "vllm_server_ray_port": 6379},
        "llmfleet_nccl_env_file": {
            "nccl_env_file": "/etc/llmfleet/nccl.env",
            "ray_node_nccl_env_file": "/etc/llmfleet/nccl.env",
            "vllm_server_nccl_env_file": "/opt/nccl.env",
        },
    }
    assert disagreement_problems(shared) == [
        "ray_node_port is 6380 but vllm_server_ray_port is 6379; expected one value"
        " (set llmfleet_ray_port, which they all follow, instead)",
        "nccl_env_file is '/etc/llmfleet/nccl.env', ray_node_nccl_env_file is"
        " '/etc/llmfleet/nccl.env' but vllm_server_nccl_env_file is '/opt/nccl.env'; expected"
        " one value (set llmfleet_nccl_env_file, which they all follow, instead)",
    ]


def test_settings_that_agree_or_are_unused_are_no_problem() -> None:
    assert disagreement_problems({"llmfleet_ray_port": {"a": 6379, "b": "6379"}}) == []
    assert disagreement_problems({"llmfleet_ray_port": {"a": 6379, "b": None, "c": ""}}) == []
    assert disagreement_problems({"llmfleet_ray_port": {}}) == []
    assert disagreement_problems({}) == []


def test_disagreements_refuse_what_is_no_mapping() -> None:
    with pytest.raises(AnsibleFilterError, match="disagreement_problems"):
        disagreement_problems(["llmfleet_ray_port"])
