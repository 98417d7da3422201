"""Serving groups from the inventory, what makes them unlaunchable, and the gateway's view."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.filter.serving import (
    DEFAULT_GATEWAY_HOST,
    DEFAULT_GATEWAY_METRICS_PORT,
    DEFAULT_PORT,
    DEFAULT_PROBE_PORT,
    PORT_DEFAULTS,
    FilterModule,
    gateway_backends,
    gateway_groups,
    gateway_metrics_targets,
    gateway_upstreams,
    serving_fabric_hosts,
    serving_group_of,
    serving_group_problems,
    serving_groups,
)

FOUR = ["spark-1", "spark-2", "spark-3", "spark-4"]


def inventory(**extra: list[str]) -> dict[str, list[str]]:
    return {"all": FOUR, "ungrouped": [], "sparks": FOUR, **extra}


def test_no_size_and_no_groups_is_one_group_of_every_spark() -> None:
    assert serving_groups(inventory()) == [{"name": "serving_1", "hosts": FOUR}]


def test_llmfleet_vllm_hosts_still_names_the_single_group() -> None:
    assert serving_groups(inventory(), None, ["spark-1", "spark-2"]) == [
        {"name": "serving_1", "hosts": ["spark-1", "spark-2"]}
    ]


def test_a_group_size_cuts_the_sparks_in_order() -> None:
    assert serving_groups(inventory(), 2) == [
        {"name": "serving_1", "hosts": ["spark-1", "spark-2"]},
        {"name": "serving_2", "hosts": ["spark-3", "spark-4"]},
    ]
    assert serving_groups(inventory(), "2") == serving_groups(inventory(), 2)


def test_explicit_groups_keep_their_own_host_order_and_sort_by_the_sparks_order() -> None:
    groups = inventory(serving_b=["spark-2", "spark-1"], serving_a=["spark-4", "spark-3"])
    assert serving_groups(groups) == [
        {"name": "serving_b", "hosts": ["spark-2", "spark-1"]},
        {"name": "serving_a", "hosts": ["spark-4", "spark-3"]},
    ]


def test_an_inventory_without_sparks_has_no_group() -> None:
    assert serving_groups({"all": ["gh200-1"], "gh200": ["gh200-1"]}) == []


def test_groups_that_launch_have_no_problem() -> None:
    assert serving_group_problems(inventory()) == []
    assert serving_group_problems(inventory(), 2, None, FOUR) == []
    assert serving_group_problems(inventory(serving_a=FOUR[:2], serving_b=FOUR[2:])) == []


def test_a_size_that_does_not_divide_the_sparks_names_the_sizes_that_do() -> None:
    assert serving_group_problems(inventory(), 3) == [
        "llmfleet_group_size is 3 but the sparks group has 4 hosts (spark-1, spark-2, spark-3,"
        " spark-4); expected a size that divides 4: 1, 2, 4"
    ]


@pytest.mark.parametrize("size", [0, "two", -2])
def test_a_size_below_one_or_not_a_number_is_refused(size: object) -> None:
    [problem] = serving_group_problems(inventory(), size)
    assert problem.startswith(f"llmfleet_group_size is {size!r}; expected a whole number of 1")


def test_groups_of_one_spark_are_served() -> None:
    """Each Spark its own group (tensor parallel 1, a Ray cluster of one on the Ray path),
    by size or by explicit groups."""
    assert serving_group_problems(inventory(), 1, None, FOUR) == []
    assert [group["hosts"] for group in serving_groups(inventory(), 1)] == [[h] for h in FOUR]
    assert serving_group_problems(inventory(serving_a=FOUR[:2], serving_b=FOUR[2:3])) == []


def test_a_size_with_explicit_groups_or_vllm_hosts_is_refused() -> None:
    groups = inventory(serving_a=FOUR[:2], serving_b=FOUR[2:])
    assert serving_group_problems(groups, 2) == [
        "llmfleet_group_size is 2 and the inventory also has serving groups (serving_a,"
        " serving_b); expected one of the two"
    ]
    [problem] = serving_group_problems(inventory(), 2, ["spark-1", "spark-2"])
    assert problem.startswith("llmfleet_vllm_hosts is ['spark-1', 'spark-2'] with several")


def test_a_host_in_two_groups_and_a_stranger_are_named() -> None:
    groups = inventory(serving_a=["spark-1", "spark-2"], serving_b=["spark-2", "gh200-1"])
    assert serving_group_problems(groups) == [
        "serving group serving_b has gh200-1, not in the sparks group; expected Sparks only",
        "spark-2 is in serving groups serving_a and serving_b; expected each Spark in one group"
        " (a Spark's memory holds one rank)",
    ]


def test_a_group_host_off_the_fabric_is_named() -> None:
    assert serving_group_problems(inventory(), 2, None, FOUR[:3]) == [
        "serving group serving_2 has spark-4, which the CX7 fabric does not join (it joins"
        " spark-1, spark-2, spark-3); expected every host of a group on the fabric its ranks"
        " talk over"
    ]


def test_a_host_outside_the_sparks_is_not_also_named_off_the_fabric() -> None:
    assert serving_group_problems(inventory(), None, ["spark-1", "spark-9"], FOUR) == []


def test_the_fabric_carries_only_the_groups_of_several_sparks() -> None:
    assert serving_fabric_hosts(serving_groups(inventory())) == FOUR
    assert serving_fabric_hosts(serving_groups(inventory(), 2)) == FOUR
    assert serving_fabric_hosts(serving_groups(inventory(), 1)) == []
    groups = serving_groups(inventory(serving_a=FOUR[:2], serving_b=FOUR[2:3]))
    assert serving_fabric_hosts(groups) == FOUR[:2]


def test_a_host_finds_its_group() -> None:
    groups = serving_groups(inventory(), 2)
    assert serving_group_of(groups, "spark-3") == {"name": "serving_2", "hosts": FOUR[2:]}
    assert serving_group_of(groups, "gh200-1") == {}


def test_upstreams_are_each_groups_rank_0_and_each_single_host() -> None:
    hostvars = {
        "spark-1": {"ansible_host": "192.0.2.11", "llmfleet_served_model": "minimax"},
        "spark-2": {"ansible_host": "192.0.2.12", "llmfleet_served_model": "minimax"},
        "spark-3": {
            "ansible_host": "192.0.2.13",
            "llmfleet_served_model": "minimax",
            "vllm_server_port": 8001,
            "vllm_server_probe_port": 8019,
        },
        "spark-4": {"ansible_host": "192.0.2.14", "llmfleet_served_model": "minimax"},
        # vLLM listens on llmfleet_vllm_port where vllm_server_port is not set; the Mac's
        # llmfleet_api_port is not vLLM's (the gateway used to forward there).
        "gh200-1": {
            "llmfleet_served_model": "qwen3",
            "llmfleet_vllm_port": 9000,
            "llmfleet_api_port": 9100,
            "vllm_server_probe": "false",
        },
        "mac-1": {
            "ansible_host": "192.0.2.30",
            "llmfleet_served_model": "coder",
            "llmfleet_vllm_port": 9000,
            "llmfleet_api_port": 8100,
        },
    }
    # The groups' vLLM is checked at its serving probe (8009, or where the host moves it);
    # a Mac's vllm-mlx, and a host whose probe is off, at the API's /health.
    upstreams = gateway_upstreams(
        serving_groups(inventory(), 2),
        {"gh200-1": "vllm_server_port", "mac-1": "mlx_server_port"},
        hostvars,
    )
    serving_1 = {"name": "serving_1", "address": "192.0.2.11", "port": 8000, "check_port": 8009}
    serving_2 = {"name": "serving_2", "address": "192.0.2.13", "port": 8001, "check_port": 8019}
    gh200 = {"name": "gh200-1", "address": "gh200-1", "port": 9000, "check_port": None}
    mac = {"name": "mac-1", "address": "192.0.2.30", "port": 8100, "check_port": None}
    assert upstreams == [
        {**serving_1, "host": "spark-1", "model": "minimax"},
        {**serving_2, "host": "spark-3", "model": "minimax"},
        {**gh200, "host": "gh200-1", "model": "qwen3"},
        {**mac, "host": "mac-1", "model": "coder"},
    ]
    assert gateway_backends(upstreams) == [
        {"model": "minimax", "servers": [serving_1, serving_2]},
        {"model": "qwen3", "servers": [gh200]},
        {"model": "coder", "servers": [mac]},
    ]


def test_bad_input_is_a_filter_error() -> None:
    with pytest.raises(AnsibleFilterError, match="groups mapping"):
        serving_groups(["spark-1"])
    with pytest.raises(AnsibleFilterError, match="groups mapping"):
        serving_group_problems("sparks")


def test_the_filters_are_registered() -> None:
    assert set(FilterModule().filters()) == {
        "serving_groups",
        "serving_group_problems",
        "serving_group_of",
        "serving_fabric_hosts",
        "gateway_upstreams",
        "gateway_backends",
        "gateway_groups",
        "gateway_metrics_targets",
    }


def test_each_upstream_is_read_at_its_own_api() -> None:
    upstreams = [
        {"name": "serving_1", "model": "m", "address": "192.0.2.11", "port": 8000},
        {"name": "gh200-1", "model": "q", "address": "2001:db8::5", "port": 9000},
    ]
    assert gateway_groups(upstreams) == [
        {"name": "serving_1", "url": "http://192.0.2.11:8000"},
        {"name": "gh200-1", "url": "http://[2001:db8::5]:9000"},
    ]


@pytest.mark.parametrize(
    "gateway_url", ["http://spark-1:8080", "http://spark-1:8080/", "http://spark-1:8080/v1"]
)
def test_each_upstream_is_read_through_the_gateway(gateway_url: str) -> None:
    upstreams = [
        {"name": "serving_1", "model": "m", "address": "192.0.2.11", "port": 8000},
        {"name": "mac-1", "model": "q", "address": "192.0.2.40", "port": 8080},
    ]
    assert gateway_groups(upstreams, gateway_url) == [
        {"name": "serving_1", "url": "http://spark-1:8080/llmfleet/groups/serving_1"},
        {"name": "mac-1", "url": "http://spark-1:8080/llmfleet/groups/mac-1"},
    ]


def test_a_gateway_url_that_is_no_url_is_named() -> None:
    upstreams = [{"name": "serving_1", "model": "m", "address": "192.0.2.11", "port": 8000}]
    with pytest.raises(AnsibleFilterError, match=r"^gateway_groups: url must be .*'spark-1:8080'"):
        gateway_groups(upstreams, "spark-1:8080")


def test_a_gateways_metrics_are_found_where_the_role_binds_them() -> None:
    hostvars = {
        "spark-1": {"ansible_host": "192.0.2.11"},
        "gw-api": {"ansible_host": "192.0.2.20", "serving_gateway_host": "10.0.0.20"},
        "gw-own": {
            "serving_gateway_metrics_host": "10.0.0.21",
            "serving_gateway_metrics_port": 9404,
        },
        "gw-any": {"serving_gateway_host": "10.0.0.22", "serving_gateway_metrics_host": "::"},
        "gw-six": {"serving_gateway_host": "2001:db8::23"},
    }
    assert gateway_metrics_targets(list(hostvars), hostvars) == [
        {"host": "spark-1", "target": "192.0.2.11:8404"},  # every address: where Ansible goes
        {"host": "gw-api", "target": "10.0.0.20:8404"},  # the exporter follows the API's address
        {"host": "gw-own", "target": "10.0.0.21:9404"},
        {"host": "gw-any", "target": "10.0.0.22:8404"},  # every address, the API on one
        {"host": "gw-six", "target": "[2001:db8::23]:8404"},
    ]
    assert gateway_metrics_targets([], hostvars) == []


def test_the_defaults_the_filters_assume_are_the_roles() -> None:
    roles = Path(__file__).parents[4] / "roles"

    def defaults(role: str) -> dict:
        return yaml.safe_load((roles / role / "defaults" / "main.yml").read_text())

    gateway, common = defaults("serving_gateway"), defaults("_common")
    assert gateway["serving_gateway_host"] == DEFAULT_GATEWAY_HOST
    assert gateway["serving_gateway_metrics_host"] == "{{ serving_gateway_host }}"
    assert gateway["serving_gateway_metrics_port"] == DEFAULT_GATEWAY_METRICS_PORT
    assert defaults("vllm_server")["vllm_server_probe_port"] == DEFAULT_PROBE_PORT
    for role, variable in (("vllm_server", "vllm_server_port"), ("mlx_server", "mlx_server_port")):
        assert defaults(role)[variable] == "{{ " + PORT_DEFAULTS[variable] + " }}"
        assert common[PORT_DEFAULTS[variable]] == DEFAULT_PORT
