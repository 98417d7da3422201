"""lab/cluster: a node's fixed address on the lab network."""

from __future__ import annotations

import pytest
from llmfleet_lab import cluster
from llmfleet_lab.cluster import node_address
from llmfleet_lab.errors import LabError
from llmfleet_lab.nodes import default_path, lab_gateway, lab_path
from rich.console import Console


def test_each_node_keeps_a_fixed_address_above_the_pools_first_ones() -> None:
    assert node_address("10.89.0.0/24", 1) == "10.89.0.101"
    assert node_address("10.89.0.0/24", 8) == "10.89.0.108"
    assert node_address("10.89.3.0/24", 2) == "10.89.3.102"


@pytest.mark.parametrize(
    ("nodes", "path"), [(2, "ray-container"), (3, "ray-container"), (4, "native"), (8, "native")]
)
def test_one_group_serves_on_the_spark_samples_path_and_groups_of_two_natively(
    nodes: int, path: str
) -> None:
    assert default_path(nodes) == path


def test_a_labs_path_is_its_nodes_and_native_when_they_disagree_or_have_none() -> None:
    def node(label: str | None) -> dict:
        return {"Labels": {"llmfleet.lab.path": label} if label else {}}

    assert lab_path([node("ray-container"), node("ray-container")]) == "ray-container"
    assert lab_path([node(None), node(None)]) == "native"
    assert lab_path([node("ray-container"), node("native")]) == "native"


def test_an_unknown_path_or_another_path_for_a_running_lab_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(LabError, match="--path gpu: expected one of ray-container, native"):
        cluster.up(Console(), serving_path="gpu")
    running = [
        {"Names": [f"lab-spark-{i}"], "Labels": {"llmfleet.lab.path": "native"}} for i in (1, 2)
    ]
    monkeypatch.setattr(cluster, "lab_nodes", lambda lab: running)
    with pytest.raises(LabError, match="serves on the native path, not ray-container"):
        cluster.up(Console(), serving_path="ray-container")


def test_a_gateway_is_asked_of_a_new_lab_and_refused_to_a_running_one_made_without(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def node(gateway: str | None) -> dict:
        return {
            "Names": ["lab-spark-1"],
            "Labels": {"llmfleet.lab.path": "ray-container"}
            | ({"llmfleet.lab.gateway": gateway} if gateway else {}),
        }

    assert lab_gateway([node("yes"), node("yes")])
    assert not lab_gateway([node("no")]) and not lab_gateway([node(None)])
    monkeypatch.setattr(cluster, "lab_nodes", lambda lab: [node("no"), node("no")])
    with pytest.raises(LabError, match="was made without a gateway"):
        cluster.up(Console(), gateway=True)
