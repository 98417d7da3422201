"""The emulated hardware's settings on a running lab's nodes, and its fabric links' state."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from typing import Any

from llmfleet_lab import podman
from llmfleet_lab.errors import LabError
from llmfleet_lab.nodes import NODE_LABEL, container_for, lab_nodes

SETTINGS_FILE = "/etc/llmfleet-lab/settings.json"
EMULATED_SYSFS = "/run/llmfleet-lab/sysfs"


def _parse_value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def set_setting(lab: str, hostnames: Sequence[str], key: str, raw_value: str) -> None:
    """Change an emulated-hardware setting (dotted key) on the given nodes."""
    if not hostnames:
        hostnames = [c["Labels"][NODE_LABEL] for c in lab_nodes(lab)]
    value = _parse_value(raw_value)
    for hostname in hostnames:
        container = container_for(lab, hostname)
        settings = json.loads(podman.exec_in(container, "cat", SETTINGS_FILE).stdout)
        section, _, leaf = key.partition(".")
        if leaf:
            if not isinstance(settings.get(section), dict):
                raise LabError(f"{key}: {section!r} is not a section of the lab settings")
            settings[section][leaf] = value
        else:
            settings[section] = value
        payload = json.dumps(settings, indent=2) + "\n"
        proc = subprocess.run(
            [
                "podman",
                "exec",
                "-i",
                container,
                "sh",
                "-c",
                f"cat > {SETTINGS_FILE}.new && mv {SETTINGS_FILE}.new {SETTINGS_FILE}",
            ],
            input=payload,
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
        if proc.returncode != 0:
            raise LabError(f"{hostname}: could not write {SETTINGS_FILE}", detail=proc.stderr)


def set_link(lab: str, hostname: str, ifname: str, state: str) -> None:
    """Take a fabric link down or up inside a node (real ``ip link set``)."""
    if state not in ("up", "down"):
        raise LabError(f"link state {state!r}: expected up or down")
    podman.exec_in(container_for(lab, hostname), "ip", "link", "set", ifname, state)
