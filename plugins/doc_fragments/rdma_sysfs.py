"""The sysfs_root option shared by the modules that read the RDMA sysfs tree."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  sysfs_root:
    description:
      - Where sysfs is mounted. The tree read is C(<sysfs_root>/class/infiniband).
      - When not set, the environment variable E(LLMFLEET_SYSFS_ROOT) on the managed node is
        used if present, else C(/sys).
    type: path
    default: /sys
"""
