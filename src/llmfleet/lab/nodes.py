"""The lab's node containers: their names, labels and lookup."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmfleet.lab import podman
from llmfleet.lab.errors import LabError

DEFAULT_LAB = "llmfleet-lab"
LAB_LABEL = "llmfleet.lab"
NODE_LABEL = "llmfleet.lab.node"


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
