"""Unit tests of the lab's CX7/RDMA emulators (lab/src/llmfleet_lab/assets/image/emulators).

Each test builds a fake node in tmp_path: a net root shaped like /sys/class/net
(operstate, mtu, address, flags, carrier, statistics/*), an ``ip -j addr``-shaped
addresses file, and a hardware.json whose sysfs_root and settings_file point
into tmp_path. The emulators run as subprocesses with sys.executable and the
LLMFLEET_LAB_* overrides, exactly as the node's python3 runs them.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._memory import meminfo as _meminfo
from ansible_collections.llmfleet.cluster.plugins.module_utils._memory import (
    nvidia_query as _nvidia_query,
)

from .file_modules import load_file

EMU = Path(__file__).resolve().parents[3] / "lab/src/llmfleet_lab/assets/image/emulators"

MACS = {
    "enp1s0f0np0": "4c:bb:47:2d:1a:16",
    "enp1s0f1np1": "4c:bb:47:2d:1a:17",
    "enP2p1s0f0np0": "4c:bb:47:2d:1a:1a",
    "enP2p1s0f1np1": "4c:bb:47:2d:1a:1b",
}


def load_hw_module() -> ModuleType:
    return load_file("llmfleet_lab_hw", EMU / "llmfleet_lab_hw.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class FakeNode:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.net = root / "net"
        self.net.mkdir()
        self.sysfs = root / "sysfs"
        self.ib = self.sysfs / "class" / "infiniband"
        self.addrs_file = root / "addrs.json"
        self.addrs: dict[str, list[str]] = {}
        self.settings_file = root / "settings.json"
        hw = json.loads((EMU / "hardware.json").read_text())
        hw["sysfs_root"] = str(self.sysfs)
        hw["settings_file"] = str(self.settings_file)
        self.hw_file = root / "hardware.json"
        self.hw_file.write_text(json.dumps(hw))
        self.settings_file.write_text((EMU / "settings.default.json").read_text())
        self.write_addrs()
        self.fake_ethtool = root / "no-real-ethtool"

    # -- fake state ---------------------------------------------------------
    def netdev(self, name: str, *, state: str = "up", mtu: int = 9000, **stats: int) -> None:
        base = self.net / name
        (base / "statistics").mkdir(parents=True, exist_ok=True)
        (base / "address").write_text(MACS.get(name, "02:00:00:00:00:01") + "\n")
        (base / "mtu").write_text(f"{mtu}\n")
        self.set_state(name, state)
        for key in ("tx_bytes", "rx_bytes", "tx_packets", "rx_packets"):
            (base / "statistics" / key).write_text(f"{stats.get(key, 0)}\n")

    def set_state(self, name: str, state: str) -> None:
        """up, lowerlayerdown (peer down, admin up) or down (admin down)."""
        base = self.net / name
        (base / "operstate").write_text(state + "\n")
        (base / "flags").write_text("0x1002\n" if state == "down" else "0x1003\n")
        (base / "carrier").write_text("1\n" if state == "up" else "0\n")

    def set_stat(self, name: str, key: str, value: int) -> None:
        (self.net / name / "statistics" / key).write_text(f"{value}\n")

    def remove_netdev(self, name: str) -> None:
        base = self.net / name
        for path in sorted(base.rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
        base.rmdir()

    def set_addrs(self, name: str, addrs: list[str]) -> None:
        self.addrs[name] = addrs
        self.write_addrs()

    def write_addrs(self) -> None:
        data = []
        for name, addrs in self.addrs.items():
            info = [
                {"family": "inet6" if ":" in a else "inet", "local": a, "prefixlen": 24}
                for a in addrs
            ]
            data.append({"ifname": name, "addr_info": info})
        self.addrs_file.write_text(json.dumps(data))

    def settings(self, **updates: Any) -> None:
        data = json.loads(self.settings_file.read_text())
        data.update(updates)
        self.settings_file.write_text(json.dumps(data))

    # -- running tools ------------------------------------------------------
    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            LLMFLEET_LAB_HARDWARE=str(self.hw_file),
            LLMFLEET_LAB_NET_ROOT=str(self.net),
            LLMFLEET_LAB_ADDRS_JSON=str(self.addrs_file),
            LLMFLEET_LAB_REAL_ETHTOOL=str(self.fake_ethtool),
            PYTHONDONTWRITEBYTECODE="1",
        )
        env.pop("LLMFLEET_LAB_SETTINGS", None)
        return env

    def cmd(self, tool: str, *args: str) -> list[str]:
        return [sys.executable, str(EMU / tool), *args]

    def run(self, tool: str, *args: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.cmd(tool, *args),
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def daemon_once(self) -> None:
        proc = self.run("llmfleet-lab-rdmad", "--once")
        assert proc.returncode == 0, proc.stderr

    def port_file(self, dev: str, rel: str) -> str:
        return (self.ib / dev / "ports" / "1" / rel).read_text()


@pytest.fixture
def node(tmp_path: Path) -> FakeNode:
    n = FakeNode(tmp_path)
    n.netdev("enp1s0f1np1", tx_bytes=4_000_003, rx_bytes=1_000_001, tx_packets=700, rx_packets=300)
    n.netdev("enP2p1s0f1np1", mtu=1500)
    n.set_addrs("enp1s0f1np1", ["10.0.0.1"])
    n.set_addrs("enP2p1s0f1np1", ["10.1.0.1"])
    return n


# --------------------------------------------------------------------------
# shared module
# --------------------------------------------------------------------------
def test_hw_module_helpers() -> None:
    hw = load_hw_module()
    assert hw.guid_from_mac("4c:bb:47:2d:1a:17") == "4cbb:4703:002d:1a17"
    assert hw.default_gid("4c:bb:47:2d:1a:17") == "fe80:0000:0000:0000:4ebb:47ff:fe2d:1a17"
    assert hw.gid_for_address("192.168.100.10") == "0000:0000:0000:0000:0000:ffff:c0a8:640a"
    assert hw.gid_inet_ntop("0000:0000:0000:0000:0000:ffff:c0a8:640a") == "::ffff:192.168.100.10"
    assert hw.ib_mtu_for(9000) == 4096
    assert hw.ib_mtu_for(4200) == 4096
    assert hw.ib_mtu_for(1500) == 1024
    assert hw.rate_string(200000) == "200 Gb/sec (4X HDR)"


def test_best_gid_index_follows_perftest() -> None:
    hw = load_hw_module()
    table = hw.GidTable(16)
    ll = "fe80:0000:0000:0000:4ebb:47ff:fe2d:1a17"
    v4 = hw.gid_for_address("10.0.0.1")
    table.slots[0] = hw.GidEntry(ll, hw.GID_TYPE_V1, "x")
    table.slots[1] = hw.GidEntry(ll, hw.GID_TYPE_V2, "x")
    table.slots[4] = hw.GidEntry(v4, hw.GID_TYPE_V1, "x")
    table.slots[5] = hw.GidEntry(v4, hw.GID_TYPE_V2, "x")
    assert hw.best_gid_index(table) == 5
    assert hw.best_gid_index(table, ipv6=True) == 1
    table.slots[5] = None
    assert hw.best_gid_index(table) == 4


# --------------------------------------------------------------------------
# llmfleet-lab-rdmad
# --------------------------------------------------------------------------
def test_daemon_publishes_kernel_layout(node: FakeNode) -> None:
    node.daemon_once()
    dev = node.ib / "rocep1s0f1"
    assert (dev / "node_type").read_text() == "1: CA\n"
    assert (dev / "node_guid").read_text() == "4cbb:4703:002d:1a17\n"
    assert (dev / "sys_image_guid").read_text() == "4cbb:4703:002d:1a17\n"
    assert (dev / "fw_ver").read_text() == "28.45.4028\n"
    assert (dev / "hca_type").read_text() == "MT4129\n"
    assert (dev / "board_id").read_text() == "NVD0000000087\n"
    link = dev / "device" / "net" / "enp1s0f1np1"
    assert link.is_symlink() and Path(os.readlink(link)) == node.net / "enp1s0f1np1"
    assert node.port_file("rocep1s0f1", "state") == "4: ACTIVE\n"
    assert node.port_file("rocep1s0f1", "phys_state") == "5: LinkUp\n"
    assert node.port_file("rocep1s0f1", "link_layer") == "Ethernet\n"
    assert node.port_file("rocep1s0f1", "rate") == "200 Gb/sec (4X HDR)\n"
    # IB counts 4-byte words
    assert node.port_file("rocep1s0f1", "counters/port_xmit_data") == "1000000\n"
    assert node.port_file("rocep1s0f1", "counters/port_rcv_data") == "250000\n"
    assert node.port_file("rocep1s0f1", "counters/port_xmit_packets") == "700\n"
    assert node.port_file("rocep1s0f1", "counters/port_rcv_packets") == "300\n"
    assert node.port_file("rocep1s0f1", "counters/port_xmit_discards") == "0\n"
    # devices whose netdev does not exist are absent
    assert sorted(p.name for p in node.ib.iterdir()) == ["roceP2p1s0f1", "rocep1s0f1"]
    assert not list(node.ib.rglob(".*"))  # no temp files left behind


def test_frozen_counters_hold_while_traffic_crosses_the_link(node: FakeNode) -> None:
    """rdma_counters_frozen.<dev>=true: the link carries bytes, the RDMA counters stay (as
    with NCCL's socket fallback); unfreezing catches up with the link."""
    node.daemon_once()
    node.settings(rdma_counters_frozen={"rocep1s0f1": True})
    node.set_stat("enp1s0f1np1", "tx_bytes", 40_000_000)
    node.daemon_once()
    assert node.port_file("rocep1s0f1", "counters/port_xmit_data") == "1000000\n"
    node.settings(rdma_counters_frozen={"rocep1s0f1": False})
    node.daemon_once()
    assert node.port_file("rocep1s0f1", "counters/port_xmit_data") == "10000000\n"


def test_daemon_follows_counters_state_and_removal(node: FakeNode) -> None:
    node.daemon_once()
    node.set_stat("enp1s0f1np1", "tx_bytes", 40_000_000)
    node.set_stat("enp1s0f1np1", "rx_packets", 12345)
    node.settings(link_speed_mbps={"enp1s0f1np1": 100000})
    node.daemon_once()
    assert node.port_file("rocep1s0f1", "counters/port_xmit_data") == "10000000\n"
    assert node.port_file("rocep1s0f1", "counters/port_rcv_packets") == "12345\n"
    assert node.port_file("rocep1s0f1", "rate") == "100 Gb/sec (4X EDR)\n"

    node.set_state("enp1s0f1np1", "lowerlayerdown")
    node.daemon_once()
    assert node.port_file("rocep1s0f1", "state") == "1: DOWN\n"
    assert node.port_file("rocep1s0f1", "phys_state") == "3: Disabled\n"

    mtime = (node.ib / "rocep1s0f1" / "ports/1/state").stat().st_mtime_ns
    time.sleep(0.02)
    node.daemon_once()  # unchanged content is not rewritten
    assert (node.ib / "rocep1s0f1" / "ports/1/state").stat().st_mtime_ns == mtime

    node.remove_netdev("enp1s0f1np1")
    node.daemon_once()
    assert not (node.ib / "rocep1s0f1").exists()
    assert (node.ib / "roceP2p1s0f1").is_dir()


def gid_rows(node: FakeNode, dev: str) -> list[tuple[str, str, str]]:
    return [
        (
            node.port_file(dev, f"gids/{i}").strip(),
            node.port_file(dev, f"gid_attrs/types/{i}").strip(),
            node.port_file(dev, f"gid_attrs/ndevs/{i}").strip(),
        )
        for i in range(16)
    ]


def test_gid_table_slots_are_stable(node: FakeNode) -> None:
    hw = load_hw_module()
    zero = "0000:0000:0000:0000:0000:0000:0000:0000"
    g1, g2, g3 = (hw.gid_for_address(a) for a in ("10.0.0.1", "10.0.0.2", "10.0.0.3"))
    ll = "fe80:0000:0000:0000:4ebb:47ff:fe2d:1a17"

    node.daemon_once()
    rows = gid_rows(node, "rocep1s0f1")
    assert rows[0] == (ll, "IB/RoCE v1", "enp1s0f1np1")
    assert rows[1] == (ll, "RoCE v2", "enp1s0f1np1")
    assert rows[2] == (g1, "IB/RoCE v1", "enp1s0f1np1")
    assert rows[3] == (g1, "RoCE v2", "enp1s0f1np1")
    assert rows[4] == (zero, "", "")

    node.set_addrs("enp1s0f1np1", ["10.0.0.1", "10.0.0.2"])
    node.daemon_once()
    assert [r[0] for r in gid_rows(node, "rocep1s0f1")[2:6]] == [g1, g1, g2, g2]

    # 10.0.0.1 goes away, 10.0.0.3 arrives: it takes the freed slots 2/3,
    # 10.0.0.2 keeps 4/5.
    node.set_addrs("enp1s0f1np1", ["10.0.0.2", "10.0.0.3"])
    node.daemon_once()
    rows = gid_rows(node, "rocep1s0f1")
    assert [r[0] for r in rows[2:6]] == [g3, g3, g2, g2]
    assert rows[5][1] == "RoCE v2"

    # The same addresses seen afresh (a "reboot") land in list order instead.
    for path in sorted((node.sysfs).rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() and not path.is_symlink() else path.unlink()
    node.daemon_once()
    assert [r[0] for r in gid_rows(node, "rocep1s0f1")[2:6]] == [g2, g2, g3, g3]

    # An administratively down netdev has no GIDs at all.
    node.set_state("enp1s0f1np1", "down")
    node.daemon_once()
    assert all(r == (zero, "", "") for r in gid_rows(node, "rocep1s0f1"))


# --------------------------------------------------------------------------
# ibdev2netdev, ethtool, ibv_devinfo
# --------------------------------------------------------------------------
def test_ibdev2netdev(node: FakeNode) -> None:
    node.netdev("enp1s0f0np0", state="lowerlayerdown")
    proc = node.run("ibdev2netdev")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "rocep1s0f0 port 1 ==> enp1s0f0np0 (Down)",
        "rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)",
        "roceP2p1s0f1 port 1 ==> enP2p1s0f1np1 (Up)",
    ]
    verbose = node.run("ibdev2netdev", "-v").stdout.splitlines()
    assert verbose[1] == (
        "0000:01:00.1 rocep1s0f1 (MT4129 - NVD0000000087) NVIDIA ConnectX-7 fw 28.45.4028"
        " port 1 (ACTIVE) ==> enp1s0f1np1 (Up)"
    )
    assert "(DOWN  ) ==> enp1s0f0np0 (Down)" in verbose[0]


def test_ethtool_settings_and_driver(node: FakeNode) -> None:
    up = node.run("ethtool", "enp1s0f1np1")
    assert up.returncode == 0, up.stderr
    lines = up.stdout.splitlines()
    assert lines[0] == "Settings for enp1s0f1np1:"
    assert "\t                        200000baseCR4/Full" in lines
    for want in (
        "\tSpeed: 200000Mb/s",
        "\tDuplex: Full",
        "\tAuto-negotiation: on",
        "\tPort: Direct Attach Copper",
        "\tPHYAD: 0",
        "\tTransceiver: internal",
        "\tLink detected: yes",
    ):
        assert want in lines

    node.settings(link_speed_mbps={"enp1s0f1np1": 100000})
    assert "\tSpeed: 100000Mb/s" in node.run("ethtool", "enp1s0f1np1").stdout.splitlines()

    node.set_state("enp1s0f1np1", "lowerlayerdown")
    down = node.run("ethtool", "enp1s0f1np1").stdout.splitlines()
    assert "\tSpeed: Unknown!" in down
    assert "\tDuplex: Unknown! (255)" in down
    assert "\tLink detected: no" in down

    drv = node.run("ethtool", "-i", "enP2p1s0f1np1")
    assert drv.returncode == 0
    assert drv.stdout.splitlines()[0] == "driver: mlx5_core"
    assert "bus-info: 0002:01:00.1" in drv.stdout.splitlines()
    assert "firmware-version: 28.45.4028 (NVD0000000087)" in drv.stdout.splitlines()


def test_ethtool_hands_everything_else_to_the_real_tool(node: FakeNode) -> None:
    missing = node.run("ethtool", "eth0")
    assert missing.returncode != 0
    assert "no device matches name" in missing.stderr

    node.fake_ethtool.write_text('#!/bin/sh\necho "REAL $*"\n')
    node.fake_ethtool.chmod(0o755)
    assert node.run("ethtool", "eth0").stdout == "REAL eth0\n"
    assert node.run("ethtool", "-S", "enp1s0f1np1").stdout == "REAL -S enp1s0f1np1\n"
    # a CX7 netdev that does not exist on this node is not emulated either
    assert node.run("ethtool", "enp1s0f0np0").stdout == "REAL enp1s0f0np0\n"


def test_ibv_devinfo(node: FakeNode) -> None:
    proc = node.run("ibv_devinfo")
    assert proc.returncode == 0, proc.stderr
    blocks = [b for b in proc.stdout.split("\n\n") if b.strip()]
    assert [b.splitlines()[0] for b in blocks] == ["hca_id:\trocep1s0f1", "hca_id:\troceP2p1s0f1"]
    first = blocks[0].splitlines()
    assert "\tnode_guid:\t\t\t4cbb:4703:002d:1a17" in first
    assert "\tvendor_part_id:\t\t\t4129" in first
    assert "\t\t\tstate:\t\t\tPORT_ACTIVE (4)" in first
    assert "\t\t\tactive_mtu:\t\t4096 (5)" in first  # MTU 9000
    assert "\t\t\tactive_mtu:\t\t1024 (3)" in blocks[1].splitlines()  # MTU 1500

    node.daemon_once()
    verbose = node.run("ibv_devinfo", "-v", "-d", "rocep1s0f1").stdout.splitlines()
    assert "\t\t\tGID[  1]:\t\tfe80::4ebb:47ff:fe2d:1a17, RoCE v2" in verbose
    assert "\t\t\tGID[  2]:\t\t0000:0000:0000:0000:0000:ffff:0a00:0001, RoCE v1" in verbose
    assert "\t\t\tGID[  3]:\t\t::ffff:10.0.0.1, RoCE v2" in verbose

    bad = node.run("ibv_devinfo", "-d", "rocep9")
    assert bad.returncode != 0
    assert "IB device 'rocep9' wasn't found" in bad.stderr


# --------------------------------------------------------------------------
# ib_write_bw
# --------------------------------------------------------------------------
class Server:
    def __init__(self, node: FakeNode, *args: str) -> None:
        self.proc = subprocess.Popen(
            node.cmd("ib_write_bw", *args),
            env=node.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def wait_ready(self, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any("Waiting for client to connect" in line for line in self.lines):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise AssertionError(f"server not ready: {self.lines}")

    def finish(self, timeout: float = 20) -> tuple[int, str, str]:
        try:
            rc = self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        self.reader.join(timeout=5)
        assert self.proc.stderr is not None
        return rc, "".join(self.lines), self.proc.stderr.read()


def report_fields(output: str) -> list[str]:
    lines = output.splitlines()
    idx = next(i for i, line in enumerate(lines) if line.startswith(" #bytes"))
    return lines[idx + 1].split()


@pytest.fixture
def pair(node: FakeNode) -> FakeNode:
    # both devices' RoCE addresses are loopback aliases, so the stream stays local
    node.set_addrs("enp1s0f1np1", ["127.0.0.2"])
    node.set_addrs("enP2p1s0f1np1", ["127.0.0.3"])
    node.settings(ib_write_bw_wire_mbytes_per_s=100)
    return node


def test_ib_write_bw_pair_reports_the_slower_device(pair: FakeNode) -> None:
    port = str(free_port())
    server = Server(pair, "-d", "rocep1s0f1", "-p", port, "-D", "1", "--report_gbits", "-F")
    server.wait_ready()
    start = time.monotonic()
    client = pair.run(
        "ib_write_bw",
        "-d",
        "roceP2p1s0f1",
        "-p",
        port,
        "-D",
        "1",
        "--report_gbits",
        "-F",
        "127.0.0.1",
    )
    elapsed = time.monotonic() - start
    rc, sout, serr = server.finish()
    assert client.returncode == 0, client.stderr
    assert rc == 0, serr
    assert elapsed >= 0.9  # the stream really ran for the duration

    cout = client.stdout
    assert " WARNING: BW peak won't be measured in this run." in cout
    for text in (cout, sout):
        assert "                    RDMA_Write BW Test\n" in text
        assert " Link type       : Ethernet\n" in text
        assert " GID index       : 3\n" in text
        assert " Data ex. method : Ethernet\n" in text
        assert (
            " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
            in text
        )
    assert " Dual-port       : OFF\t\tDevice         : roceP2p1s0f1\n" in cout
    assert " Dual-port       : OFF\t\tDevice         : rocep1s0f1\n" in sout
    assert " TX depth        : 128\n" in cout and "TX depth" not in sout
    assert " Mtu             : 1024[B]\n" in cout  # min of MTU 9000 and 1500 sides
    assert " GID: 00:00:00:00:00:00:00:00:00:00:255:255:127:00:00:03\n" in cout
    assert "* Waiting for client to connect... *" in sout

    size, iters, peak, avg, rate = report_fields(cout)
    assert report_fields(sout) == [size, iters, peak, avg, rate]
    assert (size, peak, avg) == ("65536", "0.00", "105.80")  # min(106.2, 105.8)
    assert int(iters) == int(105.8e9 / 8 / 65536)
    assert float(rate) == pytest.approx(int(iters) / 1e6, abs=1e-6)


def test_ib_write_bw_iterations_mode_rdma_cm_and_link_cap(pair: FakeNode) -> None:
    pair.settings(link_speed_mbps={"enp1s0f1np1": 100000})
    port = str(free_port())
    args = ("-p", port, "-R", "-q", "4", "-n", "1000")
    server = Server(pair, "-d", "rocep1s0f1", *args)
    server.wait_ready()
    client = pair.run("ib_write_bw", "-d", "roceP2p1s0f1", *args, "127.0.0.1")
    rc, sout, serr = server.finish()
    assert client.returncode == 0, client.stderr
    assert rc == 0, serr
    assert " rdma_cm QPs\t : ON\n Data ex. method : rdma_cm\n" in client.stdout
    assert " Waiting for client rdma_cm QP to connect\n" in sout
    assert client.stdout.count(" local address: LID 0000 QPN 0x") == 4
    assert "RKey" not in client.stdout  # the rdma_cm exchange carries no RDMA keys
    assert " BW peak[MB/sec]    BW average[MB/sec]" in client.stdout
    size, iters, peak, avg, _rate = report_fields(client.stdout)
    assert (size, iters) == ("65536", "4000")  # -n per QP
    assert float(avg) == pytest.approx(100e9 / 8 / 2**20, abs=0.01)  # capped at 100G link
    assert peak == avg


def test_ib_write_bw_failures(pair: FakeNode) -> None:
    unknown = pair.run("ib_write_bw", "-d", "rocep9")
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("IB device rocep9 not found\n")

    pair.netdev("enp1s0f0np0", state="lowerlayerdown")
    down = pair.run("ib_write_bw", "-d", "rocep1s0f0", "127.0.0.1")
    assert down.returncode == 1
    assert " Port number 1 state is Down\n" in down.stderr
    assert " Couldn't get context for the device\n" in down.stderr

    port = free_port()
    refused = pair.run("ib_write_bw", "-d", "rocep1s0f1", "-p", str(port), "127.0.0.1")
    assert refused.returncode == 1
    assert f"Couldn't connect to 127.0.0.1:{port}\n" in refused.stderr
    assert "Unable to init the socket connection" in refused.stderr

    cm = pair.run("ib_write_bw", "-d", "rocep1s0f1", "-R", "-p", str(port), "127.0.0.1")
    assert cm.returncode == 1
    assert cm.stderr.startswith("Unexpected CM event bl blka 8\n")

    bad_flag = pair.run("ib_write_bw", "--no-such-flag")
    assert bad_flag.returncode == 1
    assert " Invalid Command or flag." in bad_flag.stderr

    all_sizes = pair.run("ib_write_bw", "-a", "127.0.0.1")
    assert all_sizes.returncode == 1
    assert "not supported" in all_sizes.stderr


PROTO = "llmfleet-lab-perftest/1"


def test_ib_write_bw_client_unreachable_data_path(pair: FakeNode) -> None:
    """The server's RoCE address does not answer: a completion error at the client."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1)
    port = lsock.getsockname()[1]
    client = subprocess.Popen(
        pair.cmd("ib_write_bw", "-d", "roceP2p1s0f1", "-p", str(port), "127.0.0.1"),
        env=pair.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lsock.settimeout(10)
    conn, _ = lsock.accept()
    lsock.close()  # nothing listens any more where the data path leads
    with conn, conn.makefile("rw") as chan:
        hello = json.loads(chan.readline())
        assert hello["device"] == "roceP2p1s0f1" and hello["gid_index"] == 3
        reply = {
            "proto": PROTO,
            "role": "server",
            "device": "rocep1s0f1",
            "gbits": 100.0,
            "mtu": 4096,
            "gid": hello["gid"].replace(":0003", ":0002"),
            "gid_index": 3,
            "rdma_cm": False,
            "qps": hello["qps"],
            "token": "x",
        }
        chan.write(json.dumps(reply) + "\n")
        chan.flush()
        out, err = client.communicate(timeout=20)
    assert client.returncode == 1
    assert " Completion with error at client\n Failed status 12: wr_id 0 syndrom 0x81\n" in err
    assert " Failed to complete run_iter_bw function successfully\n" in err
    assert " GID: 00:00:00:00:00:00:00:00:00:00:255:255:127:00:00:02\n" in out


def test_ib_write_bw_server_sees_client_vanish(pair: FakeNode) -> None:
    port = free_port()
    server = Server(pair, "-d", "rocep1s0f1", "-p", str(port))
    server.wait_ready()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        chan = conn.makefile("rw")
        hello = {
            "proto": PROTO,
            "role": "client",
            "device": "roceP2p1s0f1",
            "gbits": 100.0,
            "mtu": 1024,
            "gid": None,
            "gid_index": 3,
            "rdma_cm": False,
            "qps": [{"qpn": 300, "psn": 1, "rkey": 2, "vaddr": 3}],
            "token": "t",
        }
        chan.write(json.dumps(hello) + "\n")
        chan.flush()
        assert json.loads(chan.readline())["device"] == "rocep1s0f1"
        chan.close()
    rc, sout, serr = server.finish()
    assert rc == 1
    remote = " remote address: LID 0000 QPN 0x012c PSN 0x0001 RKey 0x000002 VAddr 0x00000000000003"
    assert remote in sout  # printf's %#06x / %#016Lx forms
    assert serr.endswith(" Failed to exchange data between server and clients\n")


# --------------------------------------------------------------------------
# nvidia-smi (GB10)
def test_nvidia_smi_prints_a_gb10_with_memory_not_available(node: FakeNode) -> None:
    proc = node.run("nvidia-smi", *_nvidia_query.NVIDIA_SMI_ARGS)
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip()
    assert line.startswith("0, NVIDIA GB10, GPU-") and line.endswith("[N/A], [N/A], [N/A]")
    # The collection's parser reads it as a unified-memory GPU (no framebuffer numbers).
    rows = _nvidia_query.parse_nvidia_smi(proc.stdout)
    assert [(r["name"], r["total"], r["free"]) for r in rows] == [("NVIDIA GB10", None, None)]

    header = node.run("nvidia-smi", "--query-gpu=name,memory.total", "--format=csv").stdout
    assert header.splitlines() == ["name, memory.total [MiB]", "NVIDIA GB10, [N/A]"]
    assert node.run("nvidia-smi", "-L").stdout.startswith("GPU 0: NVIDIA GB10 (UUID: GPU-")


def test_nvidia_smi_refuses_an_unknown_field_like_the_real_tool(node: FakeNode) -> None:
    proc = node.run("nvidia-smi", "--query-gpu=index,bogus", "--format=csv")
    assert proc.returncode == 2
    assert 'Field "bogus" is not a valid field to query.' in proc.stdout


# --------------------------------------------------------------------------
# llmfleet-lab-memd (GB10 unified memory)
def _memd_once(node: FakeNode, cgroup: Path, gib: int) -> dict[str, int]:
    """The meminfo llmfleet-lab-memd publishes for a pool of ``gib`` over ``cgroup``."""
    node.settings(unified_memory_gib=gib)
    proc = subprocess.run(
        [*node.cmd("llmfleet-lab-memd", "--once")],
        env={**node.env, "LLMFLEET_LAB_CGROUP": str(cgroup)},
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    sysfs_root = Path(json.loads(node.hw_file.read_text())["sysfs_root"])
    return _meminfo.parse_meminfo((sysfs_root.parent / "meminfo").read_text())


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_memd_gives_the_node_a_pool_its_own_memory_use_takes_from(
    node: FakeNode, tmp_path: Path, version: str
) -> None:
    cgroup = tmp_path / "cgroup"
    gib = 1 << 30
    if version == "v1":
        (cgroup / "memory").mkdir(parents=True)
        (cgroup / "memory" / "memory.usage_in_bytes").write_text(f"{3 * gib}\n")
        (cgroup / "memory" / "memory.stat").write_text(
            f"cache 5\nrss 7\ntotal_cache {gib}\ntotal_shmem {gib // 4}\n"
        )
    else:
        cgroup.mkdir()
        (cgroup / "memory.current").write_text(f"{3 * gib}\n")
        (cgroup / "memory.stat").write_text(f"anon 7\nfile {gib}\nshmem {gib // 4}\n")
    meminfo = _memd_once(node, cgroup, gib=8)
    assert meminfo["MemTotal"] == 8 * gib
    assert meminfo["MemFree"] == 5 * gib  # what cudaMemGetInfo reports on a GB10
    assert meminfo["MemAvailable"] == 5 * gib + gib - gib // 4
    assert _meminfo.page_cache_bytes(meminfo) == gib - gib // 4


def test_memd_takes_what_the_node_uses_beyond_its_pool_from_its_page_cache(
    node: FakeNode, tmp_path: Path
) -> None:
    """A runaway allocation on a GB10 makes its kernel give the page cache back: the pool's
    MemAvailable falls to what is left, not to the node's page cache (this machine, with
    memory to spare, evicts nothing of the node's own); shared memory stays."""
    cgroup = tmp_path / "cgroup"
    gib = 1 << 30
    cgroup.mkdir()
    # Anonymous memory and 0.25 GiB of shmem take the pool's 99%, beside 2 GiB of page cache.
    one_percent = 8 * gib // 100 // 1024 * 1024  # in kB, as meminfo says it
    anon = 8 * gib - one_percent - gib // 4
    (cgroup / "memory.current").write_text(f"{anon + 2 * gib}\n")
    (cgroup / "memory.stat").write_text(f"anon {anon}\nfile {2 * gib}\nshmem {gib // 4}\n")
    meminfo = _memd_once(node, cgroup, gib=8)
    # The cache left: the pool less the anonymous memory; of it, shmem is not available.
    left = 8 * gib - anon
    assert meminfo["MemFree"] == 0
    assert meminfo["Cached"] == left
    assert meminfo["MemAvailable"] == left - gib // 4 == one_percent  # under the probe's 3%
