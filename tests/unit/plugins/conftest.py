"""Shared by the plugin tests: a DGX Spark's /sys/class/infiniband built in tmp_path,
the fake OpenAI-compatible server (``fake_server``), the lab's Hugging Face Hub over a
small model repo (``lab_hubs``), and two ways to run a module (in-process with
patch_module_args, and through the real ``ansible`` ad-hoc command).

The tree has the kernel's layout (the lab's llmfleet-lab-rdmad publishes the same):
``<root>/class/infiniband/<dev>/{node_type,node_guid,fw_ver,hca_type,board_id,
device/net/<netdev>,ports/1/{state,phys_state,link_layer,rate,gids/<i>,
gid_attrs/types/<i>,gid_attrs/ndevs/<i>,counters/*}}``.

Unused GID slots hold the zero GID; their ``types``/``ndevs`` files are either
empty or, like a real kernel answering EINVAL, unreadable (a directory in place of
the file makes ``open`` raise an OSError).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from ansible.module_utils import _internal as module_utils_internal
from ansible.module_utils.common import warnings as module_warnings
from ansible.module_utils.testing import patch_module_args

from tests.unit.plugins.fake_llm_server import FakeLlmServer, fake_servers
from tests.unit.plugins.lab_hub import LabHub, hubs

REPO = Path(__file__).resolve().parents[3]

ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"
V1 = "IB/RoCE v1"
V2 = "RoCE v2"

# GIDs of the fixture Spark, 8-group form as sysfs writes them.
LL_P1S0F1 = "fe80:0000:0000:0000:4ebb:47ff:fe2d:1a17"
LL_P2S0F1 = "fe80:0000:0000:0000:4ebb:47ff:fe2d:1a1b"
LL_P1S0F0 = "fe80:0000:0000:0000:4ebb:47ff:fe2d:1a16"
V4_100_10 = "0000:0000:0000:0000:0000:ffff:c0a8:640a"  # 192.168.100.10
V4_101_10 = "0000:0000:0000:0000:0000:ffff:c0a8:650a"  # 192.168.101.10
V6_GLOBAL = "2001:0db8:0000:0000:0000:0000:0000:0010"  # 2001:db8::10

COUNTER_NAMES = (
    "VL15_dropped",
    "excessive_buffer_overrun_errors",
    "link_downed",
    "link_error_recovery",
    "local_link_integrity_errors",
    "multicast_rcv_packets",
    "multicast_xmit_packets",
    "port_rcv_constraint_errors",
    "port_rcv_data",
    "port_rcv_errors",
    "port_rcv_packets",
    "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors",
    "port_xmit_constraint_errors",
    "port_xmit_data",
    "port_xmit_discards",
    "port_xmit_packets",
    "port_xmit_wait",
    "symbol_error",
    "unicast_rcv_packets",
    "unicast_xmit_packets",
)


def atomic_write(path: Path, text: str) -> None:
    """tmp + rename, as the kernel's files never read half-written (and as the emulator does)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp"
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


@dataclass
class SparkSysfs:
    root: Path

    @property
    def ib(self) -> Path:
        return self.root / "class" / "infiniband"

    def port_dir(self, device: str, port: int = 1) -> Path:
        return self.ib / device / "ports" / str(port)

    def add_device(
        self,
        name: str,
        netdev: str,
        *,
        guid: str = "4cbb:4703:002d:1a17",
        gids: dict[int, tuple[str, str, str]] | None = None,
        up: bool = True,
        counters: dict[str, int] | None = None,
        table_len: int = 16,
        unused: str = "empty",
        port: int = 1,
    ) -> Path:
        """One RDMA device; ``gids`` maps index -> (gid, type, ndev); ``unused`` is
        ``empty`` (empty types/ndevs files) or ``einval`` (unreadable ones)."""
        ddir = self.ib / name
        for key, value in (
            ("node_type", "1: CA"),
            ("node_guid", guid),
            ("sys_image_guid", "4cbb:4703:002d:1a16"),
            ("fw_ver", "28.45.4028"),
            ("hca_type", "MT4129"),
            ("board_id", "NVD0000000087"),
        ):
            atomic_write(ddir / key, value + "\n")
        # device/net/<netdev> is a symlink into /sys/class/net on a real machine; a
        # dangling link is enough: only its name counts.
        (ddir / "device" / "net").mkdir(parents=True, exist_ok=True)
        os.symlink(f"/sys/class/net/{netdev}", ddir / "device" / "net" / netdev)
        pdir = self.port_dir(name, port)
        atomic_write(pdir / "state", "4: ACTIVE\n" if up else "1: DOWN\n")
        atomic_write(pdir / "phys_state", "5: LinkUp\n" if up else "3: Disabled\n")
        atomic_write(pdir / "link_layer", "Ethernet\n")
        atomic_write(pdir / "rate", "200 Gb/sec (4X HDR)\n")
        gids = gids or {}
        for index in range(table_len):
            gid, gtype, ndev = gids.get(index, (ZERO_GID, "", ""))
            atomic_write(pdir / "gids" / str(index), gid + "\n")
            for sub, value in (("types", gtype), ("ndevs", ndev)):
                path = pdir / "gid_attrs" / sub / str(index)
                if value:
                    atomic_write(path, value + "\n")
                elif unused == "einval":
                    path.mkdir(parents=True)
                else:
                    atomic_write(path, "")
        values = dict.fromkeys(COUNTER_NAMES, 0)
        values.update(counters or {})
        for counter, value in values.items():
            self.set_counter(name, counter, value, port=port)
        return ddir

    def set_counter(self, device: str, counter: str, value: int, port: int = 1) -> None:
        atomic_write(self.port_dir(device, port) / "counters" / counter, f"{value}\n")

    def counter(self, device: str, counter: str, port: int = 1) -> int:
        return int((self.port_dir(device, port) / "counters" / counter).read_text())


def build_spark(root: Path) -> SparkSysfs:
    """The four CX7 functions of a DGX Spark with GID tables that differ on purpose.

    * rocep1s0f1 (enp1s0f1np1): default GID at 0/1, 192.168.100.10 at 2 (v1) / 3 (v2);
      unused slots answer like EINVAL.                      -> RoCE v2 index 3
    * roceP2p1s0f1 (enP2p1s0f1np1): 192.168.101.10 at 0 (v1) / 1 (v2), default GID
      at 2/3.                                                -> RoCE v2 index 1
    * rocep1s0f0 (enp1s0f0np0): default GID at 0/1, 2/3 freed, 2001:db8::10 at 4/5.
                                                             -> RoCE v2 index 5
    * roceP2p1s0f0 (enP2p1s0f0np0): port DOWN, no GIDs.      -> no RoCE v2 index
    """
    spark = SparkSysfs(root)
    root.mkdir(parents=True, exist_ok=True)
    spark.add_device(
        "rocep1s0f1",
        "enp1s0f1np1",
        guid="4cbb:4703:002d:1a17",
        gids={
            0: (LL_P1S0F1, V1, "enp1s0f1np1"),
            1: (LL_P1S0F1, V2, "enp1s0f1np1"),
            2: (V4_100_10, V1, "enp1s0f1np1"),
            3: (V4_100_10, V2, "enp1s0f1np1"),
        },
        counters={
            "port_xmit_data": 50_053_280,
            "port_rcv_data": 2_100,
            "port_xmit_packets": 24_671,
            "port_rcv_packets": 35,
            "link_downed": 1,
        },
        unused="einval",
    )
    spark.add_device(
        "roceP2p1s0f1",
        "enP2p1s0f1np1",
        guid="4cbb:4703:002d:1a1b",
        gids={
            0: (V4_101_10, V1, "enP2p1s0f1np1"),
            1: (V4_101_10, V2, "enP2p1s0f1np1"),
            2: (LL_P2S0F1, V1, "enP2p1s0f1np1"),
            3: (LL_P2S0F1, V2, "enP2p1s0f1np1"),
        },
    )
    spark.add_device(
        "rocep1s0f0",
        "enp1s0f0np0",
        guid="4cbb:4703:002d:1a16",
        gids={
            0: (LL_P1S0F0, V1, "enp1s0f0np0"),
            1: (LL_P1S0F0, V2, "enp1s0f0np0"),
            4: (V6_GLOBAL, V1, "enp1s0f0np0"),
            5: (V6_GLOBAL, V2, "enp1s0f0np0"),
        },
    )
    spark.add_device(
        "roceP2p1s0f0", "enP2p1s0f0np0", guid="4cbb:4703:002d:1a1a", up=False, unused="einval"
    )
    return spark


@pytest.fixture
def spark(tmp_path: Path) -> SparkSysfs:
    return build_spark(tmp_path / "sys")


# ---------------------------------------------------------------------------
# running modules
# ---------------------------------------------------------------------------
@pytest.fixture
def run_module(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., tuple[int, dict[str, Any]]]:
    """Call ``module.main()`` with ``args``; return (exit code, parsed JSON result)."""
    # Importing controller code (ansible.errors, ansible.template... as other tests in
    # this process do) flips ansible-core 2.19's module_utils into controller mode, where
    # module.warn() goes to the display instead of the result. A module runs on the target.
    if hasattr(module_utils_internal, "is_controller"):
        monkeypatch.setattr(module_utils_internal, "is_controller", False)

    def run(module: ModuleType, args: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        # A module's warnings and deprecations collect in module-level dicts that a real
        # module's process starts empty; here, each run starts without the last run's.
        for name in ("_global_warnings", "_global_deprecations"):
            if hasattr(module_warnings, name):
                monkeypatch.setattr(module_warnings, name, {})
        capsys.readouterr()
        with patch_module_args(args), pytest.raises(SystemExit) as info:
            module.main()
        out = capsys.readouterr().out
        return int(info.value.code or 0), json.loads(out)

    return run


def ansible_adhoc(
    module: str, args: str, env: dict[str, str] | None = None, timeout: float = 90
) -> tuple[str, dict[str, Any]]:
    """``ansible localhost -m MODULE -a ARGS -o`` with the repository's ansible.cfg.

    The inventory is ``localhost,`` with a local connection and this venv's Python,
    so neither the lab's podman inventory nor SSH is involved. Returns the status
    word (``SUCCESS`` or ``FAILED!``) and the module's result JSON.

    Under ``ansible-test units`` (a copy of the collection, without ansible.cfg) the
    collection is found through the ``ANSIBLE_COLLECTIONS_PATH`` ansible-test sets.
    """
    run_env = dict(os.environ)
    # The ad-hoc command is a controller: ansible-test's PYTHONPATH for module tests holds an
    # ``ansible`` package cut down to module_utils, without the controller's code.
    run_env.pop("PYTHONPATH", None)
    if (REPO / "ansible.cfg").is_file():
        run_env["ANSIBLE_CONFIG"] = str(REPO / "ansible.cfg")
    run_env["ANSIBLE_NOCOLOR"] = "1"
    run_env.update(env or {})
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible"),
            "localhost",
            "-i",
            "localhost,",
            "-c",
            "local",
            "-e",
            f"ansible_python_interpreter={sys.executable}",
            "-m",
            module,
            "-a",
            args,
            "-o",
        ],
        cwd=REPO,
        env=run_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("localhost | ")), None)
    assert line is not None, f"no result line\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    status, _arrow, payload = line[len("localhost | ") :].partition(" => ")
    return status, json.loads(payload)


@pytest.fixture
def fake_server() -> Iterator[Callable[..., FakeLlmServer]]:
    """Starts fake OpenAI-compatible servers (any settings), all stopped after the test."""
    yield from fake_servers()


@pytest.fixture(scope="session")
def lab_hubs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, LabHub]]:
    """The lab's Hub over tests/unit/plugins/lab_hub.py's model repo: ``open``, and
    ``token`` (every request needs lab_hub.TOKEN); stopped at the end of the session."""
    yield from hubs(tmp_path_factory.mktemp("lab-hub"))
