"""The fabric roles on the lab: converge, idempotence, check mode, and degraded labs."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from ..conftest import ROOT, Lab, changed_counts

NETPLAN = "/etc/netplan/40-cx7.yaml"


# The results rdma_verify writes on the controller, apart from those of the labs that other
# workers run at the same time from this checkout.
ARTIFACTS = ROOT / "artifacts" / "lab-bare"


def ansible(lab: Lab, *args: str) -> subprocess.CompletedProcess[str]:
    return lab.run(
        *args,
        env={"ANSIBLE_STDOUT_CALLBACK": "default", "ANSIBLE_CALLBACK_RESULT_FORMAT": "json"},
    )


def playbook(lab: Lab, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return ansible(
        lab, "ansible-playbook", "-i", "inventory/lab", name,
        "-e", f"llmfleet_artifacts_dir={ARTIFACTS}", *extra,
    )  # fmt: skip


@pytest.fixture(scope="module")
def converged(lab: Lab) -> Lab:
    first = playbook(lab, "playbooks/fabric.yml")
    assert first.returncode == 0, first.stdout[-5000:]
    return lab


def test_fabric_converges_with_both_halves_addressed(converged: Lab) -> None:
    for node, number in (("spark-1", 11), ("spark-2", 12)):
        for netdev, subnet in (("enp1s0f1np1", "192.168.100"), ("enP2p1s0f1np1", "192.168.101")):
            info = json.loads(converged.out(node, f"ip -j addr show dev {netdev}"))[0]
            assert info["mtu"] == 9000
            assert f"{subnet}.{number}" in [a["local"] for a in info["addr_info"]]
        assert converged.out(node, f"stat -c %a {NETPLAN}").strip() == "600"


# Extended (76 s of make test's longest worker): the next test's converge is a second one
# too, which must change nothing on spark-1 and localhost and only the drifted MTU on spark-2.
@pytest.mark.extended
def test_second_converge_changes_nothing(converged: Lab) -> None:
    again = playbook(converged, "playbooks/fabric.yml")
    assert again.returncode == 0, again.stdout[-5000:]
    assert changed_counts(again.stdout) == {"spark-1": 0, "spark-2": 0, "localhost": 0}, (
        again.stdout[-3000:]
    )


# Extended (115 s): the fabric's roles run in check mode with --diff on a converged lab in
# make test as part of the test lab's site (test_lab_site.py), which walks fabric.yml.
@pytest.mark.extended
def test_check_diff_on_the_converged_lab_changes_nothing(converged: Lab) -> None:
    check = playbook(converged, "playbooks/fabric.yml", "--check", "--diff")
    assert check.returncode == 0, check.stdout[-5000:]
    assert changed_counts(check.stdout) == {"spark-1": 0, "spark-2": 0, "localhost": 0}, (
        check.stdout[-3000:]
    )


def test_an_interface_that_drifted_is_put_back(converged: Lab) -> None:
    """The netplan file is unchanged, but spark-2's MTU was set by hand: the next converge
    applies the configuration again on spark-2 alone."""
    converged.sh("spark-2", "ip link set enp1s0f1np1 mtu 1500")
    again = playbook(converged, "playbooks/fabric.yml")
    assert again.returncode == 0, again.stdout[-5000:]
    assert changed_counts(again.stdout) == {"spark-1": 0, "spark-2": 1, "localhost": 0}, (
        again.stdout[-3000:]
    )
    info = json.loads(converged.out("spark-2", "ip -j link show enp1s0f1np1"))[0]
    assert info["mtu"] == 9000


def test_rdma_results_are_saved_on_the_controller(converged: Lab) -> None:
    saved = sorted((ARTIFACTS / "rdma").glob("rdma-*.json"))
    assert saved
    data = json.loads(saved[-1].read_text())
    assert data["passed"] is True
    rails = {(r["test"], r["netdev"]): r for r in data["results"]}
    assert rails[("rail", "enp1s0f1np1")]["device"] == "rocep1s0f1"
    assert rails[("rail", "enp1s0f1np1")]["client"] == "spark-1"
    assert rails[("rail", "enp1s0f1np1")]["gbits"] >= 90
    assert data["aggregates"][0]["gbits"] >= 175


def test_a_link_down_fails_fabric_verify_naming_it(converged: Lab) -> None:
    try:
        converged.cli("link", "spark-2", "enP2p1s0f1np1", "down")
        time.sleep(1.5)
        run = playbook(converged, "playbooks/verify_fabric.yml", "-e", "llmfleet_rdma_verify=false")
        assert run.returncode != 0
        out = run.stdout
        assert "spark-2 enP2p1s0f1np1: RDMA device roceP2p1s0f1 port 1 DOWN, expected ACTIVE" in out
        # networkd drops the addresses of a link without carrier, on both ends of the cable
        assert (
            "spark-1 enP2p1s0f1np1 -> spark-2: spark-2 has no IPv4 address on enP2p1s0f1np1" in out
        )
        assert "spark-2 enP2p1s0f1np1: ethtool shows no speed, link detected no" in out
    finally:
        converged.cli("link", "spark-2", "enP2p1s0f1np1", "up")
    time.sleep(2)
    healthy = playbook(converged, "playbooks/verify_fabric.yml", "-e", "llmfleet_rdma_verify=false")
    assert healthy.returncode == 0, healthy.stdout[-3000:]


def test_a_slow_rail_fails_rdma_verify_naming_rail_and_number(converged: Lab) -> None:
    try:
        converged.cli("set", "ib_write_bw_gbits.roceP2p1s0f1=40")
        run = playbook(converged, "playbooks/verify_fabric.yml")
        assert run.returncode != 0
        assert (
            "rail enP2p1s0f1np1 (roceP2p1s0f1) spark-1 -> spark-2: 40.00 Gb/s, below the 90 Gb/s"
            " floor per rail" in run.stdout
        ), run.stdout[-4000:]
        assert "below the 175 Gb/s floor for both rails together" in run.stdout
    finally:
        converged.cli("set", "ib_write_bw_gbits.roceP2p1s0f1=105.8")


# Extended (111 s of make test's labs of their own, 2026-11-29): make test refuses the same
# value through the same validation play in test_lab_validation.py's matrix (case
# shared_subnet, which also finds every node's netplan files unchanged).
@pytest.mark.extended
def test_same_subnet_on_both_halves_is_refused_before_writing(converged: Lab) -> None:
    candidate = "/etc/netplan/41-refused.yaml"
    subnets = json.dumps({"enp1s0f1np1": "192.168.100.0/24", "enP2p1s0f1np1": "192.168.100.0/24"})
    run = playbook(
        converged,
        "playbooks/fabric.yml",
        "-e",
        json.dumps(
            {"llmfleet_fabric_subnets": json.loads(subnets), "cx7_network_netplan_file": candidate}
        ),
    )
    assert run.returncode != 0
    assert "enP2p1s0f1np1 and enp1s0f1np1 both use 192.168.100.0/24" in run.stdout
    for node in ("spark-1", "spark-2"):
        assert converged.sh(node, f"test -e {candidate}", check=False).returncode == 1


def test_rdma_counters_ad_hoc_see_100mb_cross_the_fabric(converged: Lab) -> None:
    def transmitted() -> int:
        run = ansible(
            converged,
            "ansible", "spark-1", "-i", "inventory/lab", "-o",
            "-m", "llmfleet.cluster.rdma_counters", "-a", "device=rocep1s0f1",
        )  # fmt: skip
        assert run.returncode == 0, run.stdout + run.stderr
        payload = json.loads(run.stdout.split("=>", 1)[1])
        return int(payload["counters"]["port_xmit_data"])

    converged.sh("spark-2", "nohup nc -l -p 5301 > /dev/null 2>&1 &")
    time.sleep(0.5)
    before = transmitted()
    converged.sh("spark-1", "head -c 100000000 /dev/zero | nc -N 192.168.100.12 5301", timeout=120)
    time.sleep(0.6)
    sent = transmitted() - before
    assert 100_000_000 <= sent <= 106_000_000, sent
