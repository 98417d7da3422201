"""Firewall filters: the cluster's addresses by family, the private ports."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.filter.firewall import (
    FilterModule,
    firewall_ports,
    firewall_sources,
)

SPARK_1 = {
    "ansible_host": "spark-1.lan",
    "ansible_facts": {
        "all_ipv4_addresses": ["10.89.0.7", "192.168.100.11", "192.168.101.11"],
        "all_ipv6_addresses": ["fe80::4ebb:47ff:fe2d:1a17", "2001:db8::11"],
    },
}
SPARK_2 = {
    "ansible_host": "192.0.2.12",
    "ansible_facts": {"all_ipv4_addresses": ["192.168.100.12"]},
}
# A host outside the play: no facts, its inventory address only.
SPARK_3 = {"ansible_host": "192.0.2.13"}


def test_every_address_of_every_host_by_family() -> None:
    assert firewall_sources([SPARK_1, SPARK_2, SPARK_3], ["10.0.0.0/24", "192.168.100.12"]) == {
        "ipv4": [
            "10.0.0.0/24",
            "10.89.0.7",
            "192.0.2.12",
            "192.0.2.13",
            "192.168.100.11",
            "192.168.100.12",
            "192.168.101.11",
        ],
        "ipv6": ["2001:db8::11"],
    }
    assert firewall_sources([]) == {"ipv4": [], "ipv6": []}


def test_link_local_addresses_of_the_hosts_are_left_out() -> None:
    """Valid on their link only, and moving with a veth's MAC address: a lab node's restart
    changed the rules of the next run (2026-11-28)."""
    host = {
        "ansible_facts": {
            "all_ipv4_addresses": ["169.254.3.4", "10.89.0.101"],
            "all_ipv6_addresses": ["fe80::a409:4aff:fe51:e864"],
        }
    }
    assert firewall_sources([host]) == {"ipv4": ["10.89.0.101"], "ipv6": []}
    # What a person allows stays as written.
    assert firewall_sources([], ["fe80::/10"]) == {"ipv4": [], "ipv6": ["fe80::/10"]}


def test_a_source_that_is_no_address_is_named() -> None:
    with pytest.raises(AnsibleFilterError, match="cluster_firewall_allowed_sources has 'office'"):
        firewall_sources([SPARK_2], ["office"])


def test_ports_and_ranges() -> None:
    assert firewall_ports([6379, "10001-19999", "6379", " 29501 "]) == [
        "6379",
        "10001-19999",
        "29501",
    ]


@pytest.mark.parametrize("bad", [0, 70000, "19999-10001", "ray", "1-2-3", None])
def test_bad_ports_are_named(bad: object) -> None:
    with pytest.raises(
        AnsibleFilterError, match=r"cluster_firewall_tcp_ports has .*; expected a TCP port"
    ):
        firewall_ports([bad])


def test_bad_api_port_names_its_variable() -> None:
    with pytest.raises(AnsibleFilterError, match=r"^cluster_firewall_api_ports has 'api'"):
        firewall_ports(["api"], "cluster_firewall_api_ports")


def test_filters_are_registered() -> None:
    assert set(FilterModule().filters()) == {"firewall_sources", "firewall_ports"}
