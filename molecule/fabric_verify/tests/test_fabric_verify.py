"""What fabric_verify vouched for holds, seen by independent means on each node."""

from __future__ import annotations

import pytest

PEER = {"molecule-spark-1": 12, "molecule-spark-2": 11}
HALVES = {
    "enp1s0f1np1": ("rocep1s0f1", "192.168.100"),
    "enP2p1s0f1np1": ("roceP2p1s0f1", "192.168.101"),
}
SYSFS = "/run/llmfleet-lab/sysfs/class/infiniband"


@pytest.mark.parametrize("netdev", sorted(HALVES))
def test_rdma_port_active_over_ethernet(host, netdev: str) -> None:
    device, _ = HALVES[netdev]
    assert host.file(f"{SYSFS}/{device}/ports/1/state").content_string.strip() == "4: ACTIVE"
    assert host.file(f"{SYSFS}/{device}/ports/1/link_layer").content_string.strip() == "Ethernet"
    assert host.file(f"{SYSFS}/{device}/device/net/{netdev}").exists


@pytest.mark.parametrize("netdev", sorted(HALVES))
def test_link_at_200g_and_jumbo_path_to_peer(host, netdev: str) -> None:
    assert "Speed: 200000Mb/s" in host.check_output(f"ethtool {netdev}")
    _, subnet = HALVES[netdev]
    peer = PEER[host.backend.get_hostname()]
    assert host.run(f"ping -c 1 -W 2 -M do -s 8972 -I {netdev} {subnet}.{peer}").rc == 0
    # one byte more than the MTU allows must not pass unfragmented
    assert host.run(f"ping -c 1 -W 2 -M do -s 8973 -I {netdev} {subnet}.{peer}").rc != 0


# The node's own netplan files, as DGX OS has its own (the management port's, which the lab
# writes at boot, and the global NetworkManager renderer's): not ours.
SYSTEM_NETPLAN = ["00-llmfleet-lab-management.yaml", "01-network-manager-all.yaml"]


def test_verification_left_the_host_as_it_was(host) -> None:
    # fabric_verify only reads: no netplan file besides the system's and cx7_network's
    assert host.run("ls /etc/netplan").stdout.split() == [*SYSTEM_NETPLAN, "40-cx7.yaml"]
