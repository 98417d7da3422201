#!/usr/bin/env python3
"""Ansible inventory of the running lab: every node container of `llmfleet lab up`.

Hosts are the nodes' hostnames (spark-1..N) in the `sparks` group. Ansible reaches them
over SSH, as it reaches Sparks: root at the node's address on the lab network, with the
lab's own key and known hosts (`llmfleet lab up` makes both; the node's `llmfleet.lab.ssh`
label says where). A node without that label (started from an image older than SSH
access) is reached through `podman exec` (containers.podman.podman) instead. The lab
name comes from LLMFLEET_LAB (default llmfleet-lab). Standard library only: Ansible may
run this with any Python 3.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

LAB = os.environ.get("LLMFLEET_LAB", "llmfleet-lab")


def podman_json(*args: str) -> list[dict]:
    """The JSON a podman command prints ([] when podman fails: an empty inventory)."""
    try:
        out = subprocess.run(
            ["podman", *args, "--format", "json"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        sys.stderr.write(f"lab inventory: podman {args[0]} failed: {error}\n")
        return []
    return json.loads(out or "[]")


def lab_containers() -> list[dict]:
    # Stopped and paused nodes too: a node that is down stays in the inventory (and is
    # unreachable), as a Spark that is switched off stays in inventory/sparks.
    containers = podman_json("ps", "--all", "--filter", f"label=llmfleet.lab={LAB}")
    return sorted(containers, key=lambda c: int(c["Labels"]["llmfleet.lab.index"]))


def management_ips(names: list[str]) -> dict[str, str]:
    """Each node's address on the lab network (what this machine reaches it at)."""
    if not names:
        return {}
    return {
        item["Name"].lstrip("/"): network.get("IPAddress", "")
        for item in podman_json("inspect", *names)
        for name, network in item["NetworkSettings"]["Networks"].items()
        if name == LAB
    }


def connection(name: str, address: str, ssh_folder: str) -> dict[str, str]:
    """How Ansible reaches one node container."""
    if not ssh_folder:
        return {"ansible_connection": "containers.podman.podman", "ansible_host": name}
    return {
        "ansible_connection": "ssh",
        # A stopped node has no address: its name makes ssh fail with a readable reason.
        "ansible_host": address or name,
        "ansible_user": "root",
        "ansible_ssh_private_key_file": os.path.join(ssh_folder, "id_ed25519"),
        "ansible_ssh_common_args": (
            f"-o UserKnownHostsFile={os.path.join(ssh_folder, 'known_hosts')}"
            " -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes"
        ),
        # The lab's own multiplexed connections: a later lab may get the same addresses,
        # and must never reuse a connection to a node that is gone (`lab down` removes
        # the folder).
        "ansible_control_path_dir": os.path.join(ssh_folder, "cp"),
    }


def hub_endpoint() -> str:
    """The lab's Hub (the model's source) as nodes and this machine reach it: its address
    on the lab network ("" when it does not run)."""
    hubs = podman_json("ps", "--filter", f"label=llmfleet.lab.hub={LAB}")
    if not hubs:
        return ""
    address = management_ips([hubs[0]["Names"][0]]).get(hubs[0]["Names"][0], "")
    return f"http://{address}:8080" if address else ""


def inventory() -> dict:
    hostvars: dict[str, dict] = {}
    containers = lab_containers()
    addresses = management_ips([c["Names"][0] for c in containers])
    for container in containers:
        name = container["Names"][0]
        labels = container["Labels"]
        hostvars[labels["llmfleet.lab.node"]] = {
            **connection(name, addresses.get(name, ""), labels.get("llmfleet.lab.ssh", "")),
            "llmfleet_lab_node_index": int(labels["llmfleet.lab.index"]),
            "llmfleet_lab_management_ip": addresses.get(name, ""),
        }
    hosts = list(hostvars)
    # This machine is the lab's Claude Code client; the first node runs claude-code-router.
    hostvars["localhost"] = {
        "ansible_connection": "local",
        "ansible_python_interpreter": "{{ ansible_playbook_python }}",
    }
    # This machine is every lab's client: its record of the last full run is the lab's own
    # (in the lab's folder, gone with it), as each user's client keeps its own.
    ssh_folders = sorted({c["Labels"].get("llmfleet.lab.ssh", "") for c in containers} - {""})
    if ssh_folders:
        lab_folder = os.path.dirname(ssh_folders[0])
        hostvars["localhost"]["llmfleet_converged_record_file"] = os.path.join(
            lab_folder, "converged.json"
        )
    endpoint = hub_endpoint() if hosts else ""
    # How the lab serves (`llmfleet lab up --path`, a label of its nodes; native for nodes
    # made before labs had one): group_vars/all/serving_path.yml reads it.
    paths = {c["Labels"].get("llmfleet.lab.path", "native") for c in containers}
    path = paths.pop() if len(paths) == 1 else "native"
    # The lab's model has 2 attention heads: tensor parallel 2 at most. Four, six or eight
    # nodes serve as groups of two behind the serving gateway on the first node, as a team
    # runs several Spark pairs; two nodes serve as one group, without a gateway.
    grouped = len(hosts) >= 4 and len(hosts) % 2 == 0
    # A smaller lab made with `llmfleet lab up --gateway` runs the gateway on its first node
    # too, in front of one group or of the groups a smaller llmfleet_group_size cuts.
    gateway = grouped or any(c["Labels"].get("llmfleet.lab.gateway") == "yes" for c in containers)
    return {
        "_meta": {"hostvars": hostvars},
        "all": {
            "children": ["sparks", "lab", "gateways", "claude_code_routers", "claude_clients"],
            # Where role model_weights downloads the lab's model from (group_vars/all).
            "vars": {
                "llmfleet_lab_path": path,
                # A value, not a template: every task of a run reads what derives from it
                # (group_vars/all/serving_path.yml).
                "llmfleet_lab_ray_container": path == "ray-container",
                **({"model_weights_hub_endpoint": endpoint} if endpoint else {}),
            },
        },
        "sparks": {"hosts": hosts, "vars": {"llmfleet_group_size": 2} if grouped else {}},
        "lab": {"hosts": hosts},
        "gateways": {"hosts": hosts[:1] if gateway else []},
        "claude_code_routers": {"hosts": hosts[:1]},
        "claude_clients": {"hosts": ["localhost"] if hosts else []},
    }


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--host":
        print(json.dumps(inventory()["_meta"]["hostvars"].get(sys.argv[2], {})))
    else:
        print(json.dumps(inventory(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
