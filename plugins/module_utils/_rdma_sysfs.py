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
emulator's tree) works the same. Nothing here writes.
"""

from __future__ import annotations

import ipaddress
import os
import re
import time

from ansible.module_utils.basic import env_fallback

# The modules' shared sysfs_root option (documented in doc_fragments/rdma_sysfs.py).
SYSFS_ROOT_OPTION = {
    "type": "path",
    "default": "/sys",
    "fallback": (env_fallback, ["LLMFLEET_SYSFS_ROOT"]),
}

GID_TYPE_ROCE_V1 = "IB/RoCE v1"
GID_TYPE_ROCE_V2 = "RoCE v2"
ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"

# IB data counters count 4-byte words (IBA PortCounters PortXmitData/PortRcvData).
DATA_COUNTERS = ("port_xmit_data", "port_rcv_data")
DATA_COUNTER_WORD_BYTES = 4
UNIT_NOTE = (
    "port_xmit_data and port_rcv_data are in bytes: the sysfs files count 4-byte words "
    "and were multiplied by 4; every other counter is the file's raw value."
)

_STATE_RE = re.compile(r"^\s*(\d+)\s*:\s*(.*?)\s*$")

# Indirections the unit tests replace to drive the sampler deterministically.
_sleep = time.sleep
_clock = time.monotonic


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


# ---------------------------------------------------------------------------
# low-level readers
# ---------------------------------------------------------------------------
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


def _listdir(path):
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


def _numeric_names(path):
    return sorted(int(name) for name in _listdir(path) if name.isdigit())


# ---------------------------------------------------------------------------
# paths and discovery
# ---------------------------------------------------------------------------
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
    return sorted(_listdir(ib_class_dir(sysfs_root)), key=collation_key)


def _describe_available(kind, names):
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
                device, path, _describe_available("RDMA devices", present)
            ),
            path=path,
            available=present,
        )
    return path


def device_netdevs(sysfs_root, device):
    """Netdevs backing the device (``device/net/*``), sorted."""
    ddir = device_dir(sysfs_root, device)
    return sorted(_listdir(os.path.join(ddir, "device", "net")), key=collation_key)


def device_ports(sysfs_root, device):
    """Port numbers of the device (``ports/*``), ascending."""
    return _numeric_names(os.path.join(device_dir(sysfs_root, device), "ports"))


def port_dir(sysfs_root, device, port):
    """The port's directory; RdmaSysfsError naming the present ports if missing."""
    ddir = device_dir(sysfs_root, device)
    path = os.path.join(ddir, "ports", str(port))
    if not os.path.isdir(path):
        ports = _numeric_names(os.path.join(ddir, "ports"))
        raise RdmaSysfsError(
            "port {0} of RDMA device {1!r} not found: {2} does not exist; {3}".format(
                port, device, path, _describe_available("ports", ports)
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


# ---------------------------------------------------------------------------
# port attributes
# ---------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------
# GIDs
# ---------------------------------------------------------------------------
def gid_bytes(gid):
    """The 16 raw bytes of a GID in any IPv6 notation; None if it is not one."""
    if gid is None:
        return None
    text = gid.strip()
    if re.match(r"^[0-9a-fA-F]{4}(:[0-9a-fA-F]{4}){7}$", text):
        return bytes.fromhex(text.replace(":", ""))
    try:
        return ipaddress.IPv6Address(text).packed
    except ValueError:
        return None


def gid_is_zero(gid):
    raw = gid_bytes(gid)
    return raw is None or raw == bytes(16)


def gid_ipv4(gid):
    """The IPv4 address of an IPv4-mapped GID (``::ffff:c0a8:640a`` -> 192.168.100.10)."""
    raw = gid_bytes(gid)
    if raw is None or raw[:10] != bytes(10) or raw[10:12] != b"\xff\xff":
        return None
    return str(ipaddress.IPv4Address(raw[12:]))


def gid_is_link_local(gid):
    raw = gid_bytes(gid)
    return raw is not None and raw[:8] == b"\xfe\x80" + bytes(6)


def gid_compressed(gid):
    """Short form: ``::ffff:192.168.100.10`` for IPv4-mapped GIDs (as inet_ntop and
    show_gids print them), RFC 5952 compression otherwise; None if not a GID."""
    raw = gid_bytes(gid)
    if raw is None:
        return None
    ipv4 = gid_ipv4(gid)
    if ipv4 is not None:
        return "::ffff:" + ipv4
    return ipaddress.IPv6Address(raw).compressed


def gid_type(text):
    """Normalize a ``gid_attrs/types`` value; None for empty/unreadable slots."""
    if not text:
        return None
    if text.startswith(GID_TYPE_ROCE_V2):
        return GID_TYPE_ROCE_V2
    if text.startswith(GID_TYPE_ROCE_V1) or text.startswith("RoCE v1"):
        return GID_TYPE_ROCE_V1
    return text


def read_gid_table(sysfs_root, device, port):
    """Every slot of the port's GID table, ascending index.

    Each entry: ``index``, ``gid`` (the file's 8-group form), ``gid_compressed``,
    ``type`` (``RoCE v2``, ``IB/RoCE v1`` or None for an empty or unreadable
    slot), ``ndev`` (None when empty/unreadable), ``ipv4`` (for IPv4-mapped GIDs).
    """
    pdir = port_dir(sysfs_root, device, port)
    table = []
    for index in _numeric_names(os.path.join(pdir, "gids")):
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


def populated_gids(table):
    """Entries in use: a non-zero GID with a readable type."""
    return [e for e in table if e["type"] is not None and not gid_is_zero(e["gid"])]


def select_roce_v2_gid(table, netdevs=None):
    """The GID entry NCCL and perftest would use for RoCE v2, or None.

    With their defaults (NCCL_IB_ADDR_FAMILY=AF_INET, NCCL_IB_ROCE_VERSION_NUM=2;
    perftest's get_best_gid_index for IPv4) the choice is, lowest index first
    within each rank:

    1. a RoCE v2 entry whose GID is IPv4-mapped (``::ffff:a.b.c.d``);
    2. else a RoCE v2 entry with a non-link-local IPv6 GID;
    3. else any RoCE v2 entry (the fe80:: default GID);
    4. else None.

    Only populated entries count, and when ``netdevs`` is given only entries on
    one of them (an entry with an unreadable ndev is accepted). The index moves
    between boots as addresses come and go, so it is detected, never pinned.
    """
    wanted = set(netdevs or [])

    def on_wanted_netdev(entry):
        return not wanted or entry["ndev"] is None or entry["ndev"] in wanted

    candidates = [
        e for e in populated_gids(table) if e["type"] == GID_TYPE_ROCE_V2 and on_wanted_netdev(e)
    ]
    for rank in (
        lambda e: e["ipv4"] is not None,
        lambda e: e["ipv4"] is None and not gid_is_link_local(e["gid"]),
        lambda e: True,
    ):
        for entry in sorted(candidates, key=lambda e: e["index"]):
            if rank(entry):
                return entry
    return None


def roce_v2_gid_index(table, netdevs=None):
    """The index of select_roce_v2_gid(), or None."""
    entry = select_roce_v2_gid(table, netdevs)
    return None if entry is None else entry["index"]


# ---------------------------------------------------------------------------
# device summary (the rdma_devices fact)
# ---------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------
# counters
# ---------------------------------------------------------------------------
def _parse_counter(text):
    if text is None:
        return None
    try:
        return int(text, 0)
    except ValueError:
        return None


def list_counters(sysfs_root, device, port):
    """Names of the files in ``ports/<n>/counters/``, sorted."""
    return sorted(_listdir(os.path.join(port_dir(sysfs_root, device, port), "counters")))


def read_counters(sysfs_root, device, port, names=None):
    """Raw counter values as the files hold them.

    Returns ``(values, unreadable)``: ``values`` maps each readable counter to
    its integer value; ``unreadable`` lists counters whose file could not be
    read or parsed. ``names`` selects a subset; a name that is not a counter
    file raises RdmaSysfsError listing the counters that exist.
    """
    cdir = os.path.join(port_dir(sysfs_root, device, port), "counters")
    present = list_counters(sysfs_root, device, port)
    if names:
        missing = [n for n in names if n not in present]
        if missing:
            raise RdmaSysfsError(
                "counter(s) {0} not found in {1}; {2}".format(
                    ", ".join(missing), cdir, _describe_available("counters", present)
                ),
                path=cdir,
                available=present,
            )
        selected = list(dict.fromkeys(names))
    else:
        selected = present
    values = {}
    unreadable = []
    for name in selected:
        value = _parse_counter(read_attr(os.path.join(cdir, name)))
        if value is None:
            unreadable.append(name)
        else:
            values[name] = value
    return values, unreadable


def counters_in_bytes(raw):
    """Data counters (4-byte words) converted to bytes; every other counter unchanged."""
    return {
        name: value * DATA_COUNTER_WORD_BYTES if name in DATA_COUNTERS else value
        for name, value in raw.items()
    }


def bytes_to_gbits(byte_count):
    return byte_count * 8 / 1e9


def compute_rates(before, after, elapsed):
    """Per-second rates between two ``counters_in_bytes`` readings.

    Returns ``(delta, rates)``. A counter that went backwards (reset, wrap) has
    a None delta and rate. ``rates`` gains ``xmit_gbits_per_second`` /
    ``rcv_gbits_per_second`` when the data counters were sampled.
    """
    if elapsed <= 0:
        raise ValueError("elapsed time must be positive, got {0}".format(elapsed))
    delta = {}
    rates = {}
    for name in sorted(set(before) & set(after)):
        change = after[name] - before[name]
        if change < 0:
            delta[name] = None
            rates[name] = None
            continue
        delta[name] = change
        rates[name] = change / elapsed
    for counter, key in (
        ("port_xmit_data", "xmit_gbits_per_second"),
        ("port_rcv_data", "rcv_gbits_per_second"),
    ):
        if counter in rates:
            rates[key] = None if rates[counter] is None else bytes_to_gbits(rates[counter])
    return delta, rates


def sample_counters(
    sysfs_root, device, port, sample_seconds, names=None, *, sleep=None, clock=None
):
    """Read the counters twice ``sample_seconds`` apart and compute rates.

    Returns a dict with ``first`` and ``second`` (raw readings), ``unreadable``,
    ``elapsed_seconds`` (measured between the two reads), ``delta`` (in bytes
    for the data counters) and ``rates`` (per second; bytes/s for the data
    counters, plus Gb/s).
    """
    if sample_seconds <= 0:
        raise ValueError("sample_seconds must be > 0, got {0}".format(sample_seconds))
    sleep = sleep or _sleep
    clock = clock or _clock
    first, unreadable_1 = read_counters(sysfs_root, device, port, names)
    start = clock()
    sleep(sample_seconds)
    second, unreadable_2 = read_counters(sysfs_root, device, port, names)
    elapsed = clock() - start
    if elapsed <= 0:
        elapsed = sample_seconds
    delta, rates = compute_rates(counters_in_bytes(first), counters_in_bytes(second), elapsed)
    return {
        "first": first,
        "second": second,
        "unreadable": sorted(set(unreadable_1) | set(unreadable_2)),
        "elapsed_seconds": elapsed,
        "delta": delta,
        "rates": rates,
    }
