"""The private ports answer the other node and not this machine; the rest stays open. On
molecule-spark-1, alone in its cluster, the peer reaches the API port and not the private
ones."""

from __future__ import annotations

import os
import socket

import pytest
import testinfra

PEER = {"molecule-spark-1": "molecule-spark-2", "molecule-spark-2": "molecule-spark-1"}
# A private port (Ray's head), an API port (molecule-spark-1's) and one left open (SSH's
# place), each with a listener.
PRIVATE, API, OPEN = 6379, 18000, 2222
# The host whose cluster is itself alone, with the peer as an API host.
ALONE = "molecule-spark-1"


def node(name: str):
    """Another molecule node, from the inventory molecule wrote."""
    return testinfra.get_host(
        f"ansible://{name}", ansible_inventory=os.environ["MOLECULE_INVENTORY_FILE"]
    )


@pytest.fixture
def listeners(host):
    for port in (PRIVATE, API, OPEN):
        listen = (
            "import socket, time; s = socket.socket(); "
            "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
            f's.bind(("0.0.0.0", {port})); s.listen(); time.sleep(60)'
        )
        host.run(f"setsid python3 -c '{listen}' >/dev/null 2>&1 < /dev/null &")
    host.run("sleep 1")
    yield
    host.run(f"pkill -f 'bind..\"0.0.0.0\", ({PRIVATE}|{API}|{OPEN})' || true")


def reachable(target: str, port: int) -> bool:
    try:
        with socket.create_connection((target, port), timeout=3):
            return True
    except OSError:
        return False


def test_rules_are_loaded_by_their_unit(host) -> None:
    unit = host.service("llmfleet-firewall")
    assert unit.is_enabled and unit.is_running
    table = host.check_output("nft list table inet llmfleet")
    assert "saddr @cluster_v4 accept" in table
    assert "6379" in table and "10001-19999" in table and "29501" in table
    low, high = host.file("/proc/sys/net/ipv4/ip_local_port_range").content_string.split()
    assert f"{low}-{high}" in table


def test_private_port_answers_the_peer_only(host, listeners) -> None:
    name = host.backend.get_hostname()
    if name == ALONE:
        pytest.skip(f"{ALONE}'s cluster is itself alone")
    me = host.ansible.get_variables()["ansible_host"]  # the node's lab-network address
    peer = node(PEER[name])
    assert peer.run(f"timeout 5 bash -c '</dev/tcp/{me}/{PRIVATE}'").rc == 0
    assert not reachable(me, PRIVATE)  # this machine is no cluster host
    assert reachable(me, OPEN)


def test_api_port_answers_the_api_host_and_not_the_private_ports(host, listeners) -> None:
    if host.backend.get_hostname() != ALONE:
        pytest.skip(f"the API port is {ALONE}'s")
    assert "APIs for the cluster's hosts only" in host.check_output("nft list table inet llmfleet")
    me = host.ansible.get_variables()["ansible_host"]
    peer = node(PEER[ALONE])
    assert peer.run(f"timeout 5 bash -c '</dev/tcp/{me}/{API}'").rc == 0
    assert peer.run(f"timeout 5 bash -c '</dev/tcp/{me}/{PRIVATE}'").rc != 0
    assert not reachable(me, API)  # this machine is neither
    assert reachable(me, OPEN)
