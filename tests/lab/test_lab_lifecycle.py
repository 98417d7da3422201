"""A switched lab of three nodes comes up wired and goes down leaving nothing behind."""

from __future__ import annotations

import json
import subprocess

import pytest

from .conftest import Lab, llmfleet, snapshot

SWITCHED_LAB = "llmfleet-t3"


def host(*cmd: str) -> str:
    return subprocess.run(list(cmd), capture_output=True, text=True, check=True).stdout


def three_sparks_refused_before_any_change(lab: Lab) -> None:
    """site.yml on three Sparks for the lab model (2 attention heads): tensor parallel 3 is
    refused in the validation play, naming the layouts that work, before any node changes."""
    nodes = ("spark-1", "spark-2", "spark-3")
    before = snapshot(lab, nodes)
    proc = lab.run("llmfleet", "up", "-i", "inventory/lab", "--plain", timeout=600)
    output = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == 2, output[-4000:]
    for node in nodes:
        assert (
            f"[{node}] FAILED: Require a tensor parallel size that divides the model's heads"
            in output
        )
    assert (
        "3 hosts (spark-1, spark-2, spark-3) give tensor parallel 3, which does not divide the"
        " model's 2 attention heads and 1 KV heads (vLLM refuses it at start); layouts that work:"
        " tensor parallel 2 on 2 hosts (llmfleet_vllm_hosts: ['spark-1', 'spark-2'])"
    ) in output
    assert "== PLAY: Set up and prove the CX7 fabric" not in output
    assert snapshot(lab, nodes) == before


# Extended: a third lab (three nodes on a switch) started and removed in CI's longest
# worker; make test starts and removes the bare, test, gateway and Ray-path labs, and the
# tensor-parallel refusal it shows is unit-tested (tests/unit/plugins/filter/test_capacity.py,
# test_inventory_checks.py).
@pytest.mark.extended
def test_three_node_switched_lab_up_then_down_leaves_nothing() -> None:
    lab = Lab(SWITCHED_LAB)
    llmfleet("lab", "up", "--nodes", "3", "--ports", "0,1", "--name", SWITCHED_LAB)
    try:
        for node in ("spark-1", "spark-2", "spark-3"):
            links = lab.out(node, "ibdev2netdev")
            for netdev in ("enp1s0f0np0", "enP2p1s0f0np0", "enp1s0f1np1", "enP2p1s0f1np1"):
                assert f"==> {netdev} (Up)" in links, (node, links)
        three_sparks_refused_before_any_change(lab)
        # one switch per half: spark-1 reaches both others on the same half
        for index, node in enumerate(("spark-1", "spark-2", "spark-3"), start=1):
            lab.sh(node, f"ip addr add 192.168.252.{index}/24 dev enp1s0f1np1")
        lab.sh("spark-1", "ping -c 1 -W 2 192.168.252.2 && ping -c 1 -W 2 192.168.252.3")
    finally:
        llmfleet("lab", "down", "--name", SWITCHED_LAB)

    containers = json.loads(
        host(
            "podman",
            "ps",
            "-a",
            "--filter",
            f"label=llmfleet.lab={SWITCHED_LAB}",
            "--format",
            "json",
        )
        or "[]"
    )
    assert containers == []
    assert SWITCHED_LAB not in host("podman", "network", "ls", "--format", "{{.Name}}").split()
    volumes = host("podman", "volume", "ls", "--format", "{{.Name}}").split()
    assert not [v for v in volumes if v.startswith(SWITCHED_LAB)]
    assert f"{SWITCHED_LAB}-fabric" not in host("ip", "netns", "list")
    host_links = [entry["ifname"] for entry in json.loads(host("ip", "-j", "link"))]
    assert not [
        name for name in host_links if name.startswith(("en", "n1-p", "n2-p", "n3-p", "sw-p"))
    ], host_links


def test_a_network_of_the_same_name_that_is_not_the_labs_is_left_alone() -> None:
    foreign = "llmfleet-foreign"
    subprocess.run(["podman", "network", "rm", "-f", foreign], capture_output=True, check=False)
    host("podman", "network", "create", foreign)
    try:
        llmfleet("lab", "down", "--name", foreign)
        assert foreign in host("podman", "network", "ls", "--format", "{{.Name}}").split()
        proc = subprocess.run(
            ["llmfleet", "lab", "up", "--name", foreign],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert f"a podman network named '{foreign}' exists and is not this lab's" in " ".join(
            (proc.stdout + proc.stderr).split()
        )
        assert not host("podman", "ps", "-a", "--filter", f"label=llmfleet.lab={foreign}", "-q")
    finally:
        subprocess.run(["podman", "network", "rm", "-f", foreign], capture_output=True, check=False)
