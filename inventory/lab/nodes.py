#!/usr/bin/env python3
"""Ansible inventory of the running lab: every node container of `llmfleet lab up`.

Hosts are the nodes' hostnames (spark-1..N) in the `sparks` group; Ansible reaches them
through podman (containers.podman.podman), so no SSH is involved. The lab name comes
from LLMFLEET_LAB (default llmfleet-lab). Standard library only: Ansible may run this
with any Python 3.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

LAB = os.environ.get("LLMFLEET_LAB", "llmfleet-lab")


def lab_containers() -> list[dict]:
    try:
        out = subprocess.run(
            ["podman", "ps", "--filter", f"label=llmfleet.lab={LAB}", "--format", "json"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        sys.stderr.write(f"lab inventory: podman ps failed: {error}\n")
        return []
    return sorted(json.loads(out or "[]"), key=lambda c: int(c["Labels"]["llmfleet.lab.index"]))


def inventory() -> dict:
    hostvars = {}
    for container in lab_containers():
        hostname = container["Labels"]["llmfleet.lab.node"]
        hostvars[hostname] = {
            "ansible_host": container["Names"][0],
            "llmfleet_lab_node_index": int(container["Labels"]["llmfleet.lab.index"]),
        }
    hosts = list(hostvars)
    return {
        "_meta": {"hostvars": hostvars},
        "all": {"children": ["sparks", "lab"]},
        "sparks": {"hosts": hosts},
        "lab": {"hosts": hosts},
    }


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--host":
        print(json.dumps(inventory()["_meta"]["hostvars"].get(sys.argv[2], {})))
    else:
        print(json.dumps(inventory(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
