"""module_utils/_rdma/gids: GID forms and types, and the RoCE v2 GID NCCL and perftest pick."""

from __future__ import annotations

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._rdma import gids as _rdma_gids

from tests.unit.plugins.conftest import (
    LL_P1S0F1,
    V1,
    V2,
    V4_100_10,
    V6_GLOBAL,
    ZERO_GID,
)


@pytest.mark.parametrize(
    ("gid", "ipv4", "compressed", "link_local", "zero"),
    [
        (V4_100_10, "192.168.100.10", "::ffff:192.168.100.10", False, False),
        ("0000:0000:0000:0000:0000:ffff:0a00:0001", "10.0.0.1", "::ffff:10.0.0.1", False, False),
        (LL_P1S0F1, None, "fe80::4ebb:47ff:fe2d:1a17", True, False),
        (V6_GLOBAL, None, "2001:db8::10", False, False),
        (ZERO_GID, None, "::", False, True),
        # ::ffff:0:a.b.c.d is not IPv4-mapped (NCCL's getGidAddrFamily agrees)
        ("0000:0000:0000:0000:ffff:0000:c0a8:640a", None, "::ffff:0:c0a8:640a", False, False),
    ],
)
def test_gid_forms(
    gid: str, ipv4: str | None, compressed: str, link_local: bool, zero: bool
) -> None:
    assert _rdma_gids.gid_ipv4(gid) == ipv4
    assert _rdma_gids.gid_compressed(gid) == compressed
    assert _rdma_gids.gid_is_link_local(gid) is link_local
    assert _rdma_gids.gid_is_zero(gid) is zero


@pytest.mark.parametrize("bad", ["", "not-a-gid", "0000:0000", None])
def test_gid_forms_of_garbage(bad: str | None) -> None:
    assert _rdma_gids.gid_bytes(bad) is None
    assert _rdma_gids.gid_ipv4(bad) is None
    assert _rdma_gids.gid_compressed(bad) is None
    assert _rdma_gids.gid_is_zero(bad) is True


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("RoCE v2", V2),
        ("IB/RoCE v1", V1),
        ("RoCE v1", V1),
        ("", None),
        (None, None),
    ],
)
def test_gid_type(text: str | None, expected: str | None) -> None:
    assert _rdma_gids.gid_type(text) == expected


def entry(index: int, gid: str, gtype: str | None, ndev: str | None = "enp1s0f1np1") -> dict:
    return {
        "index": index,
        "gid": gid,
        "gid_compressed": _rdma_gids.gid_compressed(gid),
        "type": gtype,
        "ndev": ndev,
        "ipv4": _rdma_gids.gid_ipv4(gid),
    }


V4_OTHER = "0000:0000:0000:0000:0000:ffff:0a00:0001"

GID_CASES = {
    "ipv4 v2 after the default gid": (
        [
            entry(0, LL_P1S0F1, V1),
            entry(1, LL_P1S0F1, V2),
            entry(2, V4_100_10, V1),
            entry(3, V4_100_10, V2),
        ],
        3,
    ),
    "ipv4 v2 before the default gid": (
        [
            entry(0, V4_100_10, V1),
            entry(1, V4_100_10, V2),
            entry(2, LL_P1S0F1, V1),
            entry(3, LL_P1S0F1, V2),
        ],
        1,
    ),
    "ipv4 only as v1 falls back to the link-local v2": (
        [entry(0, LL_P1S0F1, V1), entry(1, LL_P1S0F1, V2), entry(2, V4_100_10, V1)],
        1,
    ),
    "global ipv6 v2 beats link-local v2": (
        [
            entry(0, LL_P1S0F1, V1),
            entry(1, LL_P1S0F1, V2),
            entry(4, V6_GLOBAL, V1),
            entry(5, V6_GLOBAL, V2),
        ],
        5,
    ),
    "ipv4 beats global ipv6 whatever the order": (
        [entry(2, V6_GLOBAL, V2), entry(7, V4_100_10, V2), entry(1, LL_P1S0F1, V2)],
        7,
    ),
    "lowest ipv4 v2 index wins": (
        [entry(9, V4_OTHER, V2), entry(5, V4_100_10, V2)],
        5,
    ),
    "unreadable type is an empty slot": (
        [entry(1, LL_P1S0F1, V2), entry(3, V4_100_10, None)],
        1,
    ),
    "zero gid is an empty slot": (
        [entry(1, ZERO_GID, V2), entry(2, LL_P1S0F1, V1)],
        None,
    ),
    "only v1": ([entry(0, LL_P1S0F1, V1), entry(2, V4_100_10, V1)], None),
    "empty table": ([], None),
    "other netdev's ipv4 is skipped": (
        [entry(1, LL_P1S0F1, V2), entry(3, V4_100_10, V2, ndev="enP2p1s0f1np1")],
        1,
    ),
    "unknown ndev is accepted": (
        [entry(1, LL_P1S0F1, V2), entry(3, V4_100_10, V2, ndev=None)],
        3,
    ),
}


@pytest.mark.parametrize(("table", "expected"), GID_CASES.values(), ids=GID_CASES.keys())
def test_roce_v2_gid_index(table: list[dict], expected: int | None) -> None:
    assert _rdma_gids.roce_v2_gid_index(table, ["enp1s0f1np1"]) == expected


def test_roce_v2_gid_index_without_netdev_filter_takes_any_netdev() -> None:
    table = [entry(1, LL_P1S0F1, V2), entry(3, V4_100_10, V2, ndev="enP2p1s0f1np1")]
    assert _rdma_gids.roce_v2_gid_index(table) == 3
    assert _rdma_gids.select_roce_v2_gid(table)["ipv4"] == "192.168.100.10"
