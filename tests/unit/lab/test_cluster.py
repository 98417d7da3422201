"""lab/cluster: a node's fixed address on the lab network."""

from __future__ import annotations

from llmfleet.lab.cluster import node_address


def test_each_node_keeps_a_fixed_address_above_the_pools_first_ones() -> None:
    assert node_address("10.89.0.0/24", 1) == "10.89.0.101"
    assert node_address("10.89.0.0/24", 8) == "10.89.0.108"
    assert node_address("10.89.3.0/24", 2) == "10.89.3.102"
