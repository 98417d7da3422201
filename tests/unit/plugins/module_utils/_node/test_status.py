"""module_utils/_node/status: systemctl's, the engines' and ip's output as data; serve.yaml with
and without PyYAML; the launch's layout; memory and swap; what the history says is served."""

from __future__ import annotations

import builtins
import json
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._node import status as node

# What `systemctl show --property=... A B` prints: a block per unit, in the order asked,
# properties in systemd's own order.
SYSTEMCTL_SHOW = """\
Id=llmfleet-vllm.service
NRestarts=2
Result=success
LoadState=loaded
ActiveState=active
SubState=running
UnitFileState=enabled
ActiveEnterTimestampMonotonic=50000000

Id=llmfleet-ray.service
NRestarts=0
Result=success
LoadState=not-found
ActiveState=inactive
SubState=dead
UnitFileState=
ActiveEnterTimestampMonotonic=0
"""

SERVE_YAML = """\
# Ansible managed
# Read by `vllm serve --config /etc/llmfleet/vllm/serve.yaml`: profile tiny_lab, rank 1 of 2.
model: /models/tiny-lab
served-model-name: tiny-lab
tensor-parallel-size: 2
nnodes: 2
node-rank: 1
master-addr: 192.168.100.1
headless: true
port: 8000
max-model-len: 131072
api-key-env: LLMFLEET_API_KEY
compilation-config:
  level: 0
"""


def test_systemctl_show_becomes_one_state_per_unit_with_the_time_it_became_active() -> None:
    shown = node.parse_systemctl_show(SYSTEMCTL_SHOW)
    assert set(shown) == {"llmfleet-vllm.service", "llmfleet-ray.service"}
    running = node.unit_state("llmfleet-vllm.service", shown["llmfleet-vllm.service"], 1000.0)
    assert running == {
        "name": "llmfleet-vllm.service",
        "installed": True,
        "load": "loaded",
        "active": "active",
        "sub": "running",
        "result": "success",
        "restarts": 2,
        "enabled": "enabled",
        "since": 1050.0,
    }
    absent = node.unit_state("llmfleet-ray.service", shown["llmfleet-ray.service"], 1000.0)
    assert (absent["installed"], absent["active"], absent["since"], absent["enabled"]) == (
        False,
        "inactive",
        None,
        None,
    )
    # A unit systemctl did not answer for (systemctl missing or failing) is not installed.
    assert node.unit_state("x.service", None, None)["installed"] is False


def test_boot_time_comes_from_the_uptime() -> None:
    assert node.boot_epoch("120.50 300.00\n", 1000.5) == 880.0
    assert node.boot_epoch("", 1000.0) is None


@pytest.mark.parametrize(
    ("inspected", "image"),
    [
        # docker: the reference in Config.Image
        (
            [
                {
                    "State": {"Status": "running", "StartedAt": "t", "ExitCode": 0},
                    "RestartCount": 3,
                    "Image": "sha256:" + "a" * 64,
                    "Config": {"Image": "vllm/vllm-openai:v0.11.0"},
                }
            ],
            "vllm/vllm-openai:v0.11.0",
        ),
        # podman: the reference in ImageName
        (
            [
                {
                    "State": {"Status": "exited", "StartedAt": "t", "ExitCode": 1},
                    "RestartCount": 0,
                    "Image": "a" * 64,
                    "ImageName": "localhost/vllm:1",
                    "Config": {"Image": ""},
                }
            ],
            "localhost/vllm:1",
        ),
    ],
)
def test_both_engines_inspect_output_gives_state_restarts_and_image(
    inspected: list[dict[str, Any]], image: str
) -> None:
    state = node.container_state("llmfleet-vllm", inspected)
    assert state["exists"] is True
    assert state["image"] == image
    assert state["restarts"] == inspected[0]["RestartCount"]
    assert state["state"] == inspected[0]["State"]["Status"]
    assert node.container_state("llmfleet-vllm", None) == {"name": "llmfleet-vllm", "exists": False}


def test_the_layout_of_a_headless_rank_from_serve_yaml() -> None:
    layout = node.layout(node.parse_serve_config(SERVE_YAML))
    assert layout is not None
    assert (layout["tensor_parallel_size"], layout["pipeline_parallel_size"]) == (2, 1)
    assert (layout["nnodes"], layout["node_rank"], layout["headless"]) == (2, 1, True)
    assert (layout["master_addr"], layout["port"], layout["max_model_len"]) == (
        "192.168.100.1",
        8000,
        131072,
    )
    assert layout["served_model_name"] == "tiny-lab"


def test_without_pyyaml_the_top_level_keys_still_give_the_layout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_import = builtins.__import__

    def no_yaml(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "yaml":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_yaml)
    parsed = node.parse_serve_config(SERVE_YAML + "quoted: 'a: b'\nempty: ~\n")
    assert parsed["tensor-parallel-size"] == 2
    assert parsed["headless"] is True
    assert parsed["quoted"] == "a: b"
    assert parsed["empty"] is None
    assert "level" not in parsed
    assert node.layout(parsed) == node.layout(node.parse_serve_config(SERVE_YAML))


def test_a_single_node_launch_has_rank_0_of_1_and_no_configuration_no_layout() -> None:
    layout = node.layout({"model": "/models/m", "tensor-parallel-size": 2})
    assert layout is not None
    assert (layout["nnodes"], layout["node_rank"], layout["headless"]) == (1, 0, False)
    assert node.layout({}) is None


def test_memory_and_swap_from_meminfo_and_swaps() -> None:
    meminfo = (
        "MemTotal: 1000 kB\nMemFree: 100 kB\nMemAvailable: 600 kB\nCached: 500 kB\n"
        "Shmem: 50 kB\nSwapTotal: 200 kB\nSwapFree: 150 kB\n"
    )
    swaps = "Filename\tType\tSize\tUsed\tPriority\n/swap.img   file   200   50   -2\n"
    assert node.memory(meminfo, swaps) == {
        "total_bytes": 1000 * 1024,
        "free_bytes": 100 * 1024,
        "available_bytes": 600 * 1024,
        "page_cache_bytes": 450 * 1024,
        "swap_total_bytes": 200 * 1024,
        "swap_used_bytes": 50 * 1024,
        "swap_devices": ["/swap.img"],
    }
    no_swap = node.memory("MemTotal: 1 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n", "Filename\n")
    assert (no_swap["swap_total_bytes"], no_swap["swap_devices"]) == (0, [])


def test_ipv4_addresses_from_ip_json() -> None:
    text = json.dumps(
        [
            {
                "ifname": "enp1s0f1np1",
                "addr_info": [
                    {"family": "inet", "local": "192.168.100.1", "prefixlen": 24},
                    {"family": "inet6", "local": "fe80::1", "prefixlen": 64},
                ],
            }
        ]
    )
    assert node.ipv4_addresses(text) == ["192.168.100.1/24"]
    assert node.ipv4_addresses("not json") == []


def test_a_link_reads_sysfs_and_takes_the_speed_from_ethtool(tmp_path: Path) -> None:
    folder = tmp_path / "class" / "net" / "enp1s0f1np1"
    folder.mkdir(parents=True)
    (folder / "mtu").write_text("9000\n")
    (folder / "operstate").write_text("up\n")
    speed = {"speed_mbps": 200000, "link_detected": True}
    assert node.link_state("enp1s0f1np1", str(tmp_path), speed, ["10.0.0.1/24"]) == {
        "name": "enp1s0f1np1",
        "present": True,
        "operstate": "up",
        "mtu": 9000,
        "speed_mbps": 200000,
        "link_detected": True,
        "ipv4": ["10.0.0.1/24"],
    }
    assert node.link_state("enP2p1s0f1np1", str(tmp_path), speed, []) == {
        "name": "enP2p1s0f1np1",
        "present": False,
    }


def test_what_the_history_says_is_served() -> None:
    state = {"image": None, "profile": "tiny_lab", "model_revision": None}
    newer = {"image": None, "profile": "tiny_lab_long", "model_revision": None}
    history = {
        "version": 1,
        "entries": [
            {
                "time": "2026-11-24T10:00:00Z",
                "action": "up",
                "from": None,
                "to": state,
                "outcome": "ok",
                "reason": None,
            },
            {
                "time": "2026-11-24T11:00:00Z",
                "action": "upgrade",
                "from": state,
                "to": newer,
                "outcome": "failed",
                "reason": "did not start",
            },
        ],
    }
    assert node.serving_history(json.dumps(history)) == {
        "current": state,
        "uncertain": True,
        "last_change": "2026-11-24T11:00:00Z",
        "last_action": "upgrade",
        "last_outcome": "failed",
    }
    assert node.serving_history(None) is None
    assert "no JSON" in node.serving_history("{")["error"]
    assert node.images_running(None) == {}


def fake_process(proc: Path, pid: int, parent: int, argv: list[str], environ: dict | None) -> None:
    folder = proc / str(pid)
    folder.mkdir(parents=True)
    (folder / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    (folder / "stat").write_text(f"{pid} (python3 x) S {parent} 1 1 0 -1\n")
    if environ is not None:
        (folder / "environ").write_bytes(
            b"\0".join(f"{k}={v}".encode() for k, v in environ.items()) + b"\0"
        )


def test_processes_by_command_line_with_only_the_environment_asked_for(tmp_path: Path) -> None:
    env = {"NCCL_SOCKET_IFNAME": "enp1s0f1np1", "LLMFLEET_API_KEY": "secret", "PATH": "/bin"}
    fake_process(tmp_path, 10, 1, ["/opt/vllm/bin/python", "/opt/vllm/bin/vllm", "serve"], env)
    # A worker vLLM forks keeps the command line: it is the same launch, left out.
    fake_process(tmp_path, 11, 10, ["/opt/vllm/bin/python", "/opt/vllm/bin/vllm", "serve"], env)
    fake_process(tmp_path, 12, 1, ["/usr/local/sbin/llmfleet-vllm-rank-watchdog"], {})
    # Another user's process without root: no environment.
    fake_process(tmp_path, 13, 1, ["vllm", "serve", "--port", "9000"], None)
    (tmp_path / "self").mkdir()
    found = node.find_processes("vllm serve", str(tmp_path), ["NCCL_SOCKET_IFNAME", "GLOO_X"])
    assert found == [
        {
            "pid": 10,
            "cmdline": "/opt/vllm/bin/python /opt/vllm/bin/vllm serve",
            "environ": {"NCCL_SOCKET_IFNAME": "enp1s0f1np1"},
        },
        {"pid": 13, "cmdline": "vllm serve --port 9000", "environ": None},
    ]
    assert node.find_processes("vllm serve", str(tmp_path), [], own_pid=10)[0]["pid"] == 11


def test_env_files_report_only_the_keys_asked_for() -> None:
    text = "# managed\nNCCL_IB_GID_INDEX=3\nexport GLOO_SOCKET_IFNAME='enp1s0f1np1'\nKEY=secret\n"
    assert node.env_file_subset(text, ["NCCL_IB_GID_INDEX", "GLOO_SOCKET_IFNAME"]) == {
        "NCCL_IB_GID_INDEX": "3",
        "GLOO_SOCKET_IFNAME": "enp1s0f1np1",
    }
    assert node.env_file_subset(None, ["X"]) is None


def test_the_version_of_a_package_in_a_virtualenv(tmp_path: Path) -> None:
    info = tmp_path / "lib" / "python3.12" / "site-packages" / "vllm-0.11.0+cpu.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.11.0+cpu\n")
    assert node.package_version(str(tmp_path), "vllm") == "0.11.0+cpu"
    assert node.package_version(str(tmp_path), "ray") is None
    assert node.package_version(str(tmp_path / "absent"), "vllm") is None
