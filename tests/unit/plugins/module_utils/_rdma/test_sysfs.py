"""module_utils/_rdma/sysfs: reading a Spark's RDMA sysfs tree (devices, ports, GID table), and
the lab emulator's tree.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._rdma import (
    counters as _rdma_counters,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._rdma import gids as _rdma_gids
from ansible_collections.llmfleet.cluster.plugins.module_utils._rdma import sysfs as rs

from tests.unit.plugins.conftest import (
    V1,
    V2,
    V4_100_10,
    V6_GLOBAL,
    ZERO_GID,
    SparkSysfs,
)

EMULATORS = Path(__file__).resolve().parents[5] / "lab/src/llmfleet_lab/assets/image/emulators"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4: ACTIVE", {"code": 4, "name": "ACTIVE"}),
        ("1: DOWN", {"code": 1, "name": "DOWN"}),
        ("5: LinkUp", {"code": 5, "name": "LinkUp"}),
        ("3: Disabled", {"code": 3, "name": "Disabled"}),
        ("  2:  INIT  ", {"code": 2, "name": "INIT"}),
        ("weird", {"code": None, "name": "weird"}),
        (None, None),
    ],
)
def test_parse_state(text: str | None, expected: dict | None) -> None:
    assert rs.parse_state(text) == expected


def test_collation_is_ls_order() -> None:
    names = ["roceP2p1s0f1", "rocep1s0f1", "roceP2p1s0f0", "rocep1s0f0"]
    assert sorted(names, key=rs.collation_key) == [
        "rocep1s0f0",
        "rocep1s0f1",
        "roceP2p1s0f0",
        "roceP2p1s0f1",
    ]


# ---------------------------------------------------------------------------
# reading the fixture Spark
# ---------------------------------------------------------------------------
def test_lists_devices_in_pci_order(spark: SparkSysfs) -> None:
    assert rs.list_devices(str(spark.root)) == [
        "rocep1s0f0",
        "rocep1s0f1",
        "roceP2p1s0f0",
        "roceP2p1s0f1",
    ]


def test_no_infiniband_class_means_no_devices(tmp_path: Path) -> None:
    (tmp_path / "class" / "net").mkdir(parents=True)
    assert rs.list_devices(str(tmp_path)) == []


def test_missing_sysfs_root_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(rs.RdmaSysfsError) as info:
        rs.list_devices(str(missing))
    assert info.value.path == str(missing)
    assert str(missing) in str(info.value)


@pytest.mark.parametrize(
    ("device", "netdevs"),
    [
        ("rocep1s0f0", ["enp1s0f0np0"]),
        ("roceP2p1s0f0", ["enP2p1s0f0np0"]),
        ("rocep1s0f1", ["enp1s0f1np1"]),
        ("roceP2p1s0f1", ["enP2p1s0f1np1"]),
    ],
)
def test_device_netdevs(spark: SparkSysfs, device: str, netdevs: list[str]) -> None:
    assert rs.device_netdevs(str(spark.root), device) == netdevs
    assert rs.devices_for_netdevs(str(spark.root), netdevs) == {netdevs[0]: device}


def test_devices_for_unknown_netdev_is_none(spark: SparkSysfs) -> None:
    assert rs.devices_for_netdevs(str(spark.root), ["enP7s7"]) == {"enP7s7": None}


def test_missing_device_names_path_and_present_devices(spark: SparkSysfs) -> None:
    with pytest.raises(rs.RdmaSysfsError) as info:
        rs.device_ports(str(spark.root), "mlx5_0")
    error = info.value
    assert error.path == str(spark.ib / "mlx5_0")
    assert error.available == ["rocep1s0f0", "rocep1s0f1", "roceP2p1s0f0", "roceP2p1s0f1"]
    assert "mlx5_0" in str(error)
    assert str(spark.ib / "mlx5_0") in str(error)
    assert "rocep1s0f1, roceP2p1s0f0" in str(error)


def test_missing_port_names_present_ports(spark: SparkSysfs) -> None:
    with pytest.raises(rs.RdmaSysfsError) as info:
        rs.port_attributes(str(spark.root), "rocep1s0f1", 2)
    assert info.value.available == [1]
    assert "port 2" in str(info.value)
    assert "present ports: 1" in str(info.value)


def test_port_attributes(spark: SparkSysfs) -> None:
    assert rs.port_attributes(str(spark.root), "rocep1s0f1", 1) == {
        "state": {"code": 4, "name": "ACTIVE"},
        "phys_state": {"code": 5, "name": "LinkUp"},
        "link_layer": "Ethernet",
        "rate": "200 Gb/sec (4X HDR)",
    }
    down = rs.port_attributes(str(spark.root), "roceP2p1s0f0", 1)
    assert down["state"] == {"code": 1, "name": "DOWN"}
    assert down["phys_state"] == {"code": 3, "name": "Disabled"}


def test_gid_table_reads_every_slot_and_treats_einval_as_empty(spark: SparkSysfs) -> None:
    table = rs.read_gid_table(str(spark.root), "rocep1s0f1", 1)
    assert [e["index"] for e in table] == list(range(16))
    assert table[3] == {
        "index": 3,
        "gid": V4_100_10,
        "gid_compressed": "::ffff:192.168.100.10",
        "type": "RoCE v2",
        "ndev": "enp1s0f1np1",
        "ipv4": "192.168.100.10",
    }
    # slots 4..15: types/ndevs are directories here, i.e. unreadable like EINVAL
    assert (spark.port_dir("rocep1s0f1") / "gid_attrs" / "types" / "7").is_dir()
    assert table[7]["type"] is None
    assert table[7]["ndev"] is None
    assert [e["index"] for e in _rdma_gids.populated_gids(table)] == [0, 1, 2, 3]


def test_gid_table_ignores_temporary_files(spark: SparkSysfs) -> None:
    (spark.port_dir("rocep1s0f1") / "gids" / ".3.tmp").write_text("junk\n")
    table = rs.read_gid_table(str(spark.root), "rocep1s0f1", 1)
    assert len(table) == 16


def test_read_attr_survives_an_oserror(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    target = tmp_path / "types_0"
    target.write_text("RoCE v2\n")

    def einval(*_args: object, **_kwargs: object) -> None:
        raise OSError(22, "Invalid argument")

    monkeypatch.setattr("builtins.open", einval)
    assert rs.read_attr(str(target)) is None


@pytest.mark.parametrize(
    ("device", "index", "gid", "ipv4"),
    [
        ("rocep1s0f1", 3, V4_100_10, "192.168.100.10"),
        ("roceP2p1s0f1", 1, "0000:0000:0000:0000:0000:ffff:c0a8:650a", "192.168.101.10"),
        ("rocep1s0f0", 5, V6_GLOBAL, None),
        ("roceP2p1s0f0", None, None, None),
    ],
)
def test_detected_roce_v2_gid_per_device(
    spark: SparkSysfs, device: str, index: int | None, gid: str | None, ipv4: str | None
) -> None:
    port = rs.device_summary(str(spark.root), device)["ports"]["1"]
    assert port["roce_v2_gid_index"] == index
    assert port["roce_v2_gid"] == gid
    assert port["roce_v2_ipv4"] == ipv4


def test_gid_index_follows_the_table_not_a_pin(spark: SparkSysfs) -> None:
    """After a reboot the address lands elsewhere: the detected index moves with it."""
    pdir = spark.port_dir("rocep1s0f1")
    for index in (2, 3):
        (pdir / "gids" / str(index)).write_text(ZERO_GID + "\n")
        (pdir / "gid_attrs" / "types" / str(index)).write_text("")
    for index, gtype in ((6, V1), (7, V2)):
        (pdir / "gids" / str(index)).write_text(V4_100_10 + "\n")
        types = pdir / "gid_attrs" / "types" / str(index)
        types.rmdir()
        types.write_text(gtype + "\n")
        ndevs = pdir / "gid_attrs" / "ndevs" / str(index)
        ndevs.rmdir()
        ndevs.write_text("enp1s0f1np1\n")
    port = rs.device_summary(str(spark.root), "rocep1s0f1")["ports"]["1"]
    assert port["roce_v2_gid_index"] == 7
    assert [g["index"] for g in port["gids"]] == [0, 1, 6, 7]


def test_device_summary_shape(spark: SparkSysfs) -> None:
    summary = rs.device_summary(str(spark.root), "rocep1s0f1")
    assert summary["netdevs"] == ["enp1s0f1np1"]
    assert summary["node_guid"] == "4cbb:4703:002d:1a17"
    assert summary["fw_ver"] == "28.45.4028"
    assert summary["hca_type"] == "MT4129"
    assert summary["board_id"] == "NVD0000000087"
    assert list(summary["ports"]) == ["1"]
    assert set(summary["ports"]["1"]) == {
        "state",
        "phys_state",
        "link_layer",
        "rate",
        "roce_v2_gid_index",
        "roce_v2_gid",
        "roce_v2_ipv4",
        "gids",
    }


# ---------------------------------------------------------------------------
# the lab's emulator publishes a tree these readers understand
# ---------------------------------------------------------------------------
@pytest.mark.skipif(
    not EMULATORS.is_dir(),
    reason="the lab's emulators are in the checkout's src/, not in the collection copy "
    "that ansible-test units runs",
)
def test_reads_the_lab_emulators_tree(tmp_path: Path) -> None:
    """Run llmfleet-lab-rdmad --once on a fake node; read what it published."""
    net = tmp_path / "net"
    sysfs = tmp_path / "sysfs"
    macs = {"enp1s0f1np1": "4c:bb:47:2d:1a:17", "enP2p1s0f1np1": "4c:bb:47:2d:1a:1b"}
    for name, mac in macs.items():
        base = net / name
        (base / "statistics").mkdir(parents=True)
        for key, value in (
            ("address", mac),
            ("mtu", "9000"),
            ("operstate", "up"),
            ("flags", "0x1003"),
            ("carrier", "1"),
        ):
            (base / key).write_text(value + "\n")
        for key in ("tx_bytes", "rx_bytes", "tx_packets", "rx_packets"):
            (base / "statistics" / key).write_text("0\n")
    (net / "enp1s0f1np1" / "statistics" / "tx_bytes").write_text("4000000\n")
    addrs = [
        {
            "ifname": "enp1s0f1np1",
            "addr_info": [
                {"family": "inet6", "local": "2001:db8::10", "prefixlen": 64},
                {"family": "inet", "local": "192.168.100.10", "prefixlen": 24},
            ],
        },
        {
            "ifname": "enP2p1s0f1np1",
            "addr_info": [{"family": "inet", "local": "192.168.101.10", "prefixlen": 24}],
        },
    ]
    (tmp_path / "addrs.json").write_text(json.dumps(addrs))
    hw = json.loads((EMULATORS / "hardware.json").read_text())
    hw["sysfs_root"] = str(sysfs)
    hw["settings_file"] = str(tmp_path / "settings.json")
    (tmp_path / "hardware.json").write_text(json.dumps(hw))
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONDONTWRITEBYTECODE": "1",
        "LLMFLEET_LAB_HARDWARE": str(tmp_path / "hardware.json"),
        "LLMFLEET_LAB_NET_ROOT": str(net),
        "LLMFLEET_LAB_ADDRS_JSON": str(tmp_path / "addrs.json"),
    }
    proc = subprocess.run(
        [sys.executable, str(EMULATORS / "llmfleet-lab-rdmad"), "--once"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr

    root = str(sysfs)
    assert rs.list_devices(root) == ["rocep1s0f1", "roceP2p1s0f1"]
    port = rs.device_summary(root, "rocep1s0f1")["ports"]["1"]
    assert port["state"] == {"code": 4, "name": "ACTIVE"}
    # the emulator adds IPv4 before IPv6: default 0/1, 192.168.100.10 2/3, 2001:db8::10 4/5
    assert port["roce_v2_gid_index"] == 3
    assert port["roce_v2_ipv4"] == "192.168.100.10"
    assert [g["index"] for g in port["gids"]] == [0, 1, 2, 3, 4, 5]
    other = rs.device_summary(root, "roceP2p1s0f1")["ports"]["1"]
    assert other["roce_v2_ipv4"] == "192.168.101.10"
    values, unreadable = _rdma_counters.read_counters(root, "rocep1s0f1", 1)
    assert unreadable == []
    assert _rdma_counters.counters_in_bytes(values)["port_xmit_data"] == 4_000_000
