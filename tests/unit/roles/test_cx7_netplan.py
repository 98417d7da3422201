"""cx7_network's netplan file names its renderer on the CX7 links only, never netplan's
global one (netplan gives the last global renderer it reads to every interface that names
none: a global one here took DGX OS's ports, the management port included, away from
NetworkManager), and marks every link optional (no boot wait for a peer that is off)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.roles.localhost_play import play_on_localhost

HERE = Path(__file__).parent
PORT_1 = ["enp1s0f1np1", "enP2p1s0f1np1"]


def render(tmp_path: Path, **settings: Any) -> dict[str, Any]:
    out = tmp_path / "40-cx7.yaml"
    proc = play_on_localhost(HERE / "render_cx7_netplan.yml", {**settings, "out_file": str(out)})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    plan = yaml.safe_load(out.read_text(encoding="utf-8"))
    network: dict[str, Any] = plan["network"]
    return network


def test_the_default_names_networkd_on_each_link_and_no_global_renderer(tmp_path: Path) -> None:
    network = render(tmp_path, cx7_network_ports=[1])
    assert "renderer" not in network
    assert list(network["ethernets"]) == PORT_1
    for netdev, link in network["ethernets"].items():
        assert link["renderer"] == "networkd", netdev
        assert link["optional"] is True, netdev
        assert link["mtu"] == 9000, netdev


@pytest.mark.parametrize("mode", ["static", "link_local"])
def test_networkmanager_is_named_on_the_links_only(tmp_path: Path, mode: str) -> None:
    network = render(
        tmp_path,
        cx7_network_ports=[0, 1],
        cx7_network_mode=mode,
        cx7_network_renderer="NetworkManager",
    )
    assert "renderer" not in network
    assert network["ethernets"]
    for netdev, link in network["ethernets"].items():
        assert link["renderer"] == "NetworkManager", netdev
        assert link["optional"] is True, netdev


@pytest.mark.parametrize("inherit", ["", None])
def test_an_empty_renderer_names_none_as_nvidias_file(tmp_path: Path, inherit: str | None) -> None:
    network = render(tmp_path, cx7_network_ports=[1], cx7_network_renderer=inherit)
    assert "renderer" not in network
    for netdev, link in network["ethernets"].items():
        assert "renderer" not in link, netdev
        assert link["optional"] is True, netdev
    assert [link["addresses"] for link in network["ethernets"].values()] == [
        ["192.168.100.11/24"],
        ["192.168.101.11/24"],
    ]


def preflight(tmp_path: Path, renderer: str) -> str:
    playbook = tmp_path / "preflight.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "cx7_network's checks alone",
                    "hosts": "localhost",
                    "connection": "local",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "name": "Check the fabric plan",
                            "ansible.builtin.import_role": {
                                "name": "llmfleet.cluster.cx7_network",
                                "tasks_from": "preflight",
                            },
                        }
                    ],
                }
            ]
        )
    )
    proc = play_on_localhost(playbook, {"cx7_network_renderer": renderer})
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-2000:]
    return proc.stdout + proc.stderr


def test_a_renderer_netplan_does_not_know_is_refused(tmp_path: Path) -> None:
    output = preflight(tmp_path, "networkmanager")
    assert "cx7_network_renderer" in output and "networkmanager" in output
    assert "NetworkManager" in output and "networkd" in output


@pytest.mark.skipif(
    Path("/usr/sbin/NetworkManager").exists(), reason="this machine has NetworkManager"
)
def test_networkmanager_on_a_host_without_it_is_refused_before_any_change(tmp_path: Path) -> None:
    output = preflight(tmp_path, "NetworkManager")
    assert (
        "localhost: cx7_network_renderer is NetworkManager but the host has no "
        "/usr/sbin/NetworkManager" in output
    ), output[-3000:]
