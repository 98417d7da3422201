#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Ansible module node_status: what one node runs, in one read-only call."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_status
short_description: Read what a node of the cluster runs, in one call
version_added: "0.1.0"
author:
  - llmfleet maintainers (!UNKNOWN)
description:
  - Reads, without changing anything, what C(llmfleet status) shows for one host - the state of
    the systemd units and containers the collection runs there, the fabric links, memory and
    swap, the vLLM launch the node is configured for and what it serves according to its
    history.
  - "Units: C(systemctl show) of O(units) - whether each is installed, its active and sub state,
    the result of its last run, how many times systemd restarted it (C(NRestarts)) and since
    when it is active."
  - "Containers: C(ENGINE container inspect) of each of O(containers) - state, restart count,
    start time, the image reference and ID. An engine that is not installed reports each
    container as absent."
  - "Links: for each of O(interfaces), its operational state and MTU from sysfs, its speed from
    C(ethtool IFACE) (the driver's figure: 200000 on a ConnectX-7 port at full rate) and its IPv4
    addresses from C(ip -j -4 address show dev IFACE)."
  - "Memory from C(/proc/meminfo) and C(/proc/swaps): total, free, available, the reclaimable
    page cache, swap size and use, the swap devices."
  - "The launch: the layout keys of vLLM's configuration O(serve_config) (model, tensor and
    pipeline parallel sizes, nodes, this node's rank, headless). What it serves: the current
    state of the history that M(llmfleet.cluster.deployment_history) keeps (image, profile,
    model revision) and the record of images that M(llmfleet.cluster.container_image_record)
    keeps."
  - Never reports a change; a missing file, unit, container or interface is part of the answer,
    not an error.
options:
  units:
    description: systemd units to report (C(llmfleet-vllm.service), ...).
    type: list
    elements: str
    default: []
  containers:
    description: Containers to report, by name.
    type: list
    elements: str
    default: []
  container_engine:
    description: The engine that runs O(containers).
    type: str
    choices: [docker, podman]
    default: docker
  interfaces:
    description: Network interfaces to report (the fabric's).
    type: list
    elements: str
    default: []
  serve_config:
    description: vLLM's configuration file (C(vllm serve --config)) on the node.
    type: path
  history:
    description: The node's history of what it serves.
    type: path
    default: /var/lib/llmfleet/history.json
  probe_state:
    description: The state file of the serving probe (C(llmfleet-vllm-probe), on a group's rank 0).
    type: path
    default: /var/lib/llmfleet/vllm-probe.json
  images_record:
    description: The node's record of the image each container runs.
    type: path
    default: /var/lib/llmfleet/images.json
  processes:
    description:
      - Processes to find, each a O(processes[].name) for the result and a
        O(processes[].pattern) its command line contains (C(vllm serve)); a child whose parent
        matches too is left out.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The key of RV(processes) for what was found.
        type: str
        required: true
      pattern:
        description: Text the command line contains.
        type: str
        required: true
  environ_keys:
    description:
      - The environment variables reported of each process found and of each of O(env_files);
        no other is ever read into the result (environments and env files hold secrets).
    type: list
    elements: str
    default: []
  env_files:
    description: Environment files (C(KEY=VALUE) lines) whose O(environ_keys) are reported.
    type: list
    elements: path
    default: []
  python_prefix:
    description: A Python environment (virtualenv) whose O(packages) versions are reported.
    type: path
  packages:
    description: Python distributions whose installed version under O(python_prefix) is
      reported (C(vllm), C(ray)).
    type: list
    elements: str
    default: []
  sysfs_root:
    description: Where sysfs is mounted (tests point it elsewhere).
    type: path
    default: /sys
  proc_root:
    description: Where procfs is mounted (tests point it elsewhere).
    type: path
    default: /proc
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reads the same in check mode.
  diff_mode:
    support: none
  idempotent:
    description:
      - When run twice in a row, the second run changes nothing.
    support: full
    details: Read-only.
  platform:
    platforms: posix
notes:
  - Reading another unit's state needs no privilege; C(docker container inspect) needs a user
    allowed to talk to the engine (root, or a member of the C(docker) group).
"""

EXAMPLES = r"""
- name: Read what this Spark runs
  llmfleet.cluster.node_status:
    units: [llmfleet-vllm.service, llmfleet-vllm-rank-watchdog.service, llmfleet-ray.service]
    containers: [llmfleet-vllm, llmfleet-ray]
    container_engine: docker
    interfaces: [enp1s0f0np0, enP2p1s0f0np0]
    serve_config: /etc/llmfleet/vllm/serve.yaml
  register: node
"""

RETURN = r"""
time:
  description: The node's clock when it was read (seconds since the epoch).
  returned: always
  type: float
  sample: 1795545600.123
units:
  description: One entry per O(units), in that order.
  returned: always
  type: list
  elements: dict
  sample:
    - name: llmfleet-vllm.service
      installed: true
      load: loaded
      active: active
      sub: running
      result: success
      restarts: 0
      enabled: enabled
      since: 1795545000.5
containers:
  description: One entry per O(containers); C(exists) false for one the engine does not know.
  returned: always
  type: list
  elements: dict
  sample:
    - name: llmfleet-vllm
      exists: true
      state: running
      exit_code: 0
      restarts: 0
      started: "2026-11-24T18:00:00.000000000Z"
      image: vllm/vllm-openai:v0.11.0
      image_id: sha256:<64 hex>
links:
  description: One entry per O(interfaces); C(present) false for one the node does not have.
  returned: always
  type: list
  elements: dict
  sample:
    - name: enp1s0f0np0
      present: true
      operstate: up
      mtu: 9000
      speed_mbps: 200000
      link_detected: true
      ipv4: [192.168.100.1/24]
memory:
  description: Bytes of memory and swap (C(total_bytes), C(free_bytes), C(available_bytes),
    C(page_cache_bytes), C(swap_total_bytes), C(swap_used_bytes)) and the swap devices in use.
  returned: always
  type: dict
layout:
  description: The launch O(serve_config) describes (model, served_model_name,
    tensor_parallel_size, pipeline_parallel_size, data_parallel_size, nnodes, node_rank,
    master_addr, headless, distributed_executor_backend, max_model_len, host, port); null without
    that file.
  returned: always
  type: dict
serving:
  description: What the history says the node serves (C(current) - image, profile,
    model_revision -, C(uncertain) when the newest switch failed, and the newest entry's
    C(last_change), C(last_action), C(last_outcome)); C(error) for a history that cannot be
    read; null without a history.
  returned: always
  type: dict
probe:
  description: What the serving probe last wrote (C(phase) - C(ready) once this start of vLLM
    answered its warm-up requests, C(starting), C(failing), C(healing), C(down), C(given up) -,
    C(ready_since), C(started_at), C(warmup_seconds), C(failures), C(last_failure),
    C(last_probe), C(last_heal) with its C(time) and C(reason), C(interval), and C(stale) when it
    wrote nothing for three of its intervals); C(error) for a state that cannot be read; null
    where no probe runs.
  returned: always
  type: dict
processes:
  description: For each of O(processes), by its name, the matching processes - pid, cmdline and
    environ (only O(environ_keys); null when the environment could not be read).
  returned: always
  type: dict
  sample:
    vllm:
      - pid: 4121
        cmdline: /opt/vllm/bin/python /opt/vllm/bin/vllm serve --config serve.yaml
        environ: {NCCL_SOCKET_IFNAME: enp1s0f1np1, GLOO_SOCKET_IFNAME: enp1s0f1np1}
env_files:
  description: For each of O(env_files), by path, the O(environ_keys) it sets; null for a file
    that cannot be read.
  returned: always
  type: dict
  sample:
    /etc/llmfleet/nccl.env: {NCCL_IB_GID_INDEX: "3"}
packages:
  description: For each of O(packages), the version installed under O(python_prefix), null when
    it is not installed there.
  returned: always
  type: dict
  sample: {vllm: 0.11.0}
images:
  description: The record of the image each container runs, by container name (reference,
    image_id, repo_digests).
  returned: always
  type: dict
"""

import json  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.llmfleet.cluster.plugins.module_utils._node.ethtool import (  # noqa: E402
    ethtool_link,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._node.status import (  # noqa: E402
    UNIT_PROPERTIES,
    boot_epoch,
    container_state,
    env_file_subset,
    find_processes,
    images_running,
    ipv4_addresses,
    layout,
    link_state,
    memory,
    package_version,
    parse_serve_config,
    parse_systemctl_show,
    probe_state,
    read_text,
    serving_history,
    unit_state,
)

ARGUMENT_SPEC = {
    "units": {"type": "list", "elements": "str", "default": []},
    "containers": {"type": "list", "elements": "str", "default": []},
    "container_engine": {"type": "str", "choices": ["docker", "podman"], "default": "docker"},
    "interfaces": {"type": "list", "elements": "str", "default": []},
    "serve_config": {"type": "path"},
    "history": {"type": "path", "default": "/var/lib/llmfleet/history.json"},
    "probe_state": {"type": "path", "default": "/var/lib/llmfleet/vllm-probe.json"},
    "images_record": {"type": "path", "default": "/var/lib/llmfleet/images.json"},
    "processes": {
        "type": "list",
        "elements": "dict",
        "default": [],
        "options": {
            "name": {"type": "str", "required": True},
            "pattern": {"type": "str", "required": True},
        },
    },
    "environ_keys": {"type": "list", "elements": "str", "default": [], "no_log": False},
    "env_files": {"type": "list", "elements": "path", "default": []},
    "python_prefix": {"type": "path"},
    "packages": {"type": "list", "elements": "str", "default": []},
    "sysfs_root": {"type": "path", "default": "/sys"},
    "proc_root": {"type": "path", "default": "/proc"},
}


def read_units(module, names, boot):
    if not names:
        return []
    systemctl = module.get_bin_path("systemctl")
    shown = {}
    if systemctl:
        rc, out, _err = module.run_command(
            [systemctl, "show", "--property=" + ",".join(UNIT_PROPERTIES), "--", *names]
        )
        shown = parse_systemctl_show(out) if rc == 0 else {}
    return [unit_state(name, shown.get(name), boot) for name in names]


def read_containers(module, engine, names):
    binary = module.get_bin_path(engine) if names else None
    states = []
    for name in names:
        inspected = None
        if binary:
            rc, out, _err = module.run_command([binary, "container", "inspect", name])
            if rc == 0:
                try:
                    inspected = json.loads(out)
                except ValueError:
                    inspected = None
        states.append(container_state(name, inspected))
    return states


def read_links(module, names, sysfs_root):
    ethtool = module.get_bin_path("ethtool") if names else None
    ip_tool = module.get_bin_path("ip") if names else None
    links = []
    for name in names:
        speed = {"speed_mbps": None, "link_detected": False}
        addresses = []
        if os.path.isdir(os.path.join(sysfs_root, "class", "net", name)):
            if ethtool:
                speed = ethtool_link(module.run_command([ethtool, name])[1])
            if ip_tool:
                addresses = ipv4_addresses(
                    module.run_command([ip_tool, "-j", "-4", "address", "show", "dev", name])[1]
                )
        links.append(link_state(name, sysfs_root, speed, addresses))
    return links


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    now = time.time()
    proc = params["proc_root"]
    boot = boot_epoch(read_text(os.path.join(proc, "uptime")) or "", now)
    config_text = read_text(params["serve_config"]) if params["serve_config"] else None
    keys = params["environ_keys"]
    module.exit_json(
        changed=False,
        time=now,
        units=read_units(module, params["units"], boot),
        containers=read_containers(module, params["container_engine"], params["containers"]),
        links=read_links(module, params["interfaces"], params["sysfs_root"]),
        memory=memory(
            read_text(os.path.join(proc, "meminfo")), read_text(os.path.join(proc, "swaps"))
        ),
        layout=layout(parse_serve_config(config_text)) if config_text else None,
        serving=serving_history(read_text(params["history"])),
        probe=probe_state(read_text(params["probe_state"]), now),
        images=images_running(read_text(params["images_record"])),
        processes={
            wanted["name"]: find_processes(wanted["pattern"], proc, keys, os.getpid())
            for wanted in params["processes"]
        },
        env_files={path: env_file_subset(read_text(path), keys) for path in params["env_files"]},
        packages={
            name: package_version(params["python_prefix"], name)
            if params["python_prefix"]
            else None
            for name in params["packages"]
        },
    )


if __name__ == "__main__":
    main()
