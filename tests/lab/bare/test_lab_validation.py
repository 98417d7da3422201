"""Bad input is refused before any host changes.

Each case is one bad value: the message must name the host, the variable, the bad value and
what is expected, and no node may differ afterwards (netplan, /etc files, units, swap, links,
addresses, containers). The validation play reports every check's problem before it stops,
so the cases run in batches, one run each: the cases of a batch set different variables and
fail different checks (CHECKS), and each case's message must be there, on each host it
names. The cases in UP_CASES run the real `llmfleet up -i inventory/lab` (site.yml, whose
first play it is) and show that no later play runs; the others run `llmfleet check`, the
same play on its own, which spares each run the parsing of site.yml. The nodes' state is
taken before and after every run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from ..conftest import Lab, snapshot

BOTH = ("spark-1", "spark-2")


# Cases run through `llmfleet up` (site.yml) rather than `llmfleet check`: one per phase
# whose value would otherwise be used first (fabric, serving, clients).
UP_CASES = {"missing_port", "ray_head_is_not_the_api_host", "client_command_with_a_path"}


def run_llmfleet(lab: Lab, command: str, *extra_vars: str) -> tuple[int, str]:
    args = ["llmfleet", command, "-i", "inventory/lab", "--plain"]
    for value in extra_vars:
        args += ["-e", value]
    proc = lab.run(*args, timeout=600)
    return proc.returncode, proc.stdout + proc.stderr


def up(lab: Lab, *extra_vars: str, command: str = "up") -> str:
    returncode, output = run_llmfleet(lab, command, *extra_vars)
    assert returncode in (2, 3), output[-4000:]
    # (`check` shows no task stream, only what failed and its recap.)
    if command != "check":
        assert "== PLAY: Check the whole inventory before any host changes" in output
    # The validation play stopped it: no host ran a task of a later play.
    after_validation = output.partition("== PLAY: Set up and prove the CX7 fabric")[2]
    assert not re.search(r"^\[(spark-\d|localhost)\] ", after_validation, re.M), output[-4000:]
    return output


def overrides(**profile: object) -> str:
    return json.dumps({"vllm_server_profile_overrides": profile})


# (case, extra vars, hosts whose failure is reported, what the message must say)
CASES = [
    ("mtu", ["cx7_network_mtu=9500"], BOTH, ["cx7_network_mtu is 9500; expected 1280..9216"]),
    (
        "missing_port",
        ['{"llmfleet_fabric_ports": [0]}'],
        BOTH,
        ["needs enp1s0f0np0, enP2p1s0f0np0, which this host does not have", "cx7_network_ports"],
    ),
    (
        "shared_subnet",
        [
            json.dumps(
                {
                    "llmfleet_fabric_subnets": {
                        "enp1s0f1np1": "192.168.100.0/24",
                        "enP2p1s0f1np1": "192.168.100.0/24",
                    }
                }
            )
        ],
        BOTH,
        ["cx7_network_subnets", "192.168.100.0/24"],
    ),
    (
        "floor_above_line_rate",
        ["rdma_verify_min_aggregate_gbits=250"],
        BOTH,
        [
            "rdma_verify_min_aggregate_gbits=250",
            "at most the line rate rdma_verify_line_rate_gbits=200",
        ],
    ),
    (
        "floor_zero",
        ["rdma_verify_min_rail_gbits=0"],
        BOTH,
        ["rdma_verify_min_rail_gbits=0", "must be above 0"],
    ),
    (
        "unknown_nccl_mode",
        ["llmfleet_nccl_mode=infiniband"],
        BOTH,
        ["nccl_env_mode", "infiniband", "ib, socket, gloo"],
    ),
    (
        "gid_index",
        ["nccl_env_gid_index=three"],
        BOTH,
        ["nccl_env_gid_index is three; expected auto or a number"],
    ),
    (
        # A role's variable set apart from the others that follow the same collection-wide one.
        "nccl_env_file_set_alone",
        ["nccl_env_file=/etc/llmfleet/nccl-own.env"],
        BOTH,
        [
            "nccl_env_file is '/etc/llmfleet/nccl-own.env'",
            "vllm_server_nccl_env_file is '/etc/llmfleet/nccl.env'; expected one value"
            " (set llmfleet_nccl_env_file, which they all follow, instead)",
        ],
    ),
    (
        "utilization_above_one",
        ["llmfleet_gpu_memory_utilization=1.5"],
        BOTH,
        ["preflight_gpu_memory_utilization is 1.5; expected a fraction above 0 and at most 1"],
    ),
    (
        "stale_container_name",
        ['{"preflight_stale_containers": ["llmfleet-vllm; rm -rf /"]}'],
        BOTH,
        ["preflight_stale_containers has llmfleet-vllm; rm -rf /", "expected container names"],
    ),
    (
        "object_store_too_small",
        ["ray_node_object_store_bytes=1000"],
        BOTH,
        ["ray_node_object_store_bytes is 1000; expected 78643200 or more bytes (Ray's minimum)"],
    ),
    (
        "empty_image",
        ["llmfleet_deployment=container", "llmfleet_vllm_image="],
        BOTH,
        ["ray_node_image (llmfleet_vllm_image) is ''", "needs an image reference"],
    ),
    (
        "unknown_profile",
        ["llmfleet_vllm_profile=minimax"],
        BOTH,
        ["vllm_server_profile is 'minimax'", "tiny_lab"],
    ),
    (
        "profile_utilization_zero",
        [overrides(gpu_memory_utilization=0)],
        BOTH,
        ["gpu_memory_utilization is 0; expected a fraction above 0 and at most 1"],
    ),
    (
        "max_model_len_128k",
        [overrides(max_model_len="128k")],
        BOTH,
        ["max_model_len is '128k'; expected a whole number of tokens above 0"],
    ),
    ("max_num_seqs_zero", [overrides(max_num_seqs=0)], BOTH, ["max_num_seqs is 0"]),
    (
        # A type an argument spec accepts, a value systemd, the probe or the kernel refuses.
        "supervision_out_of_range",
        ["vllm_server_probe_interval=0", "vllm_server_oom_score_adjust=5000"],
        BOTH,
        [
            "vllm_server_probe_interval is 0; expected 1 or more seconds",
            "vllm_server_oom_score_adjust is 5000; expected -1000..1000",
        ],
    ),
    (
        # A port another process of the host holds.
        "vllm_port_held_by_sshd",
        ["vllm_server_port=22"],
        BOTH,
        ["vllm_server_port is 22, where sshd (pid", "already listens on this host"],
    ),
    (
        # A port Ray takes on its head at its defaults.
        "vllm_port_is_rays_dashboard",
        ["vllm_server_port=8265"],
        ("spark-1",),
        ["vllm_server_port and Ray's dashboard both use port 8265"],
    ),
    (
        "context_above_the_model",
        [overrides(max_model_len=262144)],
        BOTH,
        ["sets max_model_len 262144, above the model's max_position_embeddings 131072"],
    ),
    (
        "kv_cache_below_one_request",
        [overrides(max_model_len=4194304, env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"})],
        BOTH,
        [
            "the KV cache (1.00 GiB per GPU, 2,097,152 tokens) cannot hold one request of"
            " max_model_len 4,194,304 tokens; the longest that fits is 2,097,024"
        ],
    ),
    (
        "key_in_profile_args",
        [overrides(args={"api_key": "sk-in-the-profile"})],
        BOTH,
        ["args sets 'api_key', which the role owns", "llmfleet_api_key"],
    ),
    (
        "tensor_parallel_in_args",
        [overrides(args={"tensor-parallel-size": 4})],
        BOTH,
        ["args sets 'tensor-parallel-size'"],
    ),
    # The settings check says every problem at once: a key the profile does not know (a
    # filter's error in it once hid them all) and a model name the clients ask for that the
    # profile does not serve.
    (
        "unknown_profile_key_and_clients_model_not_served",
        [overrides(max_len=4096), "llmfleet_served_model=my model"],
        BOTH,
        [
            "profile tiny_lab (vllm_server_profiles, with vllm_server_profile_overrides merged in):"
            " vLLM profile has unknown keys ['max_len']",
            'llmfleet_served_model is "my model", the model Claude Code, claude-code-router and the'
            " benchmark ask for, but profile tiny_lab serves llmfleet-tiny",
        ],
    ),
    (
        "model_missing",
        [overrides(model="/opt/models/absent")],
        BOTH,
        ["/opt/models/absent/config.json does not exist on this host"],
    ),
    (
        "port_out_of_range",
        ["vllm_server_port=70000"],
        BOTH,
        ["vllm_server_port is 70000; expected 1..65535"],
    ),
    (
        "ray_client_address",
        ['{"vllm_server_env": {"RAY_ADDRESS": "ray://192.168.100.11:10001"}}'],
        BOTH,
        ["RAY_ADDRESS=ray://192.168.100.11:10001", "one GPU"],
    ),
    (
        "placeholder_key",
        ["llmfleet_api_key=changeme-changeme-changeme"],
        BOTH,
        ["vllm_server_api_key (llmfleet_api_key) looks like a placeholder"],
    ),
    (
        "short_key",
        ["llmfleet_api_key=k3y-0f-12-ch"],
        BOTH,
        ["vllm_server_api_key (llmfleet_api_key) has 12 characters; expected 16 or more"],
    ),
    (
        "router_key_placeholder",
        ["claude_code_router_api_key=<your api key>"],
        ("spark-1",),
        ["claude_code_router_api_key looks like a placeholder"],
    ),
    (
        "router_port_is_vllm_port",
        ["claude_code_router_port=8000"],
        ("spark-1",),
        ["vllm_server_port and claude_code_router_port both use port 8000"],
    ),
    (
        "prometheus_port_is_node_exporter_port",
        ["monitoring_prometheus_port=9100"],
        ("spark-1",),
        ["monitoring_prometheus_port", "9100"],
    ),
    (
        "ray_head_is_not_the_api_host",
        ["llmfleet_vllm_executor=ray", '{"llmfleet_vllm_hosts": ["spark-2", "spark-1"]}'],
        ("spark-1",),
        ["The Ray head is spark-1", "vLLM's rank 0, which serves the API, is spark-2"],
    ),
    (
        "vllm_host_outside_the_sparks",
        ['{"llmfleet_vllm_hosts": ["spark-1", "spark-9"]}'],
        ("spark-1",),
        [
            "llmfleet_vllm_hosts is ['spark-1', 'spark-9']",
            "expected two or more hosts of the sparks group",
        ],
    ),
    (
        "group_size_does_not_divide_the_sparks",
        ["llmfleet_group_size=3"],
        BOTH,
        [
            "llmfleet_group_size is 3 but the sparks group has 2 hosts (spark-1, spark-2)",
            "expected a size that divides 2: 1, 2",
        ],
    ),
    (
        "router_version_floating",
        ["claude_code_router_version=latest"],
        ("spark-1",),
        ["claude_code_router_version", "latest"],
    ),
    (
        "router_endpoint_not_http",
        ["llmfleet_endpoint_url=ftp://spark-1:8000"],
        ("spark-1",),
        ["claude_code_router_upstream_url is 'ftp://spark-1:8000'", "base URL"],
    ),
    (
        "weights_without_room",
        ["model_weights_space_margin_gib=100000"],
        BOTH,
        ["/opt/models/llmfleet-tiny needs", "plus a margin of 100000 GiB", "free"],
    ),
    (
        "weights_revision_unknown",
        ["model_weights_hub_revision=no-such-branch"],
        ("spark-1",),
        ["llmfleet/llmfleet-tiny", "no-such-branch"],
    ),
    (
        "weights_path_relative",
        ["model_weights_path=models/tiny"],
        BOTH,
        ['model_weights_path is "models/tiny"; expected the absolute path'],
    ),
    (
        "weights_fetched_on_the_controller_from_a_host_folder",
        [json.dumps({"model_weights_fetch_on_controller": True, "model_weights_source": "host"})],
        BOTH,
        [
            "model_weights_fetch_on_controller is true, but model_weights_source is",
            '"host"; expected hub',
        ],
    ),
    (
        "weights_from_an_empty_controller_folder",
        ["model_weights_source=controller", "model_weights_source_path=/no/tiny"],
        BOTH,
        ["the controller: model_weights_source_path /no/tiny holds no file; expected the model's"],
    ),
    (
        "client_command_with_a_path",
        ["claude_code_command_name=../bin/claude"],
        ("localhost",),
        ["claude_code_command_name is '../bin/claude'; expected a file name"],
    ),
    # An address without its prefix length was "not in its subnet" (an address alone is a /32).
    (
        "fabric_address_without_prefix",
        ['{"cx7_network_addresses": {"enp1s0f1np1": "192.168.100.11"}}'],
        BOTH,
        [
            "enp1s0f1np1: 192.168.100.11 has no prefix length; expected an address/prefix of its"
            " subnet 192.168.100.0/24, such as 192.168.100.11/24",
            "(check cx7_network_addresses",
        ],
    ),
    # A model folder that is a file gave only stat's "Not a directory".
    (
        "model_folder_is_a_file",
        [overrides(model="/etc/hostname")],
        BOTH,
        ["profile tiny_lab serves the model at /etc/hostname, which is a file on this host"],
    ),
    (
        "weights_folder_is_a_file",
        ["model_weights_path=/etc/hostname/tiny"],
        BOTH,
        [
            'model_weights_path is "/etc/hostname/tiny", which cannot hold the model on this host:'
            " /etc/hostname/tiny goes through a file (/etc/hostname)"
        ],
    ),
    # A name the vLLM that will run does not know (read from its source), with the closest.
    (
        "tool_call_parser_unknown",
        [overrides(tool_call_parser="hermess")],
        BOTH,
        [
            "profile tiny_lab cannot run on the vLLM of /opt/vllm (vllm_server_venv): vLLM"
            " 0.32.0+cpu has no --tool-call-parser hermess (did you mean hermes?",
        ],
    ),
    # NCCL over RoCE on a host without RDMA devices (the node's real /sys: a container's).
    (
        "rdma_mode_without_rdma_devices",
        ["llmfleet_nccl_mode=ib", "nccl_env_sysfs_root=/sys"],
        BOTH,
        [
            "nccl_env_mode (llmfleet_nccl_mode) is ib, NCCL over RoCE, which needs an RDMA device"
            " behind enp1s0f1np1",
            "no RDMA device under /sys/class/infiniband backs netdev(s) enp1s0f1np1",
        ],
    ),
    # What `ray start` refuses of the host: an object store above its memory.
    (
        "object_store_above_the_host_memory",
        ["ray_node_object_store_bytes=10000000000000"],
        BOTH,
        [
            "ray_node_object_store_bytes is 10000000000000 (9.09 TB), which Ray refuses here:"
            " more than the host memory of",
        ],
    ),
    # Characters that would break the files the roles write (NAME=value lines).
    (
        "env_value_with_a_line_break",
        ['{"vllm_server_env": {"VLLM_LOGGING_LEVEL": "INFO\\nLD_PRELOAD=/tmp/x.so"}}'],
        BOTH,
        [
            "vllm_server_env.VLLM_LOGGING_LEVEL holds a line break, which would split the"
            " environment file; expected one line",
        ],
    ),
    # Values the hosts of one fabric must agree on (a host's own value, as host_vars give it).
    (
        "mtu_differs_between_the_hosts",
        ['{"cx7_network_mtu": "{{ 9000 if inventory_hostname == \'spark-1\' else 1500 }}"}'],
        BOTH,
        [
            "cx7_network_mtu (llmfleet_fabric_mtu) differs between the hosts of the fabric (9000"
            " on spark-1; 1500 on spark-2); expected the same on every host",
        ],
    ),
    # A name the host must have: the interface the launches bind to.
    (
        "fabric_interface_absent",
        ["llmfleet_fabric_interface=enp9s0f0np0"],
        BOTH,
        [
            "nccl_env_interface (llmfleet_fabric_interface) is enp9s0f0np0, ray_node_interface"
            " (llmfleet_fabric_interface) is enp9s0f0np0, vllm_server_fabric_interface"
            " (llmfleet_fabric_interface) is enp9s0f0np0, model_weights_copy_interface"
            " (llmfleet_fabric_interface) is enp9s0f0np0, which this host does not have; expected"
            " one of its interfaces (",
            "enp1s0f1np1",
        ],
    ),
    # A speculative method whose package the virtualenv's vLLM lacks (suffix decoding), on a
    # lab without its scripted logits processor (which vLLM refuses with any method: next).
    (
        "suffix_decoding_without_its_package",
        [
            overrides(speculative_config={"method": "suffix"}),
            '{"vllm_server_args": {"enforce_eager": true}}',
        ],
        BOTH,
        [
            "profile tiny_lab cannot run on the vLLM of /opt/vllm (vllm_server_venv): no"
            " arctic-inference Python package, which speculative method suffix loads",
        ],
    ),
    # vLLM refuses custom logits processors (the lab's scripted model) with speculative
    # decoding, at start: "Custom logits processors are not supported when speculative
    # decoding is enabled" (a lab run with an n-gram point).
    (
        "speculative_decoding_with_a_logits_processor",
        [overrides(speculative_config={"method": "ngram", "num_speculative_tokens": 2})],
        BOTH,
        ["speculative_config is set with args logits_processors, which vLLM refuses at start"],
    ),
    # Values of the right type and the wrong form, found with a held-out matrix run against
    # the served lab (2026-11-28): each was accepted and failed later, or never.
    (
        "ping_count_zero",
        ["fabric_verify_ping_count=0"],
        BOTH,
        ["fabric_verify_ping_count is 0; expected 1 or more pings"],
    ),
    (
        "shm_size_unreadable",
        ["ray_node_shm_size=lots"],
        BOTH,
        ["ray_node_shm_size is 'lots'; expected a size above 0 such as 16g or 512m"],
    ),
    (
        "nccl_debug_unknown",
        ["nccl_env_debug=VERBOSE"],
        BOTH,
        ['nccl_env_debug is "VERBOSE"; expected VERSION, WARN, INFO or TRACE (NCCL_DEBUG)'],
    ),
    (
        "rdma_timeout_zero",
        ["rdma_verify_timeout_s=0"],
        BOTH,
        ["rdma_verify_timeout_s (0) 1 or more seconds"],
    ),
    # Addresses and ports the services cannot bind on the host: one the host does not have,
    # one that is no address, the weights' copy port where sshd listens.
    (
        "services_that_cannot_bind",
        [
            "monitoring_listen_address=1.2.3.4",
            "vllm_server_host=10.0.0.999",
            "model_weights_copy_port=22",
        ],
        BOTH,
        [
            "monitoring_listen_address is 1.2.3.4, an address this host does not have",
            "vllm_server_host is '10.0.0.999', which is no IPv4 address",
            "model_weights_copy_port is 22, where sshd",
        ],
    ),
    (
        "weights_space_margin_negative",
        ["model_weights_space_margin_gib=-1"],
        BOTH,
        ["model_weights_space_margin_gib is -1", "expected 0 or more GiB"],
    ),
    (
        "bench_request_timeout_zero",
        ["benchmark_request_timeout=0"],
        ("localhost",),
        ["benchmark_request_timeout is 0; expected 1 or more seconds"],
    ),
    # What `llmfleet bench` refuses is refused by the check first.
    (
        "bench_url_not_http",
        ["benchmark_url=ftp://nowhere"],
        ("localhost",),
        ["benchmark_url is 'ftp://nowhere'; expected the served API's base URL without a path"],
    ),
]


# The checks each case fails (the validation play's blocks, validate_checks/*.yml): a check
# stops at its first problem, so two cases of one batch never share one. A problem with the
# model's source leaves the vLLM settings unchecked (they read it); "all" is a check that
# stops the play at once (the inventory's shape).
CHECKS: dict[str, set[str]] = {
    "mtu": {"cx7_network"},
    "missing_port": {"cx7_network"},
    "shared_subnet": {"cx7_network"},
    "floor_above_line_rate": {"rdma_verify"},
    "floor_zero": {"rdma_verify"},
    "unknown_nccl_mode": {"nccl_env"},
    "gid_index": {"nccl_env"},
    "nccl_env_file_set_alone": {"shared_settings"},
    "utilization_above_one": {"preflight", "vllm_server"},
    "stale_container_name": {"preflight"},
    "object_store_too_small": {"ray_node"},
    "empty_image": {"ray_node", "vllm_server"},
    "port_out_of_range": {"vllm_server", "ports"},
    "router_key_placeholder": {"claude_code_router"},
    "router_port_is_vllm_port": {"ports"},
    "prometheus_port_is_node_exporter_port": {"monitoring", "ports"},
    "ray_head_is_not_the_api_host": {"ray_head"},
    "vllm_host_outside_the_sparks": {"all"},
    "group_size_does_not_divide_the_sparks": {"serving_groups"},
    "router_version_floating": {"claude_code_router"},
    "router_endpoint_not_http": {"claude_code_router", "claude_code"},
    "weights_without_room": {"model_weights", "vllm_server"},
    "weights_revision_unknown": {"model_weights", "vllm_server"},
    "weights_path_relative": {"model_weights", "vllm_server"},
    "weights_fetched_on_the_controller_from_a_host_folder": {"model_weights", "vllm_server"},
    "weights_from_an_empty_controller_folder": {"model_weights", "vllm_server"},
    "client_command_with_a_path": {"claude_code"},
    "fabric_address_without_prefix": {"cx7_network"},
    "bench_url_not_http": {"benchmark"},
    "weights_folder_is_a_file": {"model_weights", "vllm_server"},
    "rdma_mode_without_rdma_devices": {"nccl_env"},
    "object_store_above_the_host_memory": {"ray_node"},
    "mtu_differs_between_the_hosts": {"cx7_network"},
    "fabric_interface_absent": {"fabric_interface"},
    "vllm_port_is_rays_dashboard": {"ports"},
    "vllm_port_held_by_sshd": {"ports"},
    "ping_count_zero": {"fabric_verify"},
    "shm_size_unreadable": {"ray_node"},
    "nccl_debug_unknown": {"nccl_env"},
    "rdma_timeout_zero": {"rdma_verify"},
    "services_that_cannot_bind": {"ports"},
    "weights_space_margin_negative": {"model_weights", "vllm_server"},
    "bench_request_timeout_zero": {"benchmark"},
}
VLLM_CASES = (
    "unknown_profile", "profile_utilization_zero", "max_model_len_128k", "max_num_seqs_zero",
    "context_above_the_model", "kv_cache_below_one_request", "key_in_profile_args",
    "tensor_parallel_in_args", "unknown_profile_key_and_clients_model_not_served", "model_missing",
    "ray_client_address",
    "placeholder_key", "short_key", "model_folder_is_a_file", "tool_call_parser_unknown",
    "env_value_with_a_line_break", "suffix_decoding_without_its_package",
    "speculative_decoding_with_a_logits_processor", "supervision_out_of_range",
)  # fmt: skip
CHECKS.update({case: {"vllm_server"} for case in VLLM_CASES})

Case = tuple[str, list[str], tuple[str, ...], list[str]]


def variables(extra_vars: list[str]) -> set[str]:
    """The variables a case's -e values set (key=value, or a JSON object)."""
    return {
        name
        for value in extra_vars
        for name in (json.loads(value) if value.startswith("{") else [value.split("=", 1)[0]])
    }


def batches(cases: list[Case]) -> list[tuple[str, list[Case]]]:
    """The cases packed into runs (command, cases), first fit in CASES' order: in one run,
    no check and no variable twice, and a case of "all" alone."""
    runs: list[tuple[str, list[Case], set[str], set[str]]] = []
    for case in cases:
        command = "up" if case[0] in UP_CASES else "check"
        checks, names = CHECKS[case[0]], variables(case[1])
        fits = [
            run
            for run in runs
            if run[0] == command
            and "all" not in checks | run[2]
            and not checks & run[2]
            and not names & run[3]
        ]
        if fits:
            fits[0][1].append(case)
            fits[0][2].update(checks)
            fits[0][3].update(names)
        else:
            runs.append((command, [case], set(checks), set(names)))
    return [(command, members) for command, members, _, _ in runs]


def failures(output: str) -> list[tuple[str, str]]:
    """(host, task and message folded on one line) of each failure the CLI printed."""
    return [
        (host, " ".join(text.split()))
        for host, text in re.findall(
            r"^\[(\S+)\] FAILED: (.*?)(?=^\[|^== |\Z)", output, re.M | re.S
        )
    ]


def test_every_case_has_its_checks_and_the_up_cases_exist() -> None:
    assert {case[0] for case in CASES} == set(CHECKS)
    assert UP_CASES.issubset(CHECKS)
    assert EXTENDED_CASES.issubset(CHECKS)


def test_the_batches_hold_every_case_once() -> None:
    packed = [case for _, members in batches(CASES) for case in members]
    assert sorted(case[0] for case in packed) == sorted(case[0] for case in CASES)
    # The 61 cases take 31 runs: the vLLM settings are one check that 22 cases fail (and
    # the model's source seven more, which leave it unchecked), so no fewer than 29.
    assert len(batches(CASES)) <= 31


@pytest.fixture(scope="module")
def bare_state(lab: Lab) -> Iterator[dict[str, str]]:
    yield snapshot(lab)


# Cases make test leaves out (pytest -m extended runs them), each a run of its own, since
# the check it fails also holds a case of make test's or stops at its first problem (on
# CI's machine a run of the validation play takes about a minute, 2026-11-28):
# - values refused by vllm_server's check whatever the host: a field of the profile, the
#   key's form, the ranges of the port, the timeouts and the probe (make test keeps one run
#   of that check, a key the profile does not know with a model name it does not serve);
# - variants of a case make test keeps: a model folder that is a file (the missing model),
#   a weights folder through a file, and the weights' settings that read no host or only
#   this machine (make test keeps the one that reads the host's disk), and a negative space
#   margin for them;
# - two that read what the run will use: the Hub's revisions, the image's packages.
# The cases that read the host (the model's folder and config, the memory for one request,
# the disk for the weights, the other hosts of the fabric) stay in.
EXTENDED_CASES = frozenset(
    {
        "profile_utilization_zero", "max_model_len_128k", "max_num_seqs_zero",
        "key_in_profile_args", "tensor_parallel_in_args", "ray_client_address",
        "placeholder_key", "short_key", "tool_call_parser_unknown",
        "env_value_with_a_line_break", "speculative_decoding_with_a_logits_processor",
        "port_out_of_range", "model_folder_is_a_file", "weights_folder_is_a_file",
        "weights_path_relative", "weights_fetched_on_the_controller_from_a_host_folder",
        "weights_from_an_empty_controller_folder", "weights_revision_unknown",
        "suffix_decoding_without_its_package", "supervision_out_of_range",
        "weights_space_margin_negative",
    }
)  # fmt: skip


def batch_params() -> list[object]:
    """The batches of make test's cases, then those of the extended ones."""
    return [
        pytest.param(
            command,
            members,
            id="+".join(case[0] for case in members),
            marks=[pytest.mark.extended] if extended else [],
        )
        for extended in (False, True)
        for command, members in batches(
            [case for case in CASES if (case[0] in EXTENDED_CASES) == extended]
        )
    ]


@pytest.mark.parametrize(("command", "cases"), batch_params())
def test_bad_input_stops_the_run_before_any_host_changes(
    lab: Lab, bare_state: dict[str, str], command: str, cases: list[Case]
) -> None:
    before = snapshot(lab)
    output = up(lab, *(value for case in cases for value in case[1]), command=command)
    failed = failures(output)
    flat = " ".join(output.split())
    for name, _, hosts, expected in cases:
        # Each host the case names failed with its message (the first fragment), and every
        # fragment is there (long messages are folded to the terminal's width).
        for host in hosts:
            assert any(h == host and expected[0] in text for h, text in failed), (
                name, host, expected[0], output[-4000:],
            )  # fmt: skip
        for fragment in expected:
            assert fragment in flat, (name, fragment, output[-4000:])
    assert snapshot(lab) == before


UPGRADE_HISTORY = json.dumps(
    {
        "version": 1,
        "entries": [
            {
                "time": "2026-11-24T00:00:00Z", "action": "up", "from": None,
                "to": {"image": "llmfleet-lab/vllm-runtime:1", "profile": "tiny_lab",
                       "model_revision": None},
                "outcome": "ok", "reason": None,
            }
        ],
    }
)  # fmt: skip


def upgrade(lab: Lab, *args: str) -> str:
    proc = lab.run(
        "llmfleet", "upgrade", "-i", "inventory/lab", "--plain", "--image", "repo/vllm:2", *args,
        timeout=600,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output[-4000:]
    # The first play stopped it: no host reached the checks, let alone a change.
    assert "== PLAY: Check the whole inventory" not in output, output[-4000:]
    return " ".join(output.split())


def test_an_upgrade_without_a_history_or_with_an_image_given_by_e_is_refused(
    lab: Lab, bare_state: dict[str, str]
) -> None:
    """An upgrade must know what to go back to, and must be able to set what it switches."""
    before = snapshot(lab)
    flat = upgrade(lab)
    for host in BOTH:
        assert f"{host}: it has no record of what it serves (/var/lib/llmfleet/history.json)" in (
            flat
        ), flat[-4000:]
    assert "run `llmfleet up` once before an upgrade" in flat
    for node in BOTH:
        lab.sh(node, f"mkdir -p /var/lib/llmfleet && echo '{UPGRADE_HISTORY}' "
                     "> /var/lib/llmfleet/history.json")  # fmt: skip
    try:
        flat = upgrade(lab, "-e", "vllm_server_image=repo/vllm:3")
    finally:
        for node in BOTH:
            lab.sh(node, "rm -f /var/lib/llmfleet/history.json")
    assert "spark-1: vllm_server_image, ray_node_image, vllm_server_profile" in flat, flat[-4000:]
    assert "is given with -e, which outranks what the upgrade sets" in flat
    assert '"image": "repo/vllm:2"' in flat
    assert snapshot(lab) == before


# Extended: the model missing on both nodes (make test) walks the same check per host.
@pytest.mark.extended
def test_the_model_missing_on_one_node_is_named(lab: Lab) -> None:
    # Weights put in place by hand (model_weights_source none): spark-1 has its copy (its
    # config.json, from the lab's Hub), spark-2 has none.
    config = "/opt/models/llmfleet-tiny/config.json"
    lab.sh(
        "spark-1",
        f"mkdir -p {config.rsplit('/', 1)[0]} && curl -sf -o {config}"
        " -H 'Authorization: Bearer llmfleet-lab-hub-token'"
        " http://hub:8080/llmfleet/llmfleet-tiny/resolve/main/config.json",
    )
    lab.sh("spark-2", f"rm -f {config}")
    try:
        before = snapshot(lab)
        output = up(lab, "model_weights_source=none")
        assert "[spark-2] FAILED: Require the model on every serving host" in output
        assert (
            f"spark-2: profile tiny_lab serves the model at /opt/models/llmfleet-tiny, but {config}"
            in " ".join(output.split())
        )
        assert "[spark-1] FAILED" not in output  # spark-1 has its copy
        assert snapshot(lab) == before
    finally:
        lab.sh("spark-1", f"rm -f {config}")


def test_a_node_that_is_down_stops_every_node(lab: Lab) -> None:
    before = snapshot(lab, ("spark-1",))
    subprocess_run = lab.run("podman", "pause", lab.container("spark-2"))
    assert subprocess_run.returncode == 0, subprocess_run.stderr
    try:
        proc = lab.run("llmfleet", "up", "-i", "inventory/lab", "--plain", timeout=600)
    finally:
        lab.run("podman", "unpause", lab.container("spark-2"))
    output = proc.stdout + proc.stderr
    assert proc.returncode == 3, output[-4000:]  # unreachable
    # The comparison with the last full run could not ask it, so site.yml ran and stopped.
    assert "spark-2: did not answer" in output, output[-4000:]
    # site.yml's recap, the last: its first play's note of the inputs is the controller's.
    recaps = re.findall(r"^spark-2\s+: (ok=\d+ changed=\d+ unreachable=\d+)", output, re.M)
    assert recaps and recaps[-1] == "ok=1 changed=0 unreachable=1", output[-3000:]
    assert re.search(r"^spark-1\s+: ok=\d+ changed=0 unreachable=0 failed=0", output, re.M)
    # The plays after the validation play have no host left to run on.
    after_validation = output.partition("== PLAY: Set up and prove the CX7 fabric")[2]
    assert not re.search(r"^\[spark-\d\] ", after_validation, re.M), after_validation[:3000]
    assert snapshot(lab, ("spark-1",)) == before


def test_the_whole_matrix_left_the_bare_lab_as_it_was(lab: Lab, bare_state: dict[str, str]) -> None:
    assert snapshot(lab) == bare_state
