"""Shared helpers for the llmfleet lab's ConnectX-7 / RDMA emulators.

Stdlib only: this module runs with a lab node's /usr/bin/python3 (Python 3.11).
It is installed to /usr/local/lib/llmfleet-lab/ and imported by the tools in
/usr/local/bin (ibdev2netdev, ethtool, ib_write_bw, ibv_devinfo,
llmfleet-lab-rdmad), which put that folder (and their own folder) on sys.path.

Everything an emulator prints is derived from real state of the node:

* the netdev's real operstate, MTU, MAC and byte/packet counters, read from
  ``/sys/class/net`` (``LLMFLEET_LAB_NET_ROOT`` overrides it for tests);
* the netdev's real addresses, from ``ip -j addr show dev X``
  (``LLMFLEET_LAB_ADDRS_JSON`` names a file of that shape for tests);
* static identity of the emulated hardware, from ``hardware.json``
  (``LLMFLEET_LAB_HARDWARE`` overrides its path);
* lab settings (bandwidth, link speed, ...) from the settings file the
  hardware description names (``LLMFLEET_LAB_SETTINGS`` overrides it).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HARDWARE_DEFAULT = "/usr/local/lib/llmfleet-lab/hardware.json"
NET_ROOT_DEFAULT = "/sys/class/net"
REAL_ETHTOOL_DEFAULT = "/usr/sbin/ethtool"

ENV_HARDWARE = "LLMFLEET_LAB_HARDWARE"
ENV_NET_ROOT = "LLMFLEET_LAB_NET_ROOT"
ENV_ADDRS_JSON = "LLMFLEET_LAB_ADDRS_JSON"
ENV_SETTINGS = "LLMFLEET_LAB_SETTINGS"
ENV_REAL_ETHTOOL = "LLMFLEET_LAB_REAL_ETHTOOL"

GID_TYPE_V1 = "IB/RoCE v1"
GID_TYPE_V2 = "RoCE v2"
ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"

# Built-in fallbacks; settings.default.json carries the same values.
DEFAULT_IB_WRITE_BW_GBITS = 106.0
DEFAULT_LINK_SPEED_MBPS = 200000
DEFAULT_WIRE_MBYTES_PER_S = 40.0

# The kernel's iboe_get_mtu(): the RoCE path MTU is the largest IB MTU that
# fits in the netdev MTU minus the RoCE headers (GRH 40 + UDP 8 + BTH 12 +
# XRC ext 4 + AtomicETH 28 + ICRC 4 = 96 bytes).
ROCE_HEADER_BYTES = 96
IB_MTUS = (256, 512, 1024, 2048, 4096)
IB_MTU_ENUM = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}

IFF_UP = 0x1


# --------------------------------------------------------------------------
# hardware description and settings
# --------------------------------------------------------------------------
def hardware_path() -> Path:
    return Path(os.environ.get(ENV_HARDWARE) or HARDWARE_DEFAULT)


def load_hardware() -> dict[str, Any]:
    """The static CX7 description (hardware.json), with defaults filled in."""
    with hardware_path().open(encoding="utf-8") as fh:
        hw: dict[str, Any] = json.load(fh)
    hw.setdefault("sysfs_root", "/run/llmfleet-lab/sysfs")
    hw.setdefault("settings_file", "/etc/llmfleet-lab/settings.json")
    hw.setdefault("hca_type", "MT4129")
    hw.setdefault("fw_ver", "28.45.4028")
    hw.setdefault("board_id", "NVD0000000087")
    hw.setdefault("vendor_id", "0x02c9")
    hw.setdefault("vendor_part_id", 4129)
    hw.setdefault("hw_ver", "0x0")
    hw.setdefault("pci_vendor", "0x15b3")
    hw.setdefault("pci_device", "0x1021")
    hw.setdefault("driver", "mlx5_core")
    hw.setdefault("description", "NVIDIA ConnectX-7")
    hw.setdefault("gid_table_len", 16)
    hw.setdefault("max_mtu", 4096)
    hw.setdefault("rdma_devices", [])
    return hw


def load_settings(hw: dict[str, Any]) -> dict[str, Any]:
    """The mutable lab settings; a missing or broken file means defaults."""
    path = Path(os.environ.get(ENV_SETTINGS) or hw.get("settings_file") or "")
    data: dict[str, Any] = {}
    if str(path):
        try:
            with path.open(encoding="utf-8") as fh:
                loaded = json.load(fh)
            if isinstance(loaded, dict):
                data = loaded
        except (OSError, ValueError):
            data = {}
    return data


def configured_gbits(settings: dict[str, Any], rdma_dev: str) -> float:
    table = settings.get("ib_write_bw_gbits") or {}
    try:
        return float(table.get(rdma_dev, DEFAULT_IB_WRITE_BW_GBITS))
    except (TypeError, ValueError):
        return DEFAULT_IB_WRITE_BW_GBITS


def link_speed_mbps(settings: dict[str, Any], netdev: str) -> int:
    table = settings.get("link_speed_mbps") or {}
    try:
        return int(table.get(netdev, DEFAULT_LINK_SPEED_MBPS))
    except (TypeError, ValueError):
        return DEFAULT_LINK_SPEED_MBPS


def wire_mbytes_per_s(settings: dict[str, Any]) -> float:
    try:
        value = float(settings.get("ib_write_bw_wire_mbytes_per_s", DEFAULT_WIRE_MBYTES_PER_S))
    except (TypeError, ValueError):
        value = DEFAULT_WIRE_MBYTES_PER_S
    return value if value > 0 else DEFAULT_WIRE_MBYTES_PER_S


def sysfs_root(hw: dict[str, Any]) -> Path:
    return Path(hw["sysfs_root"])


def ib_class_dir(hw: dict[str, Any]) -> Path:
    return sysfs_root(hw) / "class" / "infiniband"


# --------------------------------------------------------------------------
# real netdev state
# --------------------------------------------------------------------------
def net_root() -> Path:
    return Path(os.environ.get(ENV_NET_ROOT) or NET_ROOT_DEFAULT)


def net_root_is_real() -> bool:
    return not os.environ.get(ENV_NET_ROOT)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        # e.g. /sys/class/net/X/carrier answers EINVAL while the device is down
        return None


def _read_int(path: Path, default: int = 0) -> int:
    text = _read(path)
    if text is None:
        return default
    try:
        return int(text, 0)
    except ValueError:
        return default


@dataclass
class Netdev:
    name: str
    operstate: str
    mtu: int
    mac: str
    flags: int
    carrier: int | None
    stats: dict[str, int] = field(default_factory=dict)

    @property
    def admin_up(self) -> bool:
        return bool(self.flags & IFF_UP)

    @property
    def link_up(self) -> bool:
        """Link is up: what ethtool's "Link detected" and RoCE port state follow."""
        if self.operstate == "up":
            return True
        if self.operstate == "unknown":
            return self.admin_up and bool(self.carrier)
        return False

    def stat(self, key: str) -> int:
        return self.stats.get(key, 0)


STAT_KEYS = (
    "tx_bytes",
    "rx_bytes",
    "tx_packets",
    "rx_packets",
    "tx_dropped",
    "rx_dropped",
    "tx_errors",
    "rx_errors",
    "multicast",
)


def read_netdev(name: str) -> Netdev | None:
    """The netdev's real state, or None if the node has no such netdev."""
    base = net_root() / name
    if not base.is_dir():
        return None
    operstate = _read(base / "operstate") or "unknown"
    flags_text = _read(base / "flags")
    if flags_text is None:
        # a tree without a flags file: infer admin state from operstate
        flags = 0 if operstate == "down" else IFF_UP
    else:
        try:
            flags = int(flags_text, 16)
        except ValueError:
            flags = IFF_UP
    carrier_text = _read(base / "carrier")
    carrier: int | None
    try:
        carrier = int(carrier_text) if carrier_text is not None else None
    except ValueError:
        carrier = None
    stats = {key: _read_int(base / "statistics" / key) for key in STAT_KEYS}
    return Netdev(
        name=name,
        operstate=operstate,
        mtu=_read_int(base / "mtu", 1500),
        mac=(_read(base / "address") or "00:00:00:00:00:00").lower(),
        flags=flags,
        carrier=carrier,
        stats=stats,
    )


def netdev_addresses(name: str) -> list[dict[str, Any]]:
    """The netdev's addresses as ``ip -j addr`` lists them (its ``addr_info``)."""
    path = os.environ.get(ENV_ADDRS_JSON)
    data: Any
    if path:
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            return []
    else:
        try:
            proc = subprocess.run(
                ["ip", "-j", "addr", "show", "dev", name],
                capture_output=True,
                text=True,
                timeout=5,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return []
        if proc.returncode != 0 or not proc.stdout.strip():
            return []
        try:
            data = json.loads(proc.stdout)
        except ValueError:
            return []
    if isinstance(data, dict):
        data = [data]
    for iface in data if isinstance(data, list) else []:
        if isinstance(iface, dict) and iface.get("ifname") == name:
            return [a for a in iface.get("addr_info", []) if isinstance(a, dict)]
    return []


# --------------------------------------------------------------------------
# RDMA devices
# --------------------------------------------------------------------------
def all_devices(hw: dict[str, Any]) -> list[dict[str, Any]]:
    """All described devices in PCI address order (the kernel's probe order)."""
    return sorted(hw.get("rdma_devices", []), key=lambda d: str(d.get("pci", "")))


def present_devices(hw: dict[str, Any]) -> list[dict[str, Any]]:
    """Devices whose netdev exists on this node, in PCI address order.

    A device whose netdev is missing is absent, like an unbound driver.
    """
    return [d for d in all_devices(hw) if (net_root() / d["netdev"]).is_dir()]


def find_device(hw: dict[str, Any], name: str) -> dict[str, Any] | None:
    for dev in present_devices(hw):
        if dev["name"] == name:
            return dev
    return None


def find_device_by_netdev(hw: dict[str, Any], netdev: str) -> dict[str, Any] | None:
    for dev in all_devices(hw):
        if dev["netdev"] == netdev:
            return dev
    return None


def collation_key(name: str) -> tuple[str, str]:
    """Order names the way ``ls`` does in an en_US.UTF-8 locale.

    Case is ignored first (rocep1s0f1 before roceP2p1s0f0), as on a DGX Spark.
    """
    return (name.casefold(), name)


def mac_bytes(mac: str) -> list[int]:
    try:
        parts = [int(p, 16) for p in mac.split(":")]
    except ValueError:
        parts = []
    if len(parts) != 6:
        parts = [0] * 6
    return parts


def guid_from_mac(mac: str) -> str:
    """mlx5-style GUID: the MAC's OUI, then 03:00, then the MAC's low 3 bytes."""
    b = mac_bytes(mac)
    raw = [b[0], b[1], b[2], 0x03, 0x00, b[3], b[4], b[5]]
    return ":".join(f"{raw[i]:02x}{raw[i + 1]:02x}" for i in range(0, 8, 2))


def node_guid(dev: dict[str, Any], netdev: Netdev | None) -> str:
    if dev.get("node_guid"):
        return str(dev["node_guid"])
    return guid_from_mac(netdev.mac if netdev else "00:00:00:00:00:00")


def sys_image_guid(hw: dict[str, Any]) -> str:
    """All functions of the adapter share the first function's GUID."""
    if hw.get("sys_image_guid"):
        return str(hw["sys_image_guid"])
    for dev in present_devices(hw):
        nd = read_netdev(dev["netdev"])
        if nd is not None:
            return node_guid(dev, nd)
    return ZERO_GID[:19]


def ib_mtu_for(netdev_mtu: int) -> int:
    usable = netdev_mtu - ROCE_HEADER_BYTES
    best = IB_MTUS[0]
    for mtu in IB_MTUS:
        if mtu <= usable:
            best = mtu
    return best


def active_ib_mtu(netdev: Netdev | None, max_mtu: int = 4096) -> int:
    """The port's active_mtu; mlx5 reports 1024 while the port is down."""
    if netdev is None or not netdev.link_up:
        return 1024
    return min(ib_mtu_for(netdev.mtu), max_mtu)


# IB rate as the kernel's ports/N/rate file renders a RoCE link speed.
_RATES = {
    400000: "400 Gb/sec (4X NDR)",
    200000: "200 Gb/sec (4X HDR)",
    100000: "100 Gb/sec (4X EDR)",
    56000: "56 Gb/sec (4X FDR)",
    50000: "50 Gb/sec (1X HDR)",
    40000: "40 Gb/sec (4X QDR)",
    25000: "25 Gb/sec (1X EDR)",
    10000: "10 Gb/sec (1X QDR)",
    1000: "2.5 Gb/sec (1X SDR)",
}

# (active_width, active_speed) as ibv_devinfo -v prints them.
_WIDTH_SPEED = {
    400000: ("4X (2)", "100.0 Gbps (128)"),
    200000: ("4X (2)", "50.0 Gbps (64)"),
    100000: ("4X (2)", "25.0 Gbps (32)"),
    56000: ("4X (2)", "14.0 Gbps (16)"),
    50000: ("1X (1)", "50.0 Gbps (64)"),
    40000: ("4X (2)", "10.0 Gbps (4)"),
    25000: ("1X (1)", "25.0 Gbps (32)"),
    10000: ("1X (1)", "10.0 Gbps (4)"),
    1000: ("1X (1)", "2.5 Gbps (1)"),
}


def _nearest(table: dict[int, Any], mbps: int) -> Any:
    if mbps in table:
        return table[mbps]
    key = min(table, key=lambda k: abs(k - mbps))
    return table[key]


def rate_string(mbps: int) -> str:
    return str(_nearest(_RATES, mbps))


def width_speed(mbps: int) -> tuple[str, str]:
    value: tuple[str, str] = _nearest(_WIDTH_SPEED, mbps)
    return value


# --------------------------------------------------------------------------
# GIDs
# --------------------------------------------------------------------------
def gid_from_bytes(raw: bytes) -> str:
    """The kernel's full 8-group rendering of a GID (as in ports/N/gids/M)."""
    h = raw.hex()
    return ":".join(h[i : i + 4] for i in range(0, 32, 4))


def gid_bytes(gid: str) -> bytes:
    try:
        data = bytes.fromhex(gid.replace(":", ""))
    except ValueError:
        return bytes(16)
    return data if len(data) == 16 else bytes(16)


def gid_for_address(addr: str) -> str | None:
    try:
        ip = ipaddress.ip_address(addr.split("/", 1)[0].split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv4Address):
        return gid_from_bytes(bytes(10) + b"\xff\xff" + ip.packed)
    return gid_from_bytes(ip.packed)


def default_gid(mac: str) -> str:
    """fe80::/64 + modified EUI-64 of the MAC: the RoCE default GID."""
    b = mac_bytes(mac)
    eui = bytes([b[0] ^ 0x02, b[1], b[2], 0xFF, 0xFE, b[3], b[4], b[5]])
    return gid_from_bytes(b"\xfe\x80" + bytes(6) + eui)


def is_v4_mapped(gid: str) -> bool:
    raw = gid_bytes(gid)
    return raw[:10] == bytes(10) and raw[10:12] == b"\xff\xff"


def gid_ipv4(gid: str) -> str | None:
    if not is_v4_mapped(gid):
        return None
    return str(ipaddress.IPv4Address(gid_bytes(gid)[12:]))


def gid_inet_ntop(gid: str) -> str:
    """glibc inet_ntop(AF_INET6) rendering: v4-mapped as ::ffff:a.b.c.d."""
    if is_v4_mapped(gid):
        return "::ffff:" + str(gid_ipv4(gid))
    return str(ipaddress.IPv6Address(gid_bytes(gid)))


def desired_gid_keys(netdev: Netdev, addresses: list[dict[str, Any]]) -> list[str]:
    """GIDs the kernel's roce_gid_mgmt would hold for this netdev, in order.

    While the netdev is administratively up its default GID (fe80:: + EUI-64
    of the MAC) is always present; then every IPv4 address (v4-mapped) and
    every IPv6 address, in the order ``ip addr`` lists them. An admin-down
    netdev has no GIDs at all.
    """
    if not netdev.admin_up:
        return []
    keys = [default_gid(netdev.mac)]
    for family in ("inet", "inet6"):
        for addr in addresses:
            if addr.get("family") != family or not addr.get("local"):
                continue
            gid = gid_for_address(str(addr["local"]))
            if gid and gid not in keys:
                keys.append(gid)
    return keys


@dataclass
class GidEntry:
    gid: str
    gid_type: str
    ndev: str


class GidTable:
    """A port's GID table with the kernel's slot discipline.

    Slots 0 and 1 are reserved for the default GID (v1, v2). Every other GID
    takes the first free slot, v1 then v2; an entry keeps its slot while it
    exists, a removed entry frees its slot. Hence the RoCE v2 index of an
    IPv4 address depends on the order addresses appeared, as on real
    hardware.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.slots: list[GidEntry | None] = [None] * size

    @classmethod
    def from_sysfs(cls, port_dir: Path, size: int) -> GidTable:
        table = cls(size)
        for i in range(size):
            gid = _read(port_dir / "gids" / str(i)) or ZERO_GID
            gtype = _read(port_dir / "gid_attrs" / "types" / str(i)) or ""
            ndev = _read(port_dir / "gid_attrs" / "ndevs" / str(i)) or ""
            if gid != ZERO_GID and gtype in (GID_TYPE_V1, GID_TYPE_V2):
                table.slots[i] = GidEntry(gid, gtype, ndev)
        return table

    def update(self, keys: list[str], ndev: str, mac: str) -> None:
        wanted = [(k, t) for k in keys for t in (GID_TYPE_V1, GID_TYPE_V2)]
        wanted_set = set(wanted)
        for i, entry in enumerate(self.slots):
            if entry is not None and (
                (entry.gid, entry.gid_type) not in wanted_set or entry.ndev != ndev
            ):
                self.slots[i] = None
        present = {(e.gid, e.gid_type) for e in self.slots if e is not None}
        dflt = default_gid(mac)
        for gid, gtype in wanted:
            if (gid, gtype) in present:
                continue
            if gid == dflt:
                slot = 0 if gtype == GID_TYPE_V1 else 1
                if self.size > slot and self.slots[slot] is None:
                    self.slots[slot] = GidEntry(gid, gtype, ndev)
                    continue
            for i in range(2, self.size):
                if self.slots[i] is None:
                    self.slots[i] = GidEntry(gid, gtype, ndev)
                    break

    def entries(self) -> list[GidEntry | None]:
        return list(self.slots)


def fresh_gid_table(hw: dict[str, Any], netdev: Netdev) -> GidTable:
    table = GidTable(int(hw.get("gid_table_len", 16)))
    table.update(desired_gid_keys(netdev, netdev_addresses(netdev.name)), netdev.name, netdev.mac)
    return table


def port_dir(hw: dict[str, Any], dev_name: str, port: int = 1) -> Path:
    return ib_class_dir(hw) / dev_name / "ports" / str(port)


def current_gid_table(hw: dict[str, Any], dev: dict[str, Any], netdev: Netdev) -> GidTable:
    """The table the daemon published; computed afresh when it has not run."""
    pdir = port_dir(hw, dev["name"])
    size = int(hw.get("gid_table_len", 16))
    if (pdir / "gids").is_dir():
        return GidTable.from_sysfs(pdir, size)
    return fresh_gid_table(hw, netdev)


_ROCE_RATE = {GID_TYPE_V1: 1, GID_TYPE_V2: 2}


def best_gid_index(table: GidTable, ipv6: bool = False) -> int:
    """perftest's get_best_gid_index(): prefer the wanted IP family, then RoCE v2."""
    slots = table.entries()

    def info(i: int) -> tuple[bool, str | None]:
        entry = slots[i]
        if entry is None:
            return False, None
        return is_v4_mapped(entry.gid), entry.gid_type

    best = 0
    for i in range(1, len(slots)):
        is4, btype = info(best)
        is4r, rtype = info(i)
        if (is4r and not is4 and not ipv6) or (not is4r and is4 and ipv6):
            best = i
        else:
            if btype is None or rtype is None:
                continue
            if _ROCE_RATE[rtype] > _ROCE_RATE[btype]:
                best = i
    return best


# --------------------------------------------------------------------------
# files
# --------------------------------------------------------------------------
def atomic_write(path: Path, content: str) -> bool:
    """Write ``content`` via tmp + rename, only if it differs. True if written."""
    try:
        if path.read_text(encoding="utf-8") == content:
            return False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=str(path.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(content)
        os.chmod(tmp, 0o444)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return True


def real_ethtool() -> str:
    return os.environ.get(ENV_REAL_ETHTOOL) or REAL_ETHTOOL_DEFAULT
