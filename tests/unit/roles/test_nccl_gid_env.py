"""roles/nccl_env/files/llmfleet-nccl-gid-env: the RoCE v2 GID index is read from the RDMA
devices at every start (the rule of _rdma/gids.py, run by /bin/sh against a sysfs tree), a pinned
index is kept, and a table without a RoCE v2 GID leaves NCCL to pick."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._rdma.sysfs import port_summary

from tests.unit.plugins.conftest import (
    LL_P1S0F1,
    V1,
    V2,
    V4_100_10,
    V6_GLOBAL,
    ZERO_GID,
    SparkSysfs,
    atomic_write,
    build_spark,
)

SCRIPT = Path(__file__).resolve().parents[3] / "roles/nccl_env/files/llmfleet-nccl-gid-env"
SH = shutil.which("sh") or "/bin/sh"
V4_100_99 = "0000:0000:0000:0000:0000:ffff:c0a8:6463"  # 192.168.100.99


@pytest.fixture
def spark(tmp_path: Path) -> SparkSysfs:
    return build_spark(tmp_path / "sys")


def run(
    spark: SparkSysfs, *command: str, hca: str | None = "=rocep1s0f1:1", **env: str
) -> subprocess.CompletedProcess[str]:
    environ = {
        "PATH": os.environ["PATH"],
        "LLMFLEET_SYSFS_ROOT": str(spark.root),
        "LLMFLEET_NCCL_GID_WAIT": "0",
        **env,
    }
    if hca is not None:
        environ["NCCL_IB_HCA"] = hca
    return subprocess.run(
        [SH, str(SCRIPT), *command],
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def printed(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def child_index(proc: subprocess.CompletedProcess[str]) -> str:
    """What the command the script execs sees (``sh -c 'echo ${NCCL_IB_GID_INDEX-unset}'``)."""
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


SHOW = ("sh", "-c", 'echo "${NCCL_IB_GID_INDEX-unset}"')


def write_table(spark: SparkSysfs, device: str, gids: dict[int, tuple[str, str, str]]) -> None:
    """Rewrite the port's GID table as a boot with another order of addresses leaves it."""
    pdir = spark.port_dir(device)
    for index in range(16):
        gid, gtype, ndev = gids.get(index, (ZERO_GID, "", ""))
        atomic_write(pdir / "gids" / str(index), gid + "\n")
        for sub, value in (("types", gtype), ("ndevs", ndev)):
            path = pdir / "gid_attrs" / sub / str(index)
            if path.is_dir():
                path.rmdir()
            atomic_write(path, value + "\n" if value else "")


@pytest.mark.parametrize("device", ["rocep1s0f1", "roceP2p1s0f1", "rocep1s0f0", "roceP2p1s0f0"])
def test_the_script_picks_what_the_collections_rule_picks(spark: SparkSysfs, device: str) -> None:
    netdevs = [p.name for p in (spark.ib / device / "device" / "net").iterdir()]
    expected = port_summary(str(spark.root), device, 1, netdevs)["roce_v2_gid_index"]
    output = printed(run(spark, hca=f"={device}:1"))
    assert output == ("" if expected is None else f"NCCL_IB_GID_INDEX={expected}")
    # The fixture's tables: IPv4 at 3, IPv4 at 1 before the default GID, IPv6 only, none.
    assert expected == {"rocep1s0f1": 3, "roceP2p1s0f1": 1, "rocep1s0f0": 5}.get(device)


def test_the_index_follows_the_table_from_one_start_to_the_next(spark: SparkSysfs) -> None:
    assert child_index(run(spark, *SHOW)) == "3"
    # Next boot: an address came up before the fabric address and took slots 2/3.
    write_table(
        spark,
        "rocep1s0f1",
        {
            0: (LL_P1S0F1, V1, "enp1s0f1np1"),
            1: (LL_P1S0F1, V2, "enp1s0f1np1"),
            2: (V4_100_99, V1, "enp1s0f1np1"),
            3: (V6_GLOBAL, V2, "enp1s0f1np1"),
            4: (V4_100_10, V1, "enp1s0f1np1"),
            5: (V4_100_10, V2, "enp1s0f1np1"),
        },
    )
    proc = run(spark, *SHOW)
    assert child_index(proc) == "5"
    assert "NCCL_IB_GID_INDEX=5: rocep1s0f1:1=5(" + V4_100_10 + ")" in proc.stderr


def test_a_stale_index_in_the_environment_is_never_what_decides(spark: SparkSysfs) -> None:
    """The unit's file and the container's environment carry no index under auto: the one
    the command gets is the table's, whatever ran before."""
    env = {"NCCL_DEBUG": "INFO"}
    assert child_index(run(spark, *SHOW, **env)) == "3"


def test_a_pinned_index_is_kept(spark: SparkSysfs) -> None:
    proc = run(spark, *SHOW, NCCL_IB_GID_INDEX="7")
    assert child_index(proc) == "7"
    assert "NCCL_IB_GID_INDEX=7 (pinned)" in proc.stderr


def test_an_entry_of_another_netdev_is_not_this_devices(spark: SparkSysfs) -> None:
    write_table(
        spark,
        "rocep1s0f1",
        {
            1: (LL_P1S0F1, V2, "enp1s0f1np1"),
            2: (V4_100_99, V2, "docker0"),
            4: (V4_100_10, V2, "enp1s0f1np1"),
        },
    )
    assert printed(run(spark)) == "NCCL_IB_GID_INDEX=4"


def test_without_a_roce_v2_gid_the_command_starts_and_nccl_picks(spark: SparkSysfs) -> None:
    write_table(spark, "rocep1s0f1", {0: (LL_P1S0F1, V1, "enp1s0f1np1")})
    proc = run(spark, *SHOW, NCCL_IB_GID_INDEX="")
    assert child_index(proc) == "unset"
    assert "no RoCE v2 GID on rocep1s0f1:1 after 0s" in proc.stderr
    assert "left unset (NCCL picks one itself)" in proc.stderr
    # A device that is not there at all: the same.
    missing = run(spark, *SHOW, hca="=mlx5_9:1")
    assert child_index(missing) == "unset"
    assert "no RoCE v2 GID on mlx5_9:1" in missing.stderr


def test_rails_whose_indexes_differ_leave_nccl_to_pick_each(spark: SparkSysfs) -> None:
    proc = run(spark, *SHOW, hca="=rocep1s0f1:1,roceP2p1s0f1:1")
    assert child_index(proc) == "unset"
    assert "different indexes" in proc.stderr
    write_table(
        spark,
        "roceP2p1s0f1",
        {3: ("0000:0000:0000:0000:0000:ffff:c0a8:650a", V2, "enP2p1s0f1np1")},
    )
    assert printed(run(spark, hca="=rocep1s0f1:1,roceP2p1s0f1:1")) == "NCCL_IB_GID_INDEX=3"


@pytest.mark.parametrize(
    "env", [{"hca": None}, {"hca": "^mlx5_0"}], ids=["socket transport", "exclusion list"]
)
def test_without_devices_to_read_the_script_only_starts_the_command(
    spark: SparkSysfs, env: dict[str, str | None]
) -> None:
    proc = run(spark, *SHOW, hca=env["hca"])
    assert child_index(proc) == "unset"
    assert proc.stderr == ""


def test_the_command_gets_its_arguments_and_exit_status_unchanged(spark: SparkSysfs) -> None:
    proc = run(spark, "sh", "-c", 'printf "%s|" "$@"; exit 3', "x", "a b", "--config", "")
    assert proc.returncode == 3
    assert proc.stdout == "a b|--config||"


def test_it_waits_for_the_fabric_address_at_boot(spark: SparkSysfs) -> None:
    """A container restarted at boot before the address is up sees the default GID only; the
    script waits (LLMFLEET_NCCL_GID_WAIT) for the IPv4 GID instead of pinning the link-local."""
    fabric = {
        0: (LL_P1S0F1, V1, "enp1s0f1np1"),
        1: (LL_P1S0F1, V2, "enp1s0f1np1"),
    }
    write_table(spark, "rocep1s0f1", fabric)
    assert printed(run(spark)) == "NCCL_IB_GID_INDEX=1"

    def address_comes_up() -> None:
        time.sleep(1.5)
        write_table(
            spark,
            "rocep1s0f1",
            {**fabric, 2: (V4_100_10, V1, "enp1s0f1np1"), 3: (V4_100_10, V2, "enp1s0f1np1")},
        )

    writer = threading.Thread(target=address_comes_up)
    writer.start()
    try:
        proc = run(spark, *SHOW, LLMFLEET_NCCL_GID_WAIT="20")
    finally:
        writer.join()
    assert child_index(proc) == "3"
