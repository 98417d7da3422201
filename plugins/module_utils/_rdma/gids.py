# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""RDMA GIDs as the kernel lists them, and the one NCCL and perftest pick (pure).

A GID is 16 bytes written as 8 groups (``fe80:0000:...``); RoCE v2 GIDs of an
IPv4 address are IPv4-mapped (``::ffff:192.168.100.10``). The index of the GID that
NCCL and perftest use moves between boots as addresses come and go, so it is
detected from the table (``select_roce_v2_gid``), never pinned.
"""

from __future__ import annotations

import ipaddress
import re

GID_TYPE_ROCE_V1 = "IB/RoCE v1"
GID_TYPE_ROCE_V2 = "RoCE v2"
ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


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
