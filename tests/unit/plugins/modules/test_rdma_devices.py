"""modules/rdma_devices: facts about RDMA devices, in-process and through `ansible`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.modules import rdma_devices

from tests.unit.plugins.conftest import V4_100_10, SparkSysfs, ansible_adhoc

RunModule = Callable[..., tuple[int, dict[str, Any]]]
ALL = ["rocep1s0f0", "rocep1s0f1", "roceP2p1s0f0", "roceP2p1s0f1"]


def test_gathers_every_device(spark: SparkSysfs, run_module: RunModule) -> None:
    rc, result = run_module(rdma_devices, {"sysfs_root": str(spark.root)})
    assert rc == 0, result
    assert result["changed"] is False
    devices = result["devices"]
    assert list(devices) == ALL
    assert result["ansible_facts"]["rdma_devices"] == devices
    assert result["msg"] == f"Found 4 RDMA devices under {spark.ib}"
    dev = devices["rocep1s0f1"]
    assert dev["netdevs"] == ["enp1s0f1np1"]
    assert dev["node_guid"] == "4cbb:4703:002d:1a17"
    assert dev["fw_ver"] == "28.45.4028"
    assert dev["hca_type"] == "MT4129"
    assert dev["board_id"] == "NVD0000000087"
    port = dev["ports"]["1"]
    assert port["state"] == {"code": 4, "name": "ACTIVE"}
    assert port["phys_state"] == {"code": 5, "name": "LinkUp"}
    assert port["link_layer"] == "Ethernet"
    assert port["rate"] == "200 Gb/sec (4X HDR)"
    assert port["roce_v2_gid_index"] == 3
    assert port["roce_v2_gid"] == V4_100_10
    assert port["roce_v2_ipv4"] == "192.168.100.10"
    assert [g["index"] for g in port["gids"]] == [0, 1, 2, 3]
    assert devices["roceP2p1s0f1"]["ports"]["1"]["roce_v2_gid_index"] == 1
    assert devices["rocep1s0f0"]["ports"]["1"]["roce_v2_gid_index"] == 5
    down = devices["roceP2p1s0f0"]["ports"]["1"]
    assert down["state"]["name"] == "DOWN"
    assert down["roce_v2_gid_index"] is None
    assert down["gids"] == []


def test_check_mode_reports_the_same_and_no_change(
    spark: SparkSysfs, run_module: RunModule
) -> None:
    _rc, normal = run_module(rdma_devices, {"sysfs_root": str(spark.root)})
    rc, checked = run_module(
        rdma_devices, {"sysfs_root": str(spark.root), "_ansible_check_mode": True}
    )
    assert rc == 0
    assert checked["changed"] is False
    assert checked["devices"] == normal["devices"]


def test_device_filter(spark: SparkSysfs, run_module: RunModule) -> None:
    rc, result = run_module(
        rdma_devices, {"sysfs_root": str(spark.root), "devices": ["roceP2p1s0f1", "rocep1s0f1"]}
    )
    assert rc == 0, result
    assert list(result["devices"]) == ["rocep1s0f1", "roceP2p1s0f1"]
    assert "reporting 2" in result["msg"]


def test_unknown_device_fails_listing_present_ones(
    spark: SparkSysfs, run_module: RunModule
) -> None:
    rc, result = run_module(
        rdma_devices, {"sysfs_root": str(spark.root), "devices": ["rocep1s0f1", "mlx5_0"]}
    )
    assert rc == 1
    assert result["failed"] is True
    assert "mlx5_0" in result["msg"]
    assert "rocep1s0f0, rocep1s0f1, roceP2p1s0f0, roceP2p1s0f1" in result["msg"]
    assert result["available"] == ALL


def test_netdev_filter_selects_backing_devices(spark: SparkSysfs, run_module: RunModule) -> None:
    rc, result = run_module(
        rdma_devices,
        {"sysfs_root": str(spark.root), "netdevs": ["enP2p1s0f1np1", "enp1s0f1np1"]},
    )
    assert rc == 0, result
    assert list(result["devices"]) == ["rocep1s0f1", "roceP2p1s0f1"]


def test_devices_and_netdevs_are_a_union(spark: SparkSysfs, run_module: RunModule) -> None:
    rc, result = run_module(
        rdma_devices,
        {
            "sysfs_root": str(spark.root),
            "devices": ["rocep1s0f0"],
            "netdevs": ["enp1s0f1np1"],
        },
    )
    assert rc == 0, result
    assert list(result["devices"]) == ["rocep1s0f0", "rocep1s0f1"]


def test_unbacked_netdev_fails_naming_it(spark: SparkSysfs, run_module: RunModule) -> None:
    rc, result = run_module(
        rdma_devices, {"sysfs_root": str(spark.root), "netdevs": ["enP7s7", "enp1s0f1np1"]}
    )
    assert rc == 1
    assert "enP7s7" in result["msg"]
    assert "enp1s0f1np1 (rocep1s0f1)" in result["msg"]


def test_no_rdma_at_all_is_not_a_failure(tmp_path: Path, run_module: RunModule) -> None:
    (tmp_path / "class" / "net").mkdir(parents=True)
    rc, result = run_module(rdma_devices, {"sysfs_root": str(tmp_path)})
    assert rc == 0, result
    assert result["devices"] == {}
    assert result["ansible_facts"] == {"rdma_devices": {}}
    assert result["msg"] == f"No RDMA devices found under {tmp_path}/class/infiniband"


def test_no_rdma_but_a_device_was_asked_for_fails(tmp_path: Path, run_module: RunModule) -> None:
    (tmp_path / "class").mkdir()
    rc, result = run_module(rdma_devices, {"sysfs_root": str(tmp_path), "devices": ["rocep1s0f1"]})
    assert rc == 1
    assert "rocep1s0f1" in result["msg"]
    assert "present devices: none" in result["msg"]


def test_missing_sysfs_root_fails(tmp_path: Path, run_module: RunModule) -> None:
    rc, result = run_module(rdma_devices, {"sysfs_root": str(tmp_path / "absent")})
    assert rc == 1
    assert str(tmp_path / "absent") in result["msg"]


def test_sysfs_root_falls_back_to_the_environment(
    spark: SparkSysfs, run_module: RunModule, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLMFLEET_SYSFS_ROOT", str(spark.root))
    rc, result = run_module(rdma_devices, {})
    assert rc == 0, result
    assert result["sysfs_root"] == str(spark.root)
    assert list(result["devices"]) == ALL


def test_sysfs_root_defaults_to_sys(run_module: RunModule, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLMFLEET_SYSFS_ROOT", raising=False)
    rc, result = run_module(rdma_devices, {})
    # whatever RDMA hardware this machine has (usually none), the module read /sys
    assert rc == 0, result
    assert result["sysfs_root"] == "/sys"
    assert "/sys/class/infiniband" in result["msg"]


def test_end_to_end_with_ansible_and_env_fallback(spark: SparkSysfs) -> None:
    status, result = ansible_adhoc(
        "llmfleet.cluster.rdma_devices",
        "netdevs=enp1s0f1np1",
        env={"LLMFLEET_SYSFS_ROOT": str(spark.root)},
    )
    assert status == "SUCCESS", result
    assert result["changed"] is False
    facts = result["ansible_facts"]["rdma_devices"]
    assert list(facts) == ["rocep1s0f1"]
    port = facts["rocep1s0f1"]["ports"]["1"]
    assert port["roce_v2_gid_index"] == 3
    assert port["roce_v2_ipv4"] == "192.168.100.10"
    assert port["state"] == {"code": 4, "name": "ACTIVE"}
