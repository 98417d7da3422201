"""The lab's node containers: their names, labels and lookup."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmfleet_lab import podman
from llmfleet_lab.errors import LabError

DEFAULT_LAB = "llmfleet-lab"
LAB_LABEL = "llmfleet.lab"
NODE_LABEL = "llmfleet.lab.node"
# How the lab serves (its nodes carry it; inventory/lab/nodes.py gives it to the inventory
# as llmfleet_lab_path): the Spark sample's path, Ray in each node's Docker with vLLM in the
# Ray head container under the Ray executor, or vLLM natively with the mp executor (the
# GH200 box's path).
PATH_LABEL = "llmfleet.lab.path"
RAY_CONTAINER_PATH = "ray-container"
NATIVE_PATH = "native"
SERVING_PATHS = (RAY_CONTAINER_PATH, NATIVE_PATH)
# Whether the first node runs the serving gateway (its nodes carry it; inventory/lab/nodes.py
# puts that node in group gateways): always for the groups of two of 4, 6 or 8 nodes, and on
# a smaller lab when asked (`llmfleet lab up --gateway`), so that its serving layouts can be
# measured through one endpoint (`llmfleet tune --grid group_size=all,1`).
GATEWAY_LABEL = "llmfleet.lab.gateway"


def default_path(nodes: int) -> str:
    """The Spark sample's path for one serving group (2 or 3 nodes); a lab of several groups
    of two behind the gateway (4, 6 or 8 nodes) serves natively: the lab has not walked
    several groups on one Ray cluster yet."""
    return RAY_CONTAINER_PATH if nodes < 4 else NATIVE_PATH


def lab_path(containers: list[dict[str, Any]]) -> str:
    """The serving path of a lab's nodes (native for nodes made before labs had one)."""
    paths = {c["Labels"].get(PATH_LABEL, NATIVE_PATH) for c in containers}
    return paths.pop() if len(paths) == 1 else NATIVE_PATH


def lab_gateway(containers: list[dict[str, Any]]) -> bool:
    """Whether a lab's nodes were made with a gateway of their own (``--gateway``)."""
    return any(c["Labels"].get(GATEWAY_LABEL) == "yes" for c in containers)


@dataclass(frozen=True)
class Node:
    """A node container: its name on the host, its hostname inside, its index (1-based)."""

    container: str
    hostname: str
    index: int

    @classmethod
    def of_lab(cls, lab: str, index: int) -> Node:
        return cls(container=f"{lab}-spark-{index}", hostname=f"spark-{index}", index=index)

    @property
    def storage_volume(self) -> str:
        return f"{self.container}-containers"


def lab_nodes(lab: str) -> list[dict[str, Any]]:
    return sorted(
        podman.containers(f"{LAB_LABEL}={lab}"),
        key=lambda c: int(c["Labels"].get("llmfleet.lab.index", "0")),
    )


def hostname_of(container: str) -> str:
    return str(podman.inspect(container)["Config"]["Hostname"])


def container_for(lab: str, hostname: str) -> str:
    for container in lab_nodes(lab):
        if container["Labels"].get(NODE_LABEL) == hostname:
            return str(container["Names"][0])
    raise LabError(f"no node {hostname!r} in lab {lab!r}", hint="see `llmfleet lab status`")
