#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Ansible module rdma_counters: read and sample an RDMA port's counters."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: rdma_counters
short_description: Read, and optionally sample, the port counters of an RDMA device
version_added: "0.1.0"
author:
  - llmfleet maintainers (!UNKNOWN)
description:
  - Reads every file in C(<sysfs_root>/class/infiniband/<device>/ports/<port>/counters/)
    (or the subset named in O(counters)).
  - C(port_xmit_data) and C(port_rcv_data) count 4-byte words; RV(counters) gives them in
    bytes (multiplied by 4), RV(counters_raw) as the files say.
  - With O(sample_seconds) above zero the counters are read twice that far apart and
    RV(rates) gives per-second rates, including the transmit and receive bandwidth in Gb/s.
    This is how to see whether traffic (an NCCL test, C(ib_write_bw), vLLM tensor parallel
    traffic) really goes over RDMA.
  - Read-only; never reports a change.
options:
  device:
    description:
      - RDMA device name, for example V(rocep1s0f1). A device that is not present fails the
        task, listing the devices that are.
    type: str
    required: true
  port:
    description:
      - Port number of the device (ConnectX-7 functions on a DGX Spark have port 1 only).
    type: int
    default: 1
  counters:
    description:
      - Only read these counters (file names in the C(counters) directory, for example
        V(port_xmit_data)). A name that is not there fails the task, listing those that are.
      - When omitted, every counter is read.
    type: list
    elements: str
  sample_seconds:
    description:
      - Seconds between the two readings used for RV(rates). V(0) reads once and returns no
        rates. Must not be negative. The task takes at least this long.
    type: float
    default: 0
extends_documentation_fragment:
  - llmfleet.cluster.rdma_sysfs
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Only reads sysfs, so check mode reads and samples exactly as a normal run.
  diff_mode:
    support: none
  idempotent:
    description:
      - When run twice in a row, the second run changes nothing.
    support: full
    details: Read-only; C(changed) is always false. The counter values themselves move with traffic.
  platform:
    platforms: posix
    details: Linux with the kernel's RDMA sysfs (C(/sys/class/infiniband)).
notes:
  - Rates are computed over the time measured between the two readings, which is
    RV(elapsed_seconds) and slightly longer than O(sample_seconds).
  - A counter that goes backwards between the readings (reset or wrap) has a null RV(delta) and
    rate, and a warning is issued.
  - Counters whose file cannot be read (some kernels answer EINVAL for a few of them) are listed
    in RV(unreadable) instead of failing the task.
  - Only the IB port counters in C(counters/) are read; the driver's C(hw_counters/) (for example
    congestion notification counters) are not.
seealso:
  - module: llmfleet.cluster.rdma_devices
    description: Find the device behind a netdev, its port state and RoCE v2 GID index.
"""

EXAMPLES = r"""
- name: Read every counter of the device behind enp1s0f1np1
  llmfleet.cluster.rdma_counters:
    device: rocep1s0f1
  register: __bench_counters

- name: Sample both halves of QSFP port 1 for 5 seconds each while a long benchmark runs
  llmfleet.cluster.rdma_counters:
    device: "{{ item }}"
    counters:
      - port_xmit_data
      - port_rcv_data
    sample_seconds: 5
  loop:
    - rocep1s0f1
    - roceP2p1s0f1
  register: __bench_rates

- name: Fail when the fabric carried less than 175 Gb/s in total
  ansible.builtin.assert:
    that:
      - __bench_rates.results | map(attribute='rates.xmit_gbits_per_second') | sum >= 175
    fail_msg: RDMA transmit bandwidth is below 175 Gb/s

# Ad hoc:
#   ansible sparks -m llmfleet.cluster.rdma_counters -a device=rocep1s0f1
#   ansible sparks -m llmfleet.cluster.rdma_counters -a 'device=rocep1s0f1 sample_seconds=2'
"""

RETURN = r"""
device:
  description: The RDMA device read.
  returned: always
  type: str
  sample: rocep1s0f1
port:
  description: The port read.
  returned: always
  type: int
  sample: 1
sysfs_root:
  description: The sysfs root that was read.
  returned: always
  type: str
  sample: /sys
counters:
  description:
    - Counter values, keyed by counter name. C(port_xmit_data) and C(port_rcv_data) in bytes
      (the files' 4-byte words times 4); every other counter as the file says.
    - With sampling, the values of the second reading.
  returned: always
  type: dict
  sample: {port_xmit_data: 200213120, port_rcv_data: 8400, port_xmit_packets: 24671, link_downed: 0}
counters_raw:
  description: Counter values exactly as the files hold them (data counters in 4-byte words).
  returned: always
  type: dict
  sample: {port_xmit_data: 50053280, port_rcv_data: 2100, port_xmit_packets: 24671, link_downed: 0}
unreadable:
  description: Counters whose file could not be read or parsed; left out of RV(counters).
  returned: always
  type: list
  elements: str
  sample: []
unit_note:
  description: One line on the units of RV(counters).
  returned: always
  type: str
  sample: >-
    port_xmit_data and port_rcv_data are in bytes: the sysfs files count 4-byte words and were
    multiplied by 4; every other counter is the file's raw value.
sample_seconds:
  description: The requested interval between the two readings.
  returned: when O(sample_seconds) > 0
  type: float
  sample: 5.0
elapsed_seconds:
  description: The measured interval between the two readings, used for RV(rates).
  returned: when O(sample_seconds) > 0
  type: float
  sample: 5.0012
delta:
  description: Increase of each counter between the readings (bytes for the data counters);
    null for a counter that went backwards.
  returned: when O(sample_seconds) > 0
  type: dict
  sample: {port_xmit_data: 66250000000, port_rcv_data: 1024, port_xmit_packets: 7441000}
rates:
  description: Per-second rate of each counter (bytes per second for the data counters), plus
    the data counters as Gb/s.
  returned: when O(sample_seconds) > 0
  type: dict
  sample:
    port_xmit_data: 13250000000.0
    port_rcv_data: 204.8
    port_xmit_packets: 1488200.0
    xmit_gbits_per_second: 106.0
    rcv_gbits_per_second: 0.000002
  contains:
    xmit_gbits_per_second:
      description: Transmit bandwidth in Gb/s (10^9 bits).
      type: float
      returned: when C(port_xmit_data) is among the sampled counters
      sample: 106.0
    rcv_gbits_per_second:
      description: Receive bandwidth in Gb/s (10^9 bits).
      type: float
      returned: when C(port_rcv_data) is among the sampled counters
      sample: 0.000002
"""

# Ansible's module layout: documentation first, imports after it.
from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.llmfleet.cluster.plugins.module_utils._rdma.counters import (  # noqa: E402
    UNIT_NOTE,
    counters_in_bytes,
    read_counters,
    sample_counters,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._rdma.sysfs import (  # noqa: E402
    SYSFS_ROOT_OPTION,
    RdmaSysfsError,
)

ARGUMENT_SPEC = {
    "device": {"type": "str", "required": True},
    "port": {"type": "int", "default": 1},
    "sysfs_root": SYSFS_ROOT_OPTION,
    "counters": {"type": "list", "elements": "str"},
    "sample_seconds": {"type": "float", "default": 0},
}


def collect(sysfs_root, device, port, counters=None, sample_seconds=0.0):
    """The module's result (without changed); raises RdmaSysfsError or ValueError."""
    if sample_seconds < 0:
        raise ValueError(
            "sample_seconds must be 0 (read once) or a positive number of seconds, got {0}".format(
                sample_seconds
            )
        )
    result = {
        "device": device,
        "port": port,
        "sysfs_root": sysfs_root,
        "unit_note": UNIT_NOTE,
    }
    if sample_seconds == 0:
        raw, unreadable = read_counters(sysfs_root, device, port, counters)
    else:
        sample = sample_counters(sysfs_root, device, port, sample_seconds, counters)
        raw, unreadable = sample["second"], sample["unreadable"]
        result.update(
            sample_seconds=sample_seconds,
            elapsed_seconds=round(sample["elapsed_seconds"], 6),
            delta=sample["delta"],
            rates={k: v if v is None else round(v, 6) for k, v in sample["rates"].items()},
        )
    result.update(
        counters=counters_in_bytes(raw),
        counters_raw=raw,
        unreadable=unreadable,
    )
    return result


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    try:
        result = collect(
            params["sysfs_root"],
            params["device"],
            params["port"],
            params["counters"],
            params["sample_seconds"],
        )
    except RdmaSysfsError as error:
        module.fail_json(msg=str(error), path=error.path, available=error.available)
    except ValueError as error:
        module.fail_json(msg=str(error))
    for name, change in sorted(result.get("delta", {}).items()):
        if change is None:
            module.warn(
                "counter {0} went backwards during the sample (reset or wrap); "
                "its delta and rate are null".format(name)
            )
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
