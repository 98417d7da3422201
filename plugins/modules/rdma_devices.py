#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Ansible module rdma_devices: RDMA devices, ports and RoCE v2 GIDs as facts."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: rdma_devices
short_description: Gather RDMA devices, their ports and RoCE v2 GID indexes from sysfs
version_added: "0.1.0"
author:
  - llmfleet maintainers (!UNKNOWN)
description:
  - Reads C(<sysfs_root>/class/infiniband) and returns one entry per RDMA device (for example
    the four ConnectX-7 functions of a DGX Spark) with its netdevs, identity, port state and
    GID table.
  - For every port it detects the RoCE v2 GID index the way NCCL and perftest do with their
    defaults (IPv4, RoCE v2) - a RoCE v2 entry with an IPv4-mapped address on the device's
    netdev, else a RoCE v2 non-link-local IPv6 entry, else any RoCE v2 entry. That index moves
    between boots as addresses appear in a different order, so playbooks should read it from
    these facts instead of pinning it.
  - A machine without any RDMA device (no C(class/infiniband) directory) is not an error; the
    result is empty and O(ignore:msg) says so.
  - Read-only; never reports a change.
options:
  devices:
    description:
      - Only report these RDMA devices (for example V(rocep1s0f1)).
      - A name that is not present fails the task, listing the devices that are.
      - Combined with O(netdevs), the union of both selections is reported.
    type: list
    elements: str
  netdevs:
    description:
      - Only report the RDMA devices backing these netdevs (for example V(enp1s0f1np1)).
        Fabric roles know netdev names, not RDMA device names.
      - A netdev that no RDMA device backs fails the task.
    type: list
    elements: str
extends_documentation_fragment:
  - llmfleet.cluster.rdma_sysfs
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
attributes:
  check_mode:
    support: full
    details: Only reads sysfs, so check mode returns the same facts as a normal run.
  diff_mode:
    support: none
  facts:
    support: full
  idempotent:
    description:
      - When run twice in a row, the second run reports the same state and changes nothing.
    support: full
    details: Read-only; C(changed) is always false.
  platform:
    platforms: posix
    details: Linux with the kernel's RDMA sysfs (C(/sys/class/infiniband)).
notes:
  - Device names are sorted the way C(ls) sorts them, which on a DGX Spark is PCI order
    (V(rocep1s0f0), V(rocep1s0f1), V(roceP2p1s0f0), V(roceP2p1s0f1)).
  - Unused GID slots answer EINVAL on C(gid_attrs/types/<i>) on real kernels; such slots are
    treated as empty and left out of RV(ansible_facts.rdma_devices.ports.gids).
  - Port numbers are string keys (JSON object keys), for example C(ports['1']).
seealso:
  - module: llmfleet.cluster.rdma_counters
    description: Read and sample the port counters of one of these devices.
  - name: NCCL environment variables (NCCL_IB_GID_INDEX, NCCL_IB_ROCE_VERSION_NUM)
    description: NCCL's own GID selection, which this module reproduces.
    link: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html
"""

EXAMPLES = r"""
- name: Gather the RDMA devices of every Spark
  llmfleet.cluster.rdma_devices:

- name: Gather only the devices behind the QSFP port 1 netdevs
  llmfleet.cluster.rdma_devices:
    netdevs:
      - enp1s0f1np1
      - enP2p1s0f1np1
  register: __fabric_rdma

- name: Pass the detected RoCE v2 GID index to NCCL
  ansible.builtin.set_fact:
    __fabric_nccl_gid_index: >-
      {{ ansible_facts.rdma_devices['rocep1s0f1'].ports['1'].roce_v2_gid_index }}

- name: Fail when a device's port is not ACTIVE
  ansible.builtin.assert:
    that:
      - item.value.ports['1'].state.name == 'ACTIVE'
    fail_msg: "{{ item.key }} port 1 is {{ item.value.ports['1'].state.name }}"
  loop: "{{ __fabric_rdma.devices | dict2items }}"

- name: Read an emulated tree instead of /sys
  llmfleet.cluster.rdma_devices:
    sysfs_root: /run/llmfleet-lab/sysfs
    devices:
      - rocep1s0f1
"""

RETURN = r"""
msg:
  description: One line saying how many devices were found, or that none were found under the root.
  returned: always
  type: str
  sample: Found 4 RDMA devices under /sys/class/infiniband
sysfs_root:
  description: The sysfs root that was read.
  returned: always
  type: str
  sample: /sys
devices:
  description: Same value as RV(ansible_facts.rdma_devices), for C(register).
  returned: always
  type: dict
  sample:
    rocep1s0f1:
      netdevs: [enp1s0f1np1]
      node_guid: 4cbb:4703:002d:1a17
      fw_ver: 28.45.4028
      hca_type: MT4129
      board_id: NVD0000000087
      ports:
        "1":
          state: {code: 4, name: ACTIVE}
          phys_state: {code: 5, name: LinkUp}
          link_layer: Ethernet
          rate: 200 Gb/sec (4X HDR)
          roce_v2_gid_index: 3
          roce_v2_gid: "0000:0000:0000:0000:0000:ffff:c0a8:640a"
          roce_v2_ipv4: 192.168.100.10
          gids:
            - index: 1
              gid: "fe80:0000:0000:0000:4ebb:47ff:fe2d:1a17"
              gid_compressed: "fe80::4ebb:47ff:fe2d:1a17"
              type: RoCE v2
              ndev: enp1s0f1np1
              ipv4: null
            - index: 3
              gid: "0000:0000:0000:0000:0000:ffff:c0a8:640a"
              gid_compressed: "::ffff:192.168.100.10"
              type: RoCE v2
              ndev: enp1s0f1np1
              ipv4: 192.168.100.10
ansible_facts:
  description: Facts added to the host.
  returned: always
  type: complex
  contains:
    rdma_devices:
      description: One entry per RDMA device, keyed by device name; empty when there are none.
      returned: always
      type: dict
      contains:
        netdevs:
          description: Netdevs backing the device (C(device/net/*)).
          type: list
          elements: str
          returned: always
          sample: [enp1s0f1np1]
        node_guid:
          description: C(node_guid); null when unreadable.
          type: str
          returned: always
          sample: 4cbb:4703:002d:1a17
        fw_ver:
          description: Firmware version.
          type: str
          returned: always
          sample: 28.45.4028
        hca_type:
          description: HCA type.
          type: str
          returned: always
          sample: MT4129
        board_id:
          description: Board (PSID) identifier.
          type: str
          returned: always
          sample: NVD0000000087
        ports:
          description: One entry per port, keyed by the port number as a string.
          type: dict
          returned: always
          contains:
            state:
              description: "Logical port state, parsed from a file such as C(4: ACTIVE)."
              type: dict
              returned: always
              sample: {code: 4, name: ACTIVE}
            phys_state:
              description: "Physical port state, parsed from a file such as C(5: LinkUp)."
              type: dict
              returned: always
              sample: {code: 5, name: LinkUp}
            link_layer:
              description: C(Ethernet) for RoCE, C(InfiniBand) for IB.
              type: str
              returned: always
              sample: Ethernet
            rate:
              description: The port's C(rate) file.
              type: str
              returned: always
              sample: 200 Gb/sec (4X HDR)
            roce_v2_gid_index:
              description: Detected RoCE v2 GID index (see the description); null when the
                port has no RoCE v2 GID (for example while its netdev is down).
              type: int
              returned: always
              sample: 3
            roce_v2_gid:
              description: The GID at that index, in the file's 8-group form.
              type: str
              returned: always
              sample: "0000:0000:0000:0000:0000:ffff:c0a8:640a"
            roce_v2_ipv4:
              description: IPv4 address of that GID when it is IPv4-mapped, else null.
              type: str
              returned: always
              sample: 192.168.100.10
            gids:
              description: Populated GID table entries (non-zero GID with a readable type).
              type: list
              elements: dict
              returned: always
              contains:
                index:
                  description: GID index.
                  type: int
                  sample: 3
                gid:
                  description: GID as the sysfs file writes it (8 groups).
                  type: str
                  sample: "0000:0000:0000:0000:0000:ffff:c0a8:640a"
                gid_compressed:
                  description: Short form; C(::ffff:a.b.c.d) for IPv4-mapped GIDs.
                  type: str
                  sample: "::ffff:192.168.100.10"
                type:
                  description: C(RoCE v2) or C(IB/RoCE v1).
                  type: str
                  sample: RoCE v2
                ndev:
                  description: Netdev of the entry; null when unreadable.
                  type: str
                  sample: enp1s0f1np1
                ipv4:
                  description: IPv4 address of an IPv4-mapped GID, else null.
                  type: str
                  sample: 192.168.100.10
"""

# Ansible's module layout: documentation first, imports after it.
from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.llmfleet.cluster.plugins.module_utils._rdma.sysfs import (  # noqa: E402
    SYSFS_ROOT_OPTION,
    RdmaSysfsError,
    device_summary,
    devices_for_netdevs,
    ib_class_dir,
    list_devices,
    netdev_owners,
)

ARGUMENT_SPEC = {
    "sysfs_root": SYSFS_ROOT_OPTION,
    "devices": {"type": "list", "elements": "str"},
    "netdevs": {"type": "list", "elements": "str"},
}


def select_devices(sysfs_root, present, devices=None, netdevs=None):
    """The device names to report, or raise RdmaSysfsError naming what is missing."""
    if not devices and not netdevs:
        return list(present)
    where = ib_class_dir(sysfs_root)
    wanted = []
    missing = [d for d in devices or [] if d not in present]
    if missing:
        raise RdmaSysfsError(
            "RDMA device(s) {0} not found under {1}; present devices: {2}".format(
                ", ".join(missing), where, ", ".join(present) or "none"
            ),
            path=where,
            available=present,
        )
    wanted.extend(devices or [])
    if netdevs:
        owners = devices_for_netdevs(sysfs_root, netdevs)
        orphans = [n for n, dev in owners.items() if dev is None]
        if orphans:
            backed = netdev_owners(sysfs_root)
            known = ", ".join("{0} ({1})".format(n, d) for n, d in backed.items())
            message = "no RDMA device under {0} backs netdev(s) {1}; netdevs with RDMA devices: {2}"
            raise RdmaSysfsError(
                message.format(where, ", ".join(orphans), known or "none"),
                path=where,
                available=present,
            )
        wanted.extend(owners.values())
    wanted_set = set(wanted)
    return [d for d in present if d in wanted_set]


def gather(sysfs_root, devices=None, netdevs=None):
    """The module's result (without changed); raises RdmaSysfsError."""
    present = list_devices(sysfs_root)
    where = ib_class_dir(sysfs_root)
    if not present and not devices and not netdevs:
        return {
            "msg": "No RDMA devices found under {0}".format(where),
            "sysfs_root": sysfs_root,
            "devices": {},
            "ansible_facts": {"rdma_devices": {}},
        }
    selected = select_devices(sysfs_root, present, devices, netdevs)
    facts = {name: device_summary(sysfs_root, name) for name in selected}
    return {
        "msg": "Found {0} RDMA device{1} under {2}{3}".format(
            len(present),
            "" if len(present) == 1 else "s",
            where,
            "" if len(selected) == len(present) else ", reporting {0}".format(len(selected)),
        ),
        "sysfs_root": sysfs_root,
        "devices": facts,
        "ansible_facts": {"rdma_devices": facts},
    }


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    try:
        result = gather(
            module.params["sysfs_root"], module.params["devices"], module.params["netdevs"]
        )
    except RdmaSysfsError as error:
        module.fail_json(msg=str(error), path=error.path, available=error.available)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
