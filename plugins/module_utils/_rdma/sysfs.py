# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Read the kernel's RDMA sysfs tree (``<sysfs_root>/class/infiniband``).

Pure functions, no AnsibleModule: the modules ``rdma_devices`` and
``rdma_counters`` are thin wrappers around them and unit tests call them
directly. The layout is the kernel's::

    <sysfs_root>/class/infiniband/<dev>/
        node_type node_guid fw_ver hca_type board_id
        device/net/<netdev>
        ports/<n>/state phys_state link_layer rate
        ports/<n>/gids/<i>
        ports/<n>/gid_attrs/types/<i>   "RoCE v2" | "IB/RoCE v1" (EINVAL when unused)
        ports/<n>/gid_attrs/ndevs/<i>   netdev of the entry (EINVAL when unused)
        ports/<n>/counters/*            port_xmit_data / port_rcv_data in 4-byte words

``sysfs_root`` is ``/sys`` on a real machine; anything else (a test tree, an
emulator's tree) works the same. Nothing here writes. The GIDs are read here and
judged by ``gids``; ``counters`` reads the counters.
"""

from __future__ import annotations

import os
import re

from ansible.module_utils.basic import env_fallback
from ansible_collections.llmfleet.cluster.plugins.module_utils._rdma.gids import (
    ZERO_GID,
    gid_compressed,
    gid_ipv4,
    gid_type,
    populated_gids,
    select_roce_v2_gid,
)

# The modules' shared sysfs_root option (documented in doc_fragments/rdma_sysfs.py).
SYSFS_ROOT_OPTION = {
    "type": "path",
    "default": "/sys",
    "fallback": (env_fallback, ["LLMFLEET_SYSFS_ROOT"]),
}

_STATE_RE = re.compile(r"^\s*(\d+)\s*:\s*(.*?)\s*$")


class RdmaSysfsError(Exception):
    """A device, port, counter or the sysfs root itself is not where it was looked for.

    ``path`` is the path that was looked at; ``available`` lists what does exist
    at that level (device names, port numbers or counter names).
    """

    def __init__(self, message, path=None, available=None):
        super().__init__(message)
        self.message = message
        self.path = path
        self.available = list(available or [])

    def __str__(self):
        return self.message


def read_attr(path):
    """The stripped text of a sysfs attribute, or None when it cannot be read.

    Real kernels answer EINVAL (an OSError) on some attributes, e.g. the
    ``gid_attrs/types/<i>`` file of an unused GID slot; a directory in place of
    the file reads as None too.
    """
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except (OSError, UnicodeError):
        return None


def list_entries(path):
    """The names in a directory, hidden ones aside; none when it cannot be listed."""
    try:
        return [name for name in os.listdir(path) if not name.startswith(".")]
    except OSError:
        return []


def collation_key(name):
    """Order names as ``ls`` does in a UTF-8 locale: case folded first.

    On a DGX Spark this is also PCI order: rocep1s0f0, rocep1s0f1,
    roceP2p1s0f0, roceP2p1s0f1.
    """
    return (name.casefold(), name)


def numeric_names(path):
    """The numeric names in a directory (ports, GID slots), as ints, ascending."""
    return sorted(int(name) for name in list_entries(path) if name.isdigit())


def ib_class_dir(sysfs_root):
    return os.path.join(sysfs_root, "class", "infiniband")


def _require_root(sysfs_root):
    if not os.path.isdir(sysfs_root):
        raise RdmaSysfsError(
            "sysfs root {0} does not exist or is not a directory".format(sysfs_root),
            path=sysfs_root,
        )


def list_devices(sysfs_root):
    """RDMA device names under ``<sysfs_root>/class/infiniband``, in ``ls`` order.

    An existing sysfs root without ``class/infiniband`` has no RDMA devices
    (a machine without RDMA hardware): the answer is an empty list. A missing
    sysfs root raises RdmaSysfsError.
    """
    _require_root(sysfs_root)
    return sorted(list_entries(ib_class_dir(sysfs_root)), key=collation_key)


def describe_available(kind, names):
    """``present <kind>: a, b`` (or ``no <kind> present``), for error messages."""
    if not names:
        return "no {0} present".format(kind)
    return "present {0}: {1}".format(kind, ", ".join(str(n) for n in names))


def device_dir(sysfs_root, device):
    """The device's directory; RdmaSysfsError naming the present devices if missing."""
    path = os.path.join(ib_class_dir(sysfs_root), device)
    if not os.path.isdir(path):
        present = list_devices(sysfs_root)
        raise RdmaSysfsError(
            "RDMA device {0!r} not found: {1} does not exist; {2}".format(
                device, path, describe_available("RDMA devices", present)
            ),
            path=path,
            available=present,
        )
    return path


def device_netdevs(sysfs_root, device):
    """Netdevs backing the device (``device/net/*``), sorted."""
    ddir = device_dir(sysfs_root, device)
    return sorted(list_entries(os.path.join(ddir, "device", "net")), key=collation_key)


def device_ports(sysfs_root, device):
    """Port numbers of the device (``ports/*``), ascending."""
    return numeric_names(os.path.join(device_dir(sysfs_root, device), "ports"))


def port_dir(sysfs_root, device, port):
    """The port's directory; RdmaSysfsError naming the present ports if missing."""
    ddir = device_dir(sysfs_root, device)
    path = os.path.join(ddir, "ports", str(port))
    if not os.path.isdir(path):
        ports = numeric_names(os.path.join(ddir, "ports"))
        raise RdmaSysfsError(
            "port {0} of RDMA device {1!r} not found: {2} does not exist; {3}".format(
                port, device, path, describe_available("ports", ports)
            ),
            path=path,
            available=ports,
        )
    return path


def device_identity(sysfs_root, device):
    """node_type, node_guid, fw_ver, hca_type, board_id (None where unreadable)."""
    ddir = device_dir(sysfs_root, device)
    return {
        key: read_attr(os.path.join(ddir, key))
        for key in ("node_type", "node_guid", "fw_ver", "hca_type", "board_id")
    }


def netdev_owners(sysfs_root):
    """Every netdev that backs an RDMA device, mapped to that device (``ls`` order)."""
    owner = {}
    for device in list_devices(sysfs_root):
        for netdev in device_netdevs(sysfs_root, device):
            owner.setdefault(netdev, device)
    return owner


def devices_for_netdevs(sysfs_root, netdevs):
    """Map each of ``netdevs`` to the RDMA device backing it (None when none does)."""
    owner = netdev_owners(sysfs_root)
    return {netdev: owner.get(netdev) for netdev in netdevs}


def parse_state(text):
    """``"4: ACTIVE"`` -> ``{"code": 4, "name": "ACTIVE"}``; None stays None.

    Text without a numeric code keeps its text as the name and a None code.
    """
    if text is None:
        return None
    match = _STATE_RE.match(text)
    if match is None:
        return {"code": None, "name": text.strip()}
    return {"code": int(match.group(1)), "name": match.group(2)}


def port_attributes(sysfs_root, device, port):
    """state and phys_state (parsed), link_layer and rate (text) of a port."""
    pdir = port_dir(sysfs_root, device, port)
    return {
        "state": parse_state(read_attr(os.path.join(pdir, "state"))),
        "phys_state": parse_state(read_attr(os.path.join(pdir, "phys_state"))),
        "link_layer": read_attr(os.path.join(pdir, "link_layer")),
        "rate": read_attr(os.path.join(pdir, "rate")),
    }


def read_gid_table(sysfs_root, device, port):
    """Every slot of the port's GID table, ascending index.

    Each entry: ``index``, ``gid`` (the file's 8-group form), ``gid_compressed``,
    ``type`` (``RoCE v2``, ``IB/RoCE v1`` or None for an empty or unreadable
    slot), ``ndev`` (None when empty/unreadable), ``ipv4`` (for IPv4-mapped GIDs).
    """
    pdir = port_dir(sysfs_root, device, port)
    table = []
    for index in numeric_names(os.path.join(pdir, "gids")):
        gid = read_attr(os.path.join(pdir, "gids", str(index))) or ZERO_GID
        table.append(
            {
                "index": index,
                "gid": gid,
                "gid_compressed": gid_compressed(gid),
                "type": gid_type(read_attr(os.path.join(pdir, "gid_attrs", "types", str(index)))),
                "ndev": read_attr(os.path.join(pdir, "gid_attrs", "ndevs", str(index))) or None,
                "ipv4": gid_ipv4(gid),
            }
        )
    return table


def port_summary(sysfs_root, device, port, netdevs=None):
    """Attributes, detected RoCE v2 GID and populated GIDs of one port."""
    summary = port_attributes(sysfs_root, device, port)
    table = read_gid_table(sysfs_root, device, port)
    best = select_roce_v2_gid(table, netdevs)
    summary["roce_v2_gid_index"] = None if best is None else best["index"]
    summary["roce_v2_gid"] = None if best is None else best["gid"]
    summary["roce_v2_ipv4"] = None if best is None else best["ipv4"]
    summary["gids"] = populated_gids(table)
    return summary


def device_summary(sysfs_root, device):
    """Everything the rdma_devices fact holds about one device."""
    identity = device_identity(sysfs_root, device)
    netdevs = device_netdevs(sysfs_root, device)
    summary = {
        "netdevs": netdevs,
        "node_guid": identity["node_guid"],
        "fw_ver": identity["fw_ver"],
        "hca_type": identity["hca_type"],
        "board_id": identity["board_id"],
        "ports": {},
    }
    for port in device_ports(sysfs_root, device):
        summary["ports"][str(port)] = port_summary(sysfs_root, device, port, netdevs)
    return summary
