"""The lab on the path the Spark sample renders (inventory/sparks), a 2-node lab's default
(`llmfleet lab up`, `make demo`): Ray in a container on every node (the node's Docker, its
environment given at creation), vLLM started inside the Ray head container with vLLM's Ray
executor, tensor parallel 2 across spark-1 and spark-2 (inventory/lab/group_vars/all/
serving_path.yml; the lab's platform plugin gives vLLM's CPU build Ray's GPU key,
lab/src/llmfleet_lab/assets/image/ray-platform).

On a 2-node lab of its own, served on this path from its first run (as a user's fresh
Sparks are), in the worker of the labs of their own (tests/conftest.py): it serves, a second
`llmfleet up` stops after one call per host, a change of variables alone walks only the tags
it reaches, then a file changed by hand is named and put back by a walk of everything that
changes nothing else (so the limited walk had left every host as a full one would) and whose
utilization-based memory check passes (Ray's workers hold rank 1's memory on spark-2, where
no vLLM runs), a parser name the image's vLLM does not know is
refused by the check, a reboot of spark-2 heals by itself, then day two in
one run and one stop: a configuration change restarts the whole group, a vLLM that ignores
SIGTERM is killed, and the GID index vLLM starts with follows a GID table that moved. Then
`llmfleet upgrade` of the image (Ray's containers', vLLM's in the head's): one whose vLLM
refuses its arguments is rolled back by itself; with -m extended, a good one sticks through
the benchmark gate and the images beyond the last ones that served go. Its Claude Code,
RDMA and benchmark results go to folders of their own, as the gateway lab's do.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import pytest
import yaml
from llmfleet_lab import fault_cases, faults
from rich.console import Console

from .conftest import ROOT, TEST_LAB, Lab, changed_counts, llmfleet, run_up
from .test_lab_operate import status

RAY_LAB = f"{TEST_LAB}-ray"
ARTIFACTS = ROOT / "artifacts" / "lab-ray"
KEY = "llmfleet-lab-key"  # inventory/lab/group_vars/all/serving.yml


def chat(lab: Lab) -> dict:
    body = json.dumps(
        {"model": "llmfleet-tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    )
    return json.loads(
        lab.out(
            "spark-1",
            f"curl -sf --max-time 60 -H 'Authorization: Bearer {KEY}'"
            f" -H 'Content-Type: application/json'"
            f" -d '{body}' http://127.0.0.1:8000/v1/chat/completions",
        )
    )


def wait_answering(lab: Lab, seconds: float) -> None:
    """Until spark-1's API answers a chat request (the probe's verdict may still be the one
    of before a restart)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if chat(lab)["choices"]:
                return
        except AssertionError:
            pass
        time.sleep(3)
    raise AssertionError(f"spark-1 did not answer within {seconds:.0f} s")


def vllm_pids(lab: Lab) -> set[str]:
    """The pids (in the Ray head container) of `vllm serve` processes."""
    out = lab.sh(
        "spark-1", "docker exec llmfleet-ray pgrep -f 'vllm serve --config'", check=False
    ).stdout
    return set(out.split())


@pytest.fixture(scope="module")
def client_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ray-client")


@pytest.fixture(scope="module")
def ray_lab(client_dir: Path) -> Iterator[Lab]:
    """A fresh 2-node lab, served on the Ray path by its first run."""
    llmfleet("lab", "down", "--name", RAY_LAB)
    llmfleet("lab", "up", "--name", RAY_LAB)  # the default path of 2 nodes
    lab = Lab(RAY_LAB)
    try:
        up = run_up(lab, *client_args(client_dir))
        assert up.returncode == 0, up.stdout[-6000:]
        yield lab
    finally:
        llmfleet("lab", "down", "--name", RAY_LAB)


def client_args(client_dir: Path) -> tuple[str, ...]:
    return (
        "-e", f"llmfleet_artifacts_dir={ARTIFACTS}",
        "-e", f"claude_code_bin_dir={client_dir / 'bin'}",
        "-e", f"claude_code_install_dir={client_dir / 'claude-code'}",
    )  # fmt: skip


def test_vllm_serves_inside_the_ray_head_container_with_the_ray_executor(ray_lab: Lab) -> None:
    lab = ray_lab
    # The path of a 2-node lab unless told otherwise, kept on its nodes.
    lab_status = json.loads(llmfleet("lab", "status", "--json", "--name", lab.name))
    assert lab_status["serving_path"] == "ray-container", lab_status
    config = yaml.safe_load(lab.out("spark-1", "cat /etc/llmfleet/vllm/serve.yaml"))
    assert config["distributed-executor-backend"] == "ray", config
    assert config["tensor-parallel-size"] == 2, config
    # spark-1: `vllm serve` runs in the Ray head container (a process of its PID namespace).
    head = lab.out("spark-1", "docker exec llmfleet-ray ps -eo args")
    assert "vllm serve --config" in head, head
    assert "ray start --block" in head and "--head" in head, head
    # spark-2 runs no vLLM of its own: rank 1 is a worker of Ray's, in its Ray container.
    worker = lab.out("spark-2", "docker exec llmfleet-ray ps -eo args")
    assert "vllm serve" not in worker and "RayWorkerProc" in worker, worker
    assert lab.sh("spark-2", "systemctl is-active llmfleet-vllm", check=False).returncode != 0
    # The environment is given at creation, as the sample renders it: Gloo over the fabric
    # link, Ray's token, one GPU declared per node (Ray cannot detect the emulated GB10).
    for node in ("spark-1", "spark-2"):
        created = json.loads(lab.out(node, "docker inspect llmfleet-ray"))[0]
        env = dict(item.split("=", 1) for item in created["Config"]["Env"])
        assert env.get("GLOO_SOCKET_IFNAME") == "enp1s0f1np1", env
        assert env.get("RAY_AUTH_MODE") == "token", env
        assert "--num-gpus" in created["Args"], created["Args"]
    resources = lab.out(
        "spark-1",
        "docker exec llmfleet-ray python3 -c 'import ray; ray.init(); "
        'print(ray.cluster_resources().get("GPU"))\'',
    )
    assert resources.strip().splitlines()[-1] == "2.0", resources
    assert chat(lab)["choices"], "no answer"

    hosts = status(lab)["hosts"]
    head_layout = hosts["spark-1"]["node"]["layout"]
    assert head_layout["distributed_executor_backend"] == "ray", head_layout
    assert hosts["spark-2"]["ray"]["container"] == "llmfleet-ray", hosts["spark-2"]["ray"]


FIREWALL_RULES = "/etc/llmfleet/firewall.nft"  # cluster_firewall_rules_file


def test_a_second_run_on_the_ray_path_changes_nothing(ray_lab: Lab, client_dir: Path) -> None:
    # Right after the fixture's full run, one call per host finds every host as it left them.
    again = run_up(ray_lab, *client_args(client_dir))
    assert again.returncode == 0, again.stdout[-6000:]
    assert "Nothing changed since the last full run" in again.stdout, again.stdout[-6000:]
    assert "Check the whole inventory" not in again.stdout, again.stdout[-6000:]


def changed_roles(output: str) -> dict[str, set[str]]:
    """Per host, the roles of the tasks that changed something (`--plain`'s lines), a task of
    a play's own by its name; the record of the run (written where a host changed) left out."""
    found: dict[str, set[str]] = {}
    for host, label in re.findall(r"^\[([\w.-]+)\] changed: (.*)$", output, re.M):
        role, colon, _ = label.partition(" : ")
        if not label.startswith("Record the state this"):
            found.setdefault(host, set()).add(role if colon else label)
    return found


def test_a_change_of_variables_walks_only_what_it_reaches(ray_lab: Lab, client_dir: Path) -> None:
    """Right after a run that recorded, only a variable changes (Prometheus' scrape interval):
    `llmfleet up` walks the tags it reaches (llmfleet.reach), monitoring's alone (Prometheus'
    targets come from the inventory), the checks included, and not the fabric, the
    firewall, vLLM or the clients. Then a file the run manages is changed by hand on
    spark-2: the comparison names it and the whole of site.yml is walked with the same
    variable. It puts the file back and changes nothing else on any host, so the limited walk
    had left every host as a full one would have. That walk is also a re-run on a Ray cluster,
    with the utilization check of the lab inventory (0.7 of the node's memory): Ray's workers
    hold rank 1's share on spark-2, where no vLLM runs."""
    lab = ray_lab
    interval = ("-e", json.dumps({"monitoring_scrape_interval": "10s"}))
    limited = run_up(lab, *client_args(client_dir), *interval)
    assert limited.returncode == 0, limited.stdout[-6000:]
    output = " ".join(limited.stdout.split())
    assert "the inputs changed since run" in output and "monitoring_scrape_interval" in output
    assert "walking the tasks they reach (--tags monitoring)" in output, limited.stdout[:6000]
    assert "Check the Spark cluster's settings" in limited.stdout, limited.stdout[-6000:]
    for unwalked in (
        "Turn IPv6 off on the fabric interfaces",
        "Install Claude Code from npm",
        "Publish the endpoint for the plays and roles that follow",
        "Write Ray's environment",
    ):
        assert unwalked not in limited.stdout, limited.stdout[-6000:]
    prometheus = lab.out("spark-1", "grep -m1 scrape_interval /etc/prometheus/prometheus.yml")
    assert prometheus.split() == ["scrape_interval:", "10s"], prometheus
    jobs = lab.out("spark-1", "grep -A3 'job_name: vllm' /etc/prometheus/prometheus.yml")
    assert f"{lab.management_ip('spark-1')}:8000" in jobs, jobs  # vLLM's head, from the inventory

    lab.sh("spark-2", f"echo '# by hand' >> {FIREWALL_RULES}")
    walked = run_up(lab, *client_args(client_dir), *interval)
    assert walked.returncode == 0, walked.stdout[-6000:]
    assert f"spark-2: {FIREWALL_RULES}: its content changed" in walked.stdout, walked.stdout[:6000]
    assert "walking the tasks they reach" not in walked.stdout, walked.stdout[:6000]
    assert "Install Claude Code from npm" in walked.stdout, walked.stdout[-6000:]
    assert "# by hand" not in lab.out("spark-2", f"cat {FIREWALL_RULES}")
    changed = changed_counts(walked.stdout)
    assert changed["spark-1"] == 0 and changed["localhost"] == 0, walked.stdout[-6000:]
    assert changed["spark-2"] > 0, walked.stdout[-6000:]
    assert changed_roles(walked.stdout) == {"spark-2": {"cluster_firewall"}}, walked.stdout


def test_a_parser_the_images_vllm_does_not_know_is_refused_by_the_check(ray_lab: Lab) -> None:
    # The image's vLLM is looked into before any change (its parsers read from its source):
    # a name it does not register failed `vllm serve` in the head's container after the stop.
    bad = json.dumps({"vllm_server_profile_overrides": {"tool_call_parser": "hermess"}})
    proc = ray_lab.run(
        "llmfleet", "check", "-i", "inventory/lab", "--plain", "-e", bad, timeout=600
    )  # fmt: skip
    output = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == 2, output[-4000:]
    for node in ("spark-1", "spark-2"):
        assert (
            f"{node}: image localhost/llmfleet-lab/vllm-ray:lab lacks what this launch needs:"
            " vLLM 0.32.0+cpu has no --tool-call-parser hermess (did you mean hermes?"
        ) in output, output[-4000:]


# DGX OS networking (the lab image's dgx-os-networking/): NetworkManager renders the
# management port from a netplan file of the system's, under the global renderer of
# 01-network-manager-all.yaml; our CX7 file names its renderer per device.
CX7_ADDRESSES = {
    "spark-1": {"enp1s0f1np1": "192.168.100.11/24", "enP2p1s0f1np1": "192.168.101.11/24"},
    "spark-2": {"enp1s0f1np1": "192.168.100.12/24", "enP2p1s0f1np1": "192.168.101.12/24"},
}


def assert_dgx_os_networking_intact(lab: Lab, node: str) -> None:
    """The management port stays NetworkManager's (connected, not networkd's), the CX7 links
    are networkd's (NetworkManager leaves them) with their addresses, and the system's
    netplan file is as DGX OS wrote it."""
    nm = {
        fields[0]: fields[1:]
        for fields in (
            line.split(":")
            for line in lab.out(node, "nmcli -t -f DEVICE,STATE,CONNECTION device").splitlines()
        )
    }
    assert nm["eth0"] == ["connected", "netplan-eth0"], (node, nm)
    networkd = {
        fields[1]: fields[3:]
        for fields in (
            line.split() for line in lab.out(node, "networkctl list --no-legend").splitlines()
        )
    }
    assert networkd["eth0"][-1] == "unmanaged", (node, networkd)
    for netdev, address in CX7_ADDRESSES[node].items():
        assert nm[netdev][0] == "unmanaged", (node, netdev, nm)
        assert networkd[netdev][-1] in {"configured", "configuring"}, (node, netdev, networkd)
        shown = lab.out(node, f"ip -o -4 addr show dev {netdev}")
        assert f" {address} " in shown, (node, netdev, shown)
    system_file = lab.out(node, "cat /etc/netplan/01-network-manager-all.yaml")
    assert "renderer: NetworkManager" in system_file, system_file
    ours = lab.out(node, "cat /etc/netplan/40-cx7.yaml")
    assert "\n  renderer:" not in ours and "renderer: networkd" in ours, ours
    assert "optional: true" in ours, ours


def test_dgx_os_networking_is_left_as_it_was_by_the_run(ray_lab: Lab) -> None:
    for node in ("spark-1", "spark-2"):
        assert_dgx_os_networking_intact(ray_lab, node)


def test_a_reboot_of_the_ray_worker_node_heals_by_itself(ray_lab: Lab) -> None:
    lab = ray_lab
    # spark-2 reboots: its Ray container comes back with Docker, the engine on spark-1 lost
    # its rank 1 and is restarted; no person, no 500 once the heal began.
    fault_lab = faults.Lab(lab.name, Console())
    case = fault_cases.Case(
        "reboot_ray_worker", "spark-2 (Ray's rank 1) rebooted", fault_cases.reboot("spark-2"), 240
    )
    result = faults.measure(fault_lab, case)
    print(json.dumps(asdict(result), indent=1))
    assert result.within_bound, result
    assert result.http_500_after_heal == 0, result
    assert result.heals, result
    assert chat(lab)["choices"], "no answer"
    # DGX OS networking came back as it was, the CX7 links with their addresses.
    assert_dgx_os_networking_intact(lab, "spark-2")


def ray_worker_pids(lab: Lab) -> set[str]:
    """The pids (in spark-2's Ray container) of Ray's workers that hold vLLM's rank 1."""
    out = lab.sh("spark-2", "docker exec llmfleet-ray pgrep -f RayWorkerProc", check=False).stdout
    return set(out.split())


# A vLLM process that ignores SIGTERM (as a vLLM still starting does), inside the Ray head
# container: the `vllm` first on the container's PATH (the node's /opt/vllm, mounted) ignores
# SIGTERM, starts the real vLLM as its child and stays after it. Its command line holds
# `vllm serve --config`, what the stop looks for, so the stop finds it with vLLM's own
# processes; they end on SIGTERM, it does not, and only SIGKILL ends it. (vLLM's own
# processes could not be made deaf here: with SIGTERM ignored in vLLM's main process, the
# three of them were gone 9.5 s after SIGTERM all the same.) The real script moves to
# bin/real/.
DEAF_VLLM = """#!/opt/vllm/bin/python
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
subprocess.call(["/opt/vllm/bin/real/vllm", *sys.argv[1:]])
while True:
    time.sleep(3600)
"""
INSTALL_DEAF_VLLM = (
    "mkdir -p /opt/vllm/bin/real && mv /opt/vllm/bin/vllm /opt/vllm/bin/real/vllm"
    f" && cat > /opt/vllm/bin/vllm <<'EOF'\n{DEAF_VLLM}EOF\n"
    "chmod 0755 /opt/vllm/bin/vllm"
)
REMOVE_DEAF_VLLM = (
    "test -x /opt/vllm/bin/real/vllm && mv -f /opt/vllm/bin/real/vllm /opt/vllm/bin/vllm"
    " && rmdir /opt/vllm/bin/real"
)


# spark-1's fabric addresses and the emulated RDMA device of each (fabric.yml).
FABRIC = {"enp1s0f1np1": "192.168.100.11/24", "enP2p1s0f1np1": "192.168.101.11/24"}
# The emulator rebuilds the GID tables every second (llmfleet-lab-rdmad --state-interval).
GID_SETTLE_S = 2.5


def vllm_gid_index(lab: Lab) -> str:
    """NCCL_IB_GID_INDEX in the environment of spark-1's `vllm serve` (in the Ray head
    container), "" when it has none."""
    environ = lab.out(
        "spark-1",
        "docker exec llmfleet-ray sh -c"
        ' \'tr "\\0" "\\n" < /proc/$(pgrep -of "[v]llm serve --config")/environ\'',
    )
    found = [line.split("=", 1)[1] for line in environ.splitlines()
             if line.startswith("NCCL_IB_GID_INDEX=")]  # fmt: skip
    return found[0] if found else ""


def sigterm_ignored(lab: Lab) -> bool:
    """Whether spark-1's DEAF_VLLM runs and ignores SIGTERM (its command line is
    bin/vllm's, the real vLLM's bin/real/vllm's; [b]: the pattern does not match the shell
    that runs it)."""
    status = lab.out(
        "spark-1",
        "docker exec llmfleet-ray sh -c"
        " 'grep SigIgn /proc/$(pgrep -of \"[b]in/vllm serve --config\")/status'",
    )
    return bool(int(status.split()[-1], 16) & (1 << (15 - 1)))


def move_gid_tables(lab: Lab) -> None:
    """What a reboot can do: the fabric addresses come up after other ones, their RoCE v2
    entries in slots 4 and 5 instead of 2 and 3 (each step seen by the emulator)."""
    for step in ("del {address} dev {netdev}", "add 10.254.{n}.1/32 dev {netdev}",
                 "add {address} dev {netdev}", "del 10.254.{n}.1/32 dev {netdev}"):  # fmt: skip
        lab.sh("spark-1", "; ".join(
            "ip addr " + step.format(address=address, netdev=netdev, n=n)
            for n, (netdev, address) in enumerate(FABRIC.items())
        ) + f"; sleep {GID_SETTLE_S}")  # fmt: skip


def test_a_deaf_vllm_is_killed_and_the_gid_index_follows_a_moved_table(ray_lab: Lab) -> None:
    """NCCL is judged as RoCE over the emulated RDMA devices on this path, as on the Sparks
    (the lab inventory). A vLLM that ignores SIGTERM (as a vLLM still starting does) is killed
    after vllm_server_stop_timeout and the port is free; the GID index vLLM starts with is
    read at that start (the containers' environment carries none), so it follows a GID table
    that moved while vLLM was down."""
    lab = ray_lab
    env = started_with(lab, "spark-1")["env"]
    assert not [e for e in env if e.startswith("NCCL_IB_GID_INDEX=")], env
    lab.sh("spark-1", INSTALL_DEAF_VLLM)
    try:
        lab.sh("spark-1", "systemctl restart llmfleet-vllm", timeout=300)
        wait_answering(lab, 300)
        assert sigterm_ignored(lab)
        # The index of the fabric address's RoCE v2 entry now (slots 2 and 3).
        assert vllm_gid_index(lab) == "3"

        # The stop a run, a heal or a person makes: systemd stops the exec, the stop script
        # sends SIGTERM in the container, waits vllm_server_stop_timeout (20 s), then SIGKILL.
        since = lab.out("spark-1", "date '+%Y-%m-%d %H:%M:%S'").strip()
        lab.sh("spark-1", "systemctl stop llmfleet-vllm", timeout=300)
        journal = lab.out(
            "spark-1", f"journalctl -u llmfleet-vllm --since '{since}' -o cat --no-pager"
        )
        killed = "still running 20 s after SIGTERM (vllm_server_stop_timeout): SIGKILL to"
        assert killed in journal, journal[-4000:]
        assert "port 8000 is free" in journal, journal[-4000:]
        assert not vllm_pids(lab), "vLLM is still there"

        move_gid_tables(lab)
        types = lab.out(
            "spark-1",
            "cat /run/llmfleet-lab/sysfs/class/infiniband/rocep1s0f1/ports/1/gid_attrs/types/5",
        )
        assert types.strip() == "RoCE v2", types
    finally:
        lab.sh("spark-1", REMOVE_DEAF_VLLM, check=False)
        lab.sh("spark-1", "systemctl start llmfleet-vllm", timeout=300, check=False)
    wait_answering(lab, 300)
    assert vllm_gid_index(lab) == "5"


# Extended: a run and a restart of the group on the Ray path (about 7 minutes of make test);
# the group's restart in vLLM's order is walked in make test by the reboot of the worker node
# here and by the test lab's fault matrix. A change restarting the group is walked only here.
@pytest.mark.extended
def test_a_change_restarts_the_whole_group_on_the_ray_path(ray_lab: Lab, client_dir: Path) -> None:
    """A configuration change (another max_num_seqs) restarts the whole group: vLLM in the
    head container and Ray's worker that holds rank 1."""
    lab = ray_lab
    before_head, before_worker = vllm_pids(lab), ray_worker_pids(lab)
    assert before_head and before_worker
    changed = {"vllm_server_profile_overrides": {"max_num_seqs": 4}}
    up = run_up(lab, *client_args(client_dir), "-e", json.dumps(changed))
    assert up.returncode == 0, up.stdout[-6000:]
    config = yaml.safe_load(lab.out("spark-1", "cat /etc/llmfleet/vllm/serve.yaml"))
    assert config["max-num-seqs"] == 4, config
    wait_answering(lab, 300)
    assert vllm_pids(lab) and not vllm_pids(lab) & before_head, "vLLM did not restart"
    assert ray_worker_pids(lab) and not ray_worker_pids(lab) & before_worker, "rank 1 did not"


# vLLM's image on this path is the Ray containers' (vLLM runs in the head container): the
# lab's runtime image (`llmfleet lab build`, loaded into every node's Docker at boot, no
# registry digest, so the lab allows floating references). Version 2 differs from it by a
# label only; the broken one finds, first on its PATH, a `vllm` that refuses its arguments
# the way vLLM does, and exits.
RAY_IMAGE = "localhost/llmfleet-lab/vllm-ray"
# The runtime image's PATH (Containerfile.runtime).
RUNTIME_PATH = "/opt/vllm/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MAKE_IMAGES = rf"""
set -e
docker image inspect {RAY_IMAGE}:2 {RAY_IMAGE}:broken >/dev/null 2>&1 && exit 0
docker rm -f llmfleet-lab-build >/dev/null 2>&1 || true
docker create --name llmfleet-lab-build {RAY_IMAGE}:lab true >/dev/null
docker commit --change 'LABEL llmfleet.lab.version=2' llmfleet-lab-build {RAY_IMAGE}:2 >/dev/null
docker rm llmfleet-lab-build >/dev/null
docker run --name llmfleet-lab-build --entrypoint /bin/sh {RAY_IMAGE}:lab -c '
  mkdir -p /broken
  printf "#!/bin/sh\necho \"vllm: error: unrecognized arguments: %s\" >&2\nexit 2\n" \
    --llmfleet-lab-broken > /broken/vllm
  chmod 0755 /broken/vllm'
docker commit \
  --change 'ENV PATH=/broken:{RUNTIME_PATH}' \
  llmfleet-lab-build {RAY_IMAGE}:broken >/dev/null
docker rm llmfleet-lab-build >/dev/null
"""
NODES = ("spark-1", "spark-2")


def upgrade(lab: Lab, *args: str) -> subprocess.CompletedProcess[str]:
    return lab.run(
        "llmfleet", "upgrade", "-i", "inventory/lab", "--plain",
        "-e", f"llmfleet_artifacts_dir={ARTIFACTS}", *args, timeout=1800,
    )  # fmt: skip


def ray_image(lab: Lab, node: str) -> str:
    """The image id of the node's Ray container (vLLM's, in the head's)."""
    return lab.out(node, "docker inspect -f '{{.Image}}' llmfleet-ray").strip()


def image_id(lab: Lab, node: str, reference: str) -> str:
    return lab.out(node, f"docker image inspect -f '{{{{.Id}}}}' {reference}").strip()


def started_with(lab: Lab, node: str) -> dict:
    """What Ray's container (and, on spark-1, vLLM's unit) starts with: the command, the
    environment (the NCCL / Gloo variables are given at the container's creation) and the
    unit's ExecStart (the wrapper that reads the GID index at start)."""
    container = json.loads(lab.out(node, "docker inspect llmfleet-ray"))[0]
    unit = lab.out(node, "systemctl cat llmfleet-vllm 2>/dev/null | grep '^ExecStart=' || true")
    return {
        "command": [container["Path"], *container["Args"]],
        "env": sorted(container["Config"]["Env"]),
        "unit": unit.strip(),
    }


def switches(lab: Lab, node: str) -> list[dict]:
    """The node's switches (up, upgrade, rollback), without the probe's heals."""
    entries = json.loads(lab.out(node, "cat /var/lib/llmfleet/history.json"))["entries"]
    return [entry for entry in entries if entry["action"] != "heal"]


@pytest.fixture(scope="module")
def images(ray_lab: Lab) -> Lab:
    for node in NODES:
        ray_lab.sh(node, MAKE_IMAGES, timeout=300)
    return ray_lab


def test_an_upgrade_to_a_broken_image_rolls_back_by_itself(images: Lab) -> None:
    """Ray's containers on both nodes are created again from the new image, vLLM refuses its
    arguments as it starts in the head container: the wait fails at once with vLLM's reason,
    and both nodes go back to the image that served."""
    lab = images
    before = {node: started_with(lab, node) for node in NODES}
    run = upgrade(lab, "--image", f"{RAY_IMAGE}:broken")
    out = run.stdout
    assert run.returncode == 2, out[-6000:]
    assert "unrecognized arguments: --llmfleet-lab-broken" in out, out[-6000:]
    assert "It was rolled back: the cluster serves" in out, out[-6000:]
    for node in NODES:
        assert ray_image(lab, node) == image_id(lab, node, f"{RAY_IMAGE}:lab"), node
        # Created again as the run made them: the upgrade once gave Ray's containers no NCCL /
        # Gloo environment and no GID wrapper (nor vLLM's unit), and the next run restarted
        # the group to put them back (2026-11-28).
        assert started_with(lab, node) == before[node], node
    last = switches(lab, "spark-1")[-1]
    assert (last["action"], last["outcome"]) == ("upgrade", "rolled back"), last
    assert (last["from"]["image"], last["to"]["image"]) == (
        f"{RAY_IMAGE}:lab",
        f"{RAY_IMAGE}:broken",
    )
    assert "unrecognized arguments" in last["reason"], last
    assert chat(lab)["choices"], "no answer"


# Extended (159 s of make test's longest worker): the upgrade's recreate of Ray's containers,
# their wait and the history are walked by the broken image's test (to the new image and back),
# the gate's pass and the upgrade that sticks by test_lab_upgrade's model revision; the
# pruning of images that never served (filter images_to_prune) by its unit tests.
@pytest.mark.extended
def test_an_upgrade_to_a_good_image_sticks(images: Lab) -> None:
    lab = images
    # The same vLLM in both images: a wide allowance, the gate only has to run and pass.
    run = upgrade(lab, "--image", f"{RAY_IMAGE}:2", "--keep-images", "2", "--bench-gate", "50")
    out = " ".join(run.stdout.split())
    assert run.returncode == 0, out[-6000:]
    assert "spark-1: the benchmark gate passed (gate: 32 ok, 0 errors, TTFT p50" in out, out[-6000:]
    assert f'to keep this, set {{"llmfleet_vllm_image": "{RAY_IMAGE}:2"' in out, out[-6000:]
    for node in NODES:
        assert ray_image(lab, node) == image_id(lab, node, f"{RAY_IMAGE}:2"), node
        # The last two images that served stay; the broken one, which never served, goes.
        tags = lab.out(node, f"docker images --format '{{{{.Tag}}}}' {RAY_IMAGE}").split()
        assert sorted(tags) == ["2", "lab"], (node, tags)
    last = switches(lab, "spark-1")[-1]
    assert (last["action"], last["outcome"]) == ("upgrade", "ok"), last
    assert vllm_pids(lab), "vLLM is not in the head container"
    assert chat(lab)["choices"], "no answer"


# The lab's profile, and the same with one sequence at a time: the benchmark gate's four
# concurrent requests then queue behind each other (a real regression, not a simulated one).
PROFILES = yaml.safe_load((ROOT / "roles/vllm_server/defaults/main.yml").read_text())[
    "vllm_server_profiles"
]
SERIAL_PROFILES = {
    "tiny_lab": PROFILES["tiny_lab"],
    "tiny_lab_serial": {**PROFILES["tiny_lab"], "max_num_seqs": 1},
}


# Extended: the rollback is walked by the broken image's upgrade too; the gate's judgement
# by tests/unit/plugins/filter/test_bench.py. make test leaves it out (Makefile).
@pytest.mark.extended
def test_a_slower_profile_fails_the_benchmark_gate_and_is_rolled_back(ray_lab: Lab) -> None:
    lab = ray_lab
    profiles = json.dumps({"vllm_server_profiles": SERIAL_PROFILES})
    run = upgrade(lab, "--profile", "tiny_lab_serial", "--bench-gate", "25", "-e", profiles)
    out = " ".join(run.stdout.split())
    assert run.returncode == 2, out[-6000:]
    assert "spark-1: slower than what served before, beyond the 25.0% the benchmark gate" in out
    assert "gate: TTFT p50 (ms) " in out, out[-6000:]
    assert "It was rolled back: the cluster serves" in out, out[-6000:]
    assert "max-num-seqs: 8" in lab.out("spark-1", "cat /etc/llmfleet/vllm/serve.yaml")
    last = switches(lab, "spark-1")[-1]
    assert (last["action"], last["outcome"]) == ("upgrade", "rolled back"), last
    assert (last["from"]["profile"], last["to"]["profile"]) == ("tiny_lab", "tiny_lab_serial")
    assert chat(lab)["choices"], "no answer"
