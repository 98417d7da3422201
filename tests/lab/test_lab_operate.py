"""`llmfleet status`, `logs` and `down` on the served lab: status shows both ranks as they are
(and a stopped rank as stopped), logs merge both hosts in time order and follow over SSH, down
keeps the last logs, stops and removes what runs, changes nothing the second time, purges the
configuration and the fabric addresses when asked, and `llmfleet up` serves again after it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from .conftest import ROOT, Lab, changed_counts, run_up
from .test_lab_site import chat, curl, wait_healthy

KEY = "llmfleet-lab-key"  # inventory/lab/group_vars/all/serving.yml
OURS = (
    "llmfleet-vllm.service",
    "llmfleet-vllm-probe.service",
    "llmfleet-vllm-rank-watchdog.service",
    "llmfleet-ray.service",
)


def status(lab: Lab, *args: str) -> dict:
    proc = lab.run("llmfleet", "status", "-i", "inventory/lab", "--json", *args, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout)


def units(host: dict) -> dict[str, dict]:
    return {unit["name"]: unit for unit in host["node"]["units"]}


def test_status_shows_the_head_serving_and_the_headless_rank(lab: Lab, site) -> None:
    hosts = status(lab)["hosts"]
    assert set(hosts) == {"spark-1", "spark-2"}
    head, rank1 = hosts["spark-1"], hosts["spark-2"]
    assert head["vllm"]["health"] == 200
    assert head["vllm"]["models"] == ["llmfleet-tiny"]
    assert (rank1["vllm"]["serves_api"], rank1["node"]["layout"]["headless"]) == (False, True)
    for host, rank in ((head, 0), (rank1, 1)):
        layout = host["node"]["layout"]
        assert (layout["tensor_parallel_size"], layout["nnodes"], layout["node_rank"]) == (
            2,
            2,
            rank,
        )
        assert units(host)["llmfleet-vllm.service"]["sub"] == "running"
        assert units(host)["llmfleet-ray.service"]["sub"] == "running"
        # Ray's own count, on each node of its cluster.
        assert (host["ray"]["ok"], int(host["ray"]["nodes"])) == (True, 2)
        (first, second) = host["node"]["links"]
        assert (first["name"], first["operstate"], first["mtu"]) == ("enp1s0f1np1", "up", 9000)
        # The lab's ethtool answers like a CX7 port at full rate.
        assert first["speed_mbps"] == 200000
        assert first["ipv4"] == [f"192.168.100.{11 + rank}/24"]
        assert second["name"] == "enP2p1s0f1np1"
        assert host["gpus"][0]["name"] == "NVIDIA GB10"
        assert host["node"]["serving"]["current"]["profile"] == "tiny_lab"
    # The watchdog runs on the headless rank only, the serving probe on rank 0 only; the
    # probe has seen this start of vLLM answer its warm-up requests.
    assert units(rank1)["llmfleet-vllm-rank-watchdog.service"]["active"] == "active"
    assert units(head)["llmfleet-vllm-rank-watchdog.service"]["installed"] is False
    assert units(head)["llmfleet-vllm-probe.service"]["sub"] == "running"
    assert units(rank1)["llmfleet-vllm-probe.service"]["installed"] is False
    assert head["node"]["probe"]["phase"] == "ready", head["node"]["probe"]
    assert head["node"]["probe"]["warmup_seconds"] > 0
    # What the node says about swap is what status says.
    swaps = lab.out("spark-1", "tail -n +2 /proc/swaps | wc -l").strip()
    assert (len(head["node"]["memory"]["swap_devices"]) > 0) == (swaps != "0")

    screen = lab.run("llmfleet", "status", "-i", "inventory/lab", env={"COLUMNS": "200"})
    assert screen.returncode == 0, screen.stderr[-3000:]
    # Plain (no terminal): one line of progress, then the table; the tasks are in the
    # run's artifacts.
    before = screen.stderr.splitlines()
    assert before[:1] == ["running status.yml (its tasks: -v)"] and len(before) <= 2, before
    assert "answers requests: llmfleet-tiny" in screen.stdout
    assert "headless rank 1 (API on 192.168.100.11)" in screen.stdout
    assert "2 of 2 nodes alive" in screen.stdout


def test_logs_merge_both_hosts_in_time_order_and_follow_over_ssh(lab: Lab, site) -> None:
    proc = lab.run("llmfleet", "logs", "-i", "inventory/lab", "-n", "40", timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line[:4].isdigit()]
    hosts = {line.split()[1] for line in lines}
    assert hosts == {"spark-1", "spark-2"}
    assert "llmfleet-vllm" in {line.split()[2] for line in lines}
    stamps = [line.split()[0] for line in lines]
    assert stamps == sorted(stamps)

    only = lab.run("llmfleet", "logs", "-i", "inventory/lab", "--host", "spark-2", "-n", "5")
    assert {line.split()[1] for line in only.stdout.splitlines() if line[:4].isdigit()} == {
        "spark-2"
    }
    future = lab.run("llmfleet", "logs", "-i", "inventory/lab", "--since", "2099-01-01")
    assert future.returncode == 0 and not [x for x in future.stdout.splitlines() if x[:4].isdigit()]

    follower = subprocess.Popen(
        ["llmfleet", "logs", "-i", "inventory/lab", "-n", "1", "--follow"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **lab.env(), "COLUMNS": "400"},
    )
    try:
        time.sleep(25)  # the listing, then the ssh streams
        code, _ = curl(lab, "/v1/chat/completions", f"Authorization: Bearer {KEY}", body=chat())
        assert code == 200
        time.sleep(5)
    finally:
        # TERM: a test started in the background inherits SIGINT ignored.
        follower.send_signal(signal.SIGTERM)
        out, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err[-3000:]
    # vLLM's access log line of the request, streamed after the listing.
    assert 'POST /v1/chat/completions HTTP/1.1" 200' in out, out[-3000:] + err[-2000:]


# Extended: a stop and a whole start again (8 of CI's 90 minutes, 2026-11-28); the units
# `down` stops are started and restarted by the site run and the fault matrix.
@pytest.mark.extended
def test_down_then_up(lab: Lab, site) -> None:
    down = lab.run("llmfleet", "down", "-i", "inventory/lab", "--plain", timeout=900)
    assert down.returncode == 0, down.stdout[-4000:] + down.stderr[-2000:]
    kept = down.stdout.split("The last logs: ")[-1].split()[0]
    text = (ROOT / kept).read_text()
    assert " spark-1 " in text and " spark-2 " in text
    for node in ("spark-1", "spark-2"):
        listed = lab.out(
            node, "systemctl list-unit-files --no-legend 'llmfleet-*' | awk '{print $1}'"
        )
        assert not set(OURS) & set(listed.split()), listed
        assert lab.sh(node, "pgrep -f 'vllm serv[e]'", check=False).returncode == 1
        # Without --purge, the configuration stays.
        lab.sh(node, "test -f /etc/llmfleet/vllm/serve.yaml")
    assert changed_counts(down.stdout)["spark-1"] > 0
    # claude-code-router on spark-1 stops too (its configuration stays without --purge).
    assert lab.sh("spark-1", f"test -e /etc/systemd/system/{ROUTER}", check=False).returncode
    lab.sh("spark-1", f"! pgrep -f {ROUTER_PROCESS} && test -f {ROUTER_CONFIG}/config.json")

    again = lab.run("llmfleet", "down", "-i", "inventory/lab", "--plain", timeout=900)
    assert again.returncode == 0, again.stdout[-4000:]
    assert changed_counts(again.stdout) == {"spark-1": 0, "spark-2": 0}

    purge = lab.run(
        "llmfleet", "down", "-i", "inventory/lab", "--plain", "--purge", "--purge-network",
        timeout=900,
    )  # fmt: skip
    assert purge.returncode == 0, purge.stdout[-4000:] + purge.stderr[-2000:]
    for node in ("spark-1", "spark-2"):
        lab.sh(node, "test ! -e /etc/llmfleet/vllm && test ! -e /etc/llmfleet/private")
        lab.sh(node, "test ! -e /etc/netplan/40-cx7.yaml")
        assert "192.168.100." not in lab.out(node, "ip -4 -o addr show dev enp1s0f1np1")
    lab.sh("spark-1", f"test ! -e {ROUTER_CONFIG}/config.json -a ! -e {ROUTER_CONFIG}/llmfleet.env")
    purge_again = lab.run(
        "llmfleet", "down", "-i", "inventory/lab", "--plain", "--purge", "--purge-network",
        timeout=900,
    )  # fmt: skip
    assert changed_counts(purge_again.stdout) == {"spark-1": 0, "spark-2": 0}, purge_again.stdout[
        -3000:
    ]

    up = run_up(lab)
    assert up.returncode == 0, up.stdout[-6000:] + up.stderr[-2000:]
    code, body = curl(lab, "/v1/chat/completions", f"Authorization: Bearer {KEY}", body=chat())
    assert code == 200, body
    assert lab.out("spark-1", f"systemctl is-active {ROUTER}").strip() == "active"


ROUTER = "llmfleet-claude-code-router.service"
ROUTER_CONFIG = "/root/.claude-code-router"  # the lab connects as root
# Its node process; bracketed so that the shell running pgrep does not match itself.
ROUTER_PROCESS = "'[c]laude-code-router/dist/cli.js'"


def doctor(lab: Lab, *args: str, skew: str | None = None) -> tuple[int, dict]:
    """`llmfleet doctor --json` on the lab; with `skew` (libfaketime's offset, "+30s") this
    machine's clock runs off by that much for the whole run: the nodes share this machine's
    kernel clock, so a clock that disagrees can only be put on the controller's side."""
    faked = ("faketime", "-f", skew) if skew else ()
    command = (*faked, "llmfleet", "doctor", "-i", "inventory/lab", "--json", *args)
    proc = lab.run(*command, timeout=900)
    assert proc.stdout, proc.stderr[-4000:]
    return proc.returncode, json.loads(proc.stdout)


def by_place(report: dict, field: str) -> dict[tuple[str, str], str]:
    """One field of every finding, by (check, host)."""
    return {(finding["check"], finding["host"]): finding[field] for finding in report["findings"]}


def problems(report: dict) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for finding in report["findings"]:
        if finding["status"] == "problem":
            found.setdefault(finding["check"], set()).add(finding["host"])
    return found


# The lab runs NCCL's Gloo transport; its RDMA devices are emulated from the links' real
# counters. Judged as an `ib` inventory, the RDMA checks apply to it as to a Spark over RoCE.
AS_ROCE = ("-e", "llmfleet_nccl_mode=ib")


def test_doctor_passes_on_the_healthy_lab(lab: Lab, site) -> None:
    # The inventory as it is, right after the site run: vLLM asks for 0.7 of each node's
    # memory, holds it, and the page cache holds much of the rest, which preflight drops
    # before vLLM restarts: nothing to fix.
    code, report = doctor(lab)
    assert (code, problems(report)) == (0, {}), report["findings"]
    assert by_place(report, "status")[("page_cache", "spark-1")] == "ok", report["findings"]
    code, report = doctor(lab, *AS_ROCE)
    assert (code, problems(report)) == (0, {}), report["findings"]
    # The GID index an `ib` launch writes, as the device has it now.
    index = {doc["host"]: doc["rdma"]["gid_index"] for doc in report["evidence"]}
    for node in ("spark-1", "spark-2"):
        lab.sh(node, f"cp {NCCL_ENV} /tmp/nccl.env.kept && "
                     f"echo NCCL_IB_GID_INDEX={index[node]} >> {NCCL_ENV}")  # fmt: skip
    try:
        code, report = doctor(lab, *AS_ROCE)
    finally:
        for node in ("spark-1", "spark-2"):
            lab.sh(node, f"cp /tmp/nccl.env.kept {NCCL_ENV}")
    assert (code, problems(report)) == (0, {}), report["findings"]
    checks = {f["check"] for f in report["findings"] if f["status"] == "ok"}
    # All but ray_client: the lab runs the mp executor, no ray:// client to look for.
    assert checks == {check for check in ALL_CHECKS if check != "ray_client"}
    traffic = {host for check, host in by_place(report, "evidence") if check == "rdma_traffic"}
    assert traffic == {"spark-1", "spark-2"}

    # Judged as a Ray executor's launch (the test lab serves on the native path, mp):
    # no ray:// client. With this machine's clock 30 s ahead: every node is behind.
    _, skewed = doctor(lab, "-e", "llmfleet_vllm_executor=ray", skew="+30s")
    verdicts = by_place(skewed, "status")
    for node in ("spark-1", "spark-2"):
        assert verdicts[("ray_client", node)] == "ok", skewed["findings"]
        assert verdicts[("clock", node)] == "problem", skewed["findings"]
    evidence = by_place(skewed, "evidence")
    assert float(evidence[("clock", "spark-2")].split()[0]) < -25, evidence[("clock", "spark-2")]


ALL_CHECKS = {
    "ray_client", "ranks", "generation", "socket_interface", "rdma_traffic", "peer_links",
    "link_rate", "gid_index", "swap", "page_cache", "versions", "ray_settings", "clock",
}  # fmt: skip
NCCL_ENV = "/etc/llmfleet/nccl.env"
VLLM_METADATA = "$(ls -d /opt/vllm/lib/python3*/site-packages/vllm-*.dist-info)/METADATA"
# 64 MiB of real swap on a loop device: the nodes share the machine's kernel, so both see it.
SWAP_ON = (
    "dd if=/dev/zero of=/var/tmp/doctor.swap bs=1M count=64 status=none && "
    "mkswap -q /var/tmp/doctor.swap && losetup -f --show /var/tmp/doctor.swap > /tmp/doctor.loop"
    " && swapon $(cat /tmp/doctor.loop)"
)
SWAP_OFF = (
    "swapoff $(cat /tmp/doctor.loop); losetup -d $(cat /tmp/doctor.loop); "
    "rm -f /var/tmp/doctor.swap /tmp/doctor.loop"
)


def test_doctor_finds_a_rail_down_an_mtu_mismatch_a_stale_gid_swap_and_a_mixed_vllm(
    lab: Lab, site
) -> None:
    lab.sh("spark-1", "ip link set dev enP2p1s0f1np1 down")
    lab.sh("spark-2", "ip link set dev enP2p1s0f1np1 mtu 1500")
    lab.sh("spark-1", f"cp {NCCL_ENV} /tmp/nccl.env.kept && echo NCCL_IB_GID_INDEX=7 >> {NCCL_ENV}")
    lab.sh("spark-1", SWAP_ON)
    lab.sh("spark-2", f"cp {VLLM_METADATA} /tmp/vllm-metadata.kept && "
                      f"sed -i 's/^Version: .*/Version: 0.0.1/' {VLLM_METADATA}")  # fmt: skip
    try:
        code, report = doctor(
            lab,
            *AS_ROCE,
            # What the inventory asks for differs from what runs: a utilisation the node
            # cannot give (all of its memory, page cache and what vLLM holds counted), a
            # memory monitor threshold Ray was not started with.
            "-e", "llmfleet_gpu_memory_utilization=1.0",
            "-e", '{"ray_node_env": {"RAY_memory_usage_threshold": "0.9"}}',
        )  # fmt: skip
    finally:
        lab.sh("spark-1", "ip link set dev enP2p1s0f1np1 up")
        lab.sh("spark-2", "ip link set dev enP2p1s0f1np1 mtu 9000")
        lab.sh("spark-1", "cp /tmp/nccl.env.kept /etc/llmfleet/nccl.env")
        lab.sh("spark-2", f"cp /tmp/vllm-metadata.kept {VLLM_METADATA}")
        lab.sh("spark-1", SWAP_OFF)
    assert code == 2
    assert problems(report) == {
        # The other end of a port that goes down loses its link too.
        "link_rate": {"spark-1", "spark-2"},
        "peer_links": {"spark-1", "spark-2"},
        "gid_index": {"spark-1"},
        "swap": {"spark-1", "spark-2"},
        "versions": {"spark-1"},
        "page_cache": {"spark-1", "spark-2"},
        "ray_settings": {"spark-1", "spark-2"},
    }, report["findings"]
    evidence = by_place(report, "evidence")
    assert "enP2p1s0f1np1 down (rail down)" in evidence[("link_rate", "spark-1")]
    assert "enP2p1s0f1np1 MTU 1500 here, 9000 on spark-1" in evidence[("peer_links", "spark-2")]
    assert "NCCL_IB_GID_INDEX=7" in evidence[("gid_index", "spark-1")]
    assert "spark-2 0.0.1" in evidence[("versions", "spark-1")]
    assert "RAY_memory_usage_threshold=0.97 (expected 0.9)" in evidence[("ray_settings", "spark-1")]


# Extended: about 15 minutes of CI's machine (2026-11-28: two ranks stopped and started on
# the wrong interfaces, then the site run that puts them back). make test stops ranks in the
# heal matrix (test_lab_heal) and runs doctor on the faults of the test above; the findings
# for interfaces, counters and a ray:// address are unit-tested (doctor_findings).
@pytest.mark.extended
def test_a_stopped_rank_then_gloo_on_the_management_network(lab: Lab, site) -> None:
    """One break-and-repair cycle of the ranks for four things to see: status and doctor on
    a stopped rank and the API it took down, then, with both ranks started again on Gloo and
    NCCL bound to the management network and rank 0 given a ray:// address, the doctor's
    interface, RDMA counter and Ray client checks."""
    wrong_interface = (
        "s/^GLOO_SOCKET_IFNAME=.*/GLOO_SOCKET_IFNAME=eth0/;"
        "s/^NCCL_SOCKET_IFNAME=.*/NCCL_SOCKET_IFNAME=eth0/"
    )
    for node in ("spark-1", "spark-2"):
        lab.sh(node, f"cp {NCCL_ENV} /tmp/nccl.env.kept && sed -i '{wrong_interface}' {NCCL_ENV}")
    lab.sh("spark-2", "systemctl stop llmfleet-vllm-rank-watchdog llmfleet-vllm")
    try:
        # Rank 0 finds the other rank gone at its next request (HTTP 500, then it exits).
        code, _ = curl(lab, "/v1/chat/completions", f"Authorization: Bearer {KEY}", body=chat())
        assert code != 200
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            hosts = status(lab)["hosts"]
            if hosts["spark-1"]["vllm"]["health"] != 200:
                break
            time.sleep(10)
        assert units(hosts["spark-2"])["llmfleet-vllm.service"]["active"] == "inactive"
        assert hosts["spark-1"]["vllm"]["health"] != 200, hosts["spark-1"]["vllm"]
        assert hosts["spark-1"]["vllm"]["health_error"]
        # The doctor names both sides: the rank that runs nothing, the API it took down.
        code, stopped = doctor(lab)
        # Rank 0 started again with seed 004's RAY_ADDRESS=ray://... in its environment.
        lab.sh("spark-1", f"mkdir -p {RAY_CLIENT_DROPIN.rsplit('/', 1)[0]} && printf "
                          f"'[Service]\\nEnvironment=RAY_ADDRESS={RAY_CLIENT}\\n' "
                          f"> {RAY_CLIENT_DROPIN} && systemctl daemon-reload")  # fmt: skip
        restart_ranks(lab)
        code_wrong, wrong = doctor(lab, *AS_ROCE)
        _, as_ray = doctor(lab, "-e", "llmfleet_vllm_executor=ray")
    finally:
        for node in ("spark-1", "spark-2"):
            lab.sh(node, f"cp /tmp/nccl.env.kept {NCCL_ENV}")
        lab.sh("spark-1", f"rm -f {RAY_CLIENT_DROPIN} && systemctl daemon-reload")
        restart_ranks(lab)
    assert code == 2
    evidence = by_place(stopped, "evidence")
    assert "no `vllm serve` process" in evidence[("ranks", "spark-2")]
    assert "does not answer /health" in evidence[("ranks", "spark-1")]

    assert code_wrong == 2
    found = problems(wrong)
    assert found["socket_interface"] == {"spark-1", "spark-2"}, wrong["findings"]
    assert found["rdma_traffic"] == {"spark-1", "spark-2"}, wrong["findings"]
    evidence = by_place(wrong, "evidence")
    assert "GLOO_SOCKET_IFNAME=eth0" in evidence[("socket_interface", "spark-2")]
    assert "background traffic only" in evidence[("rdma_traffic", "spark-1")]

    verdicts = by_place(as_ray, "status")
    assert (verdicts[("ray_client", "spark-1")], verdicts[("ray_client", "spark-2")]) == (
        "problem",
        "ok",
    )
    assert (
        f"with RAY_ADDRESS={RAY_CLIENT}" in by_place(as_ray, "evidence")[("ray_client", "spark-1")]
    )


RAY_CLIENT = "ray://192.168.100.11:10001"
RAY_CLIENT_DROPIN = "/etc/systemd/system/llmfleet-vllm.service.d/50-ray-client.conf"


def restart_ranks(lab: Lab) -> None:
    """Both ranks again, rank 0 first (the headless rank's watchdog follows it)."""
    lab.sh("spark-2", "systemctl stop llmfleet-vllm-rank-watchdog llmfleet-vllm")
    lab.sh("spark-1", "systemctl restart llmfleet-vllm")
    lab.sh("spark-2", "systemctl start llmfleet-vllm llmfleet-vllm-rank-watchdog")
    wait_healthy(lab)
