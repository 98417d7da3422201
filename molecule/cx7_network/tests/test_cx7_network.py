"""Real effects of cx7_network: addresses, MTU 9000, jumbo pings, the netplan file."""

from __future__ import annotations

import json

import pytest
import yaml

HOST_NUMBER = {"molecule-spark-1": 11, "molecule-spark-2": 12}
SUBNETS = {"enp1s0f1np1": "192.168.100", "enP2p1s0f1np1": "192.168.101"}


def _me(host) -> int:
    return HOST_NUMBER[host.backend.get_hostname()]


def _addresses(host, netdev: str) -> list[dict]:
    return json.loads(host.check_output(f"ip -j addr show dev {netdev}"))[0]["addr_info"]


@pytest.mark.parametrize("netdev", sorted(SUBNETS))
def test_each_half_has_its_own_subnet_address(host, netdev: str) -> None:
    ipv4 = [a for a in _addresses(host, netdev) if a["family"] == "inet"]
    assert [(a["local"], a["prefixlen"]) for a in ipv4] == [(f"{SUBNETS[netdev]}.{_me(host)}", 24)]


@pytest.mark.parametrize("netdev", sorted(SUBNETS))
def test_mtu_9000_and_no_ipv6(host, netdev: str) -> None:
    link = json.loads(host.check_output(f"ip -j link show dev {netdev}"))[0]
    assert link["mtu"] == 9000
    assert "UP" in link["flags"]
    assert not [a for a in _addresses(host, netdev) if a["family"] == "inet6"]
    assert host.sysctl(f"net.ipv6.conf.{netdev}.disable_ipv6") == 1


@pytest.mark.parametrize("netdev", sorted(SUBNETS))
def test_jumbo_ping_to_the_peer_without_fragmenting(host, netdev: str) -> None:
    peer = 12 if _me(host) == 11 else 11
    cmd = host.run(f"ping -c 2 -W 2 -M do -s 8972 -I {netdev} {SUBNETS[netdev]}.{peer}")
    assert cmd.rc == 0, cmd.stdout + cmd.stderr


def test_netplan_file_is_private_and_valid(host) -> None:
    plan = host.file("/etc/netplan/40-cx7.yaml")
    assert plan.exists
    assert plan.mode == 0o600
    assert plan.user == "root"
    assert "enP2p1s0f1np1:" in plan.content_string
    assert host.run("netplan generate").rc == 0


def test_the_renderer_is_named_on_the_cx7_links_only(host) -> None:
    # a global renderer would move every interface that names none (DGX OS's management
    # port among them); each CX7 link names networkd (the default) and is optional
    network = yaml.safe_load(host.file("/etc/netplan/40-cx7.yaml").content_string)["network"]
    assert "renderer" not in network
    assert sorted(network["ethernets"]) == sorted(SUBNETS)
    for netdev, link in network["ethernets"].items():
        assert link["renderer"] == "networkd", netdev
        assert link["optional"] is True, netdev


@pytest.mark.parametrize("netdev", sorted(SUBNETS))
def test_networkd_renders_each_half(host, netdev: str) -> None:
    network = host.file(f"/run/systemd/network/10-netplan-{netdev}.network")
    assert network.exists
    assert f"Address={SUBNETS[netdev]}.{_me(host)}/24" in network.content_string


def test_emulated_rdma_gid_table_carries_the_ipv4_roce_v2_entry(host) -> None:
    # the fabric address shows up in the RoCE GID table as an IPv4-mapped RoCE v2 GID
    out = host.check_output("ibv_devinfo -v -d rocep1s0f1")
    assert f"::ffff:{SUBNETS['enp1s0f1np1']}.{_me(host)}, RoCE v2" in out
