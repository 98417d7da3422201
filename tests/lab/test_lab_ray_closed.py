"""Ray is closed: a client without the cluster's token is refused, and from an address
outside the cluster its ports (and vLLM's rendezvous, NCCL/Gloo) do not answer, while the
API that clients use does."""

from __future__ import annotations

import socket

from .conftest import Lab, changed_counts

HEAD = "192.168.100.11:6379"


def reachable(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=3):
            return True
    except OSError:
        return False


def test_ray_refuses_a_client_without_the_token(lab: Lab, site) -> None:
    ray = "/opt/vllm/bin/ray status --address " + HEAD
    refused = lab.sh(
        "spark-2", f"env -u RAY_AUTH_MODE -u RAY_AUTH_TOKEN_PATH timeout 60 {ray}", check=False
    )
    assert refused.returncode != 0
    assert "Authentication token is missing or incorrect" in refused.stdout + refused.stderr
    wrong = lab.sh(
        "spark-2",
        "echo not-the-token > /tmp/t && "
        f"RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=/tmp/t timeout 60 {ray}",
        check=False,
    )
    assert wrong.returncode != 0
    assert "InvalidAuthToken" in wrong.stdout + wrong.stderr
    # With the token (as the role's own wait does) both nodes are listed.
    status = lab.out("spark-2", f"set -a; . /etc/llmfleet/ray/ray.env; timeout 60 {ray}")
    assert status.count(" 1 node_") == 2, status
    # The token is root's alone, the same on both nodes, and not in Ray's environment file.
    for node in ("spark-1", "spark-2"):
        assert lab.out(node, "stat -c '%U %a' /etc/llmfleet/private/ray-token").split() == [
            "root",
            "600",
        ]
    token = lab.out("spark-1", "cat /etc/llmfleet/private/ray-token").strip()
    assert (
        len(token) == 64
        and token == lab.out("spark-2", "cat /etc/llmfleet/private/ray-token").strip()
    )
    assert token not in lab.out("spark-1", "cat /etc/llmfleet/ray/ray.env")


def test_the_private_ports_answer_the_cluster_only(lab: Lab, site) -> None:
    spark_1 = lab.management_ip("spark-1")
    # Ray's head listens on every address: this machine, no cluster host, gets no answer.
    assert "*:6379" in lab.out("spark-1", "ss -tlnH '( sport = :6379 )'")
    assert not reachable(spark_1, 6379)
    assert (
        lab.sh("spark-2", f"timeout 5 bash -c '</dev/tcp/{spark_1}/6379'", check=False).returncode
        == 0
    )
    # Ray's ports picked at start (raylet, agents) are closed the same way.
    raylet = lab.out("spark-1", "ss -tlnpH | grep -m1 '\"raylet\"' | awk '{print $4}'").strip()
    assert raylet.startswith("*:"), raylet
    assert not reachable(spark_1, int(raylet.rsplit(":", 1)[1]))
    # What clients use stays open.
    assert reachable(spark_1, 8000)


def test_the_firewall_goes_and_comes_back(lab: Lab, site) -> None:
    playbook = (
        "ansible-playbook",
        "-i",
        "inventory/lab",
        "tests/lab/playbooks/cluster_firewall.yml",
    )
    removed = lab.run(*playbook, "--limit", "spark-2", "-e", "cluster_firewall_state=absent")
    assert removed.returncode == 0, removed.stdout[-4000:]
    assert lab.sh("spark-2", "nft list table inet llmfleet", check=False).returncode != 0
    assert (
        lab.sh(
            "spark-2", "test -e /etc/systemd/system/llmfleet-firewall.service", check=False
        ).returncode
        == 1
    )
    restored = lab.run(*playbook)
    assert restored.returncode == 0, restored.stdout[-4000:]
    changed = changed_counts(restored.stdout)
    assert changed["spark-1"] == 0 and changed["spark-2"] > 0, restored.stdout[-4000:]
    assert "saddr @cluster_v4 accept" in lab.out("spark-2", "nft list table inet llmfleet")
