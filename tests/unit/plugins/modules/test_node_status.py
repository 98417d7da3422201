"""modules/node_status: one read-only call over stand-ins for systemctl, ethtool, ip and the
container engine (each prints what the real tool prints), a sysfs and a procfs tree; a host
without those tools still answers."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.modules import node_status

RunModule = Callable[..., tuple[int, dict[str, Any]]]

TOOLS = {
    # `systemctl show --property=... -- UNIT...`: a block per unit asked for.
    "systemctl": """
units = sys.argv[sys.argv.index("--") + 1:]
known = {"llmfleet-vllm.service": ("loaded", "active", "running", "1", "20000000")}
blocks = []
for unit in units:
    absent = ("not-found", "inactive", "dead", "0", "0")
    load, active, sub, restarts, entered = known.get(unit, absent)
    blocks.append(f"Id={unit}\\nLoadState={load}\\nActiveState={active}\\nSubState={sub}\\n"
                  f"NRestarts={restarts}\\nResult=success\\nUnitFileState=enabled\\n"
                  f"ActiveEnterTimestampMonotonic={entered}\\n")
print("\\n".join(blocks))
""",
    "ethtool": """
print(f"Settings for {sys.argv[1]}:")
print("\\tSpeed: 200000Mb/s\\n\\tDuplex: Full\\n\\tLink detected: yes")
""",
    "ip": """
print(json.dumps([{"ifname": sys.argv[-1], "addr_info": [
    {"family": "inet", "local": "192.168.100.1", "prefixlen": 24}]}]))
""",
    "podman": """
if sys.argv[1:4] == ["container", "inspect", "llmfleet-vllm"]:
    print(json.dumps([{"State": {"Status": "running", "StartedAt": "2026-11-24T10:00:00Z",
                                 "ExitCode": 0}, "RestartCount": 0, "Image": "a" * 64,
                       "ImageName": "localhost/vllm:1"}]))
else:
    print("[]")
    sys.stderr.write("Error: no such container\\n")
    sys.exit(125)
""",
}


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in TOOLS.items():
        script = bin_dir / name
        script.write_text(f"#!{sys.executable}\nimport json, sys\n{body}")
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin:/bin")
    link = tmp_path / "sys" / "class" / "net" / "enp1s0f1np1"
    link.mkdir(parents=True)
    (link / "mtu").write_text("9000\n")
    (link / "operstate").write_text("up\n")
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "uptime").write_text("100.0 50.0\n")
    (proc / "meminfo").write_text(
        "MemTotal: 2048 kB\nMemFree: 1024 kB\nMemAvailable: 1536 kB\nCached: 256 kB\n"
        "Shmem: 0 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n"
    )
    (proc / "swaps").write_text("Filename\tType\tSize\tUsed\tPriority\n")
    (tmp_path / "serve.yaml").write_text(
        "model: /models/tiny-lab\nhost: 0.0.0.0\nport: 8000\ntensor-parallel-size: 2\n"
        "nnodes: 2\nnode-rank: 0\nmaster-addr: 192.168.100.1\n"
    )
    return tmp_path


def test_one_call_reads_units_containers_links_memory_and_the_launch(
    node: Path, run_module: RunModule
) -> None:
    rc, result = run_module(
        node_status,
        {
            "units": ["llmfleet-vllm.service", "llmfleet-ray.service"],
            "containers": ["llmfleet-vllm", "llmfleet-ray"],
            "container_engine": "podman",
            "interfaces": ["enp1s0f1np1", "enP2p1s0f1np1"],
            "serve_config": str(node / "serve.yaml"),
            "history": str(node / "history.json"),
            "images_record": str(node / "images.json"),
            "sysfs_root": str(node / "sys"),
            "proc_root": str(node / "proc"),
        },
    )
    assert rc == 0, result
    assert result["changed"] is False
    vllm, ray = result["units"]
    assert (vllm["active"], vllm["sub"], vllm["restarts"]) == ("active", "running", 1)
    # Active since 20 s after a boot 100 s before the module's clock.
    assert vllm["since"] == pytest.approx(result["time"] - 80, abs=0.01)
    assert (ray["installed"], ray["active"]) == (False, "inactive")
    assert [c["exists"] for c in result["containers"]] == [True, False]
    assert result["containers"][0]["image"] == "localhost/vllm:1"
    present, missing = result["links"]
    assert (present["operstate"], present["mtu"], present["speed_mbps"], present["ipv4"]) == (
        "up",
        9000,
        200000,
        ["192.168.100.1/24"],
    )
    assert missing == {"name": "enP2p1s0f1np1", "present": False}
    assert result["memory"]["swap_total_bytes"] == 0
    assert result["memory"]["free_bytes"] == 1024 * 1024
    assert result["layout"]["tensor_parallel_size"] == 2
    assert result["layout"]["headless"] is False
    assert (result["serving"], result["images"]) == (None, {})


def test_a_host_without_the_tools_or_files_still_answers(
    node: Path, run_module: RunModule, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = node / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    rc, result = run_module(
        node_status,
        {
            "units": ["llmfleet-vllm.service"],
            "containers": ["llmfleet-vllm"],
            "interfaces": ["enp1s0f1np1"],
            "serve_config": str(node / "absent.yaml"),
            "history": str(node / "absent.json"),
            "sysfs_root": str(node / "sys"),
            "proc_root": str(node / "proc"),
        },
    )
    assert rc == 0, result
    assert result["units"][0]["installed"] is False
    assert result["containers"] == [{"name": "llmfleet-vllm", "exists": False}]
    assert result["links"][0]["speed_mbps"] is None
    assert result["links"][0]["mtu"] == 9000
    assert result["layout"] is None
    assert json.dumps(result)
