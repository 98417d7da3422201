"""The lab's promises: nodes Ansible can reach, CX7 links, RDMA emulation driven by them."""

from __future__ import annotations

import json
import re
import time

from ..conftest import Lab

RDMA_SYSFS = "/run/llmfleet-lab/sysfs/class/infiniband"
HALVES = ("enp1s0f1np1", "enP2p1s0f1np1")


def test_every_node_answers_ansible_ping(lab: Lab) -> None:
    proc = lab.run(
        "ansible", "all", "-i", "inventory/lab", "-m", "ansible.builtin.ping", "-o", timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for node in ("spark-1", "spark-2"):
        assert re.search(rf'^{node} \| SUCCESS => .*"ping": ?"pong"', proc.stdout, re.M), (
            proc.stdout
        )


def test_nodes_reach_each_other_on_the_lab_network(lab: Lab) -> None:
    """Each node has its own machine-id, so its own MAC on eth0 and a route to the others
    (Prometheus on one node scrapes the others there)."""
    ids = {node: lab.out(node, "cat /etc/machine-id").strip() for node in ("spark-1", "spark-2")}
    assert len(set(ids.values())) == 2, ids
    lab.sh("spark-1", f"ping -c 1 -W 5 {lab.management_ip('spark-2')}")


def test_lab_status_reports_nodes_and_links(lab: Lab) -> None:
    status = json.loads(lab.cli("status", "--json"))
    assert [node["hostname"] for node in status["nodes"]] == ["spark-1", "spark-2"]
    for node in status["nodes"]:
        assert node["state"] == "running"
        assert node["system_state"] in ("running", "degraded")
        assert sorted(link["name"] for link in node["links"]) == sorted(HALVES)


def test_spark1_has_both_cx7_halves_cabled_to_spark2(lab: Lab) -> None:
    detail = lab.out("spark-1", "ip -d link")
    for name in HALVES:
        assert re.search(rf"^\d+: {name}@if\d+: <[^>]*UP[^>]*>", detail, re.M), detail
    for name in HALVES:
        mine = json.loads(lab.out("spark-1", f"ip -j -d link show {name}"))[0]
        theirs = json.loads(lab.out("spark-2", f"ip -j -d link show {name}"))[0]
        assert mine["linkinfo"]["info_kind"] == "veth"
        # each end's peer index is the other end's own index: one cable per half
        assert mine["link_index"] == theirs["ifindex"]
        assert theirs["link_index"] == mine["ifindex"]


def read_counter(lab: Lab, node: str, device: str, counter: str) -> int:
    return int(lab.out(node, f"cat {RDMA_SYSFS}/{device}/ports/1/counters/{counter}"))


def test_100mb_across_a_link_moves_its_rdma_counter_by_25m_words(
    lab: Lab, fabric_addresses: dict[str, dict[str, str]]
) -> None:
    lab.sh("spark-2", "nohup nc -l -p 5201 > /dev/null 2>&1 &")
    time.sleep(0.5)
    sent_before = read_counter(lab, "spark-1", "rocep1s0f1", "port_xmit_data")
    received_before = read_counter(lab, "spark-2", "rocep1s0f1", "port_rcv_data")
    lab.sh("spark-1", "head -c 100000000 /dev/zero | nc -N 192.168.250.2 5201", timeout=120)
    time.sleep(0.6)  # the emulator refreshes counters every 0.2 s
    sent = read_counter(lab, "spark-1", "rocep1s0f1", "port_xmit_data") - sent_before
    received = read_counter(lab, "spark-2", "rocep1s0f1", "port_rcv_data") - received_before
    # 100 MB in 4-byte words is 25,000,000; TCP/IP headers add a few percent
    assert 25_000_000 <= sent <= 26_500_000, sent
    assert 25_000_000 <= received <= 26_500_000, received
    # and the other half saw none of it
    other = read_counter(lab, "spark-1", "roceP2p1s0f1", "port_xmit_data")
    time.sleep(0.5)
    assert read_counter(lab, "spark-1", "roceP2p1s0f1", "port_xmit_data") - other < 10_000


def test_jumbo_frames_cross_the_link_once_both_ends_use_mtu_9000(
    lab: Lab, fabric_addresses: dict[str, dict[str, str]]
) -> None:
    try:
        for node in ("spark-1", "spark-2"):
            lab.sh(node, "ip link set enp1s0f1np1 mtu 9000")
        lab.sh("spark-1", "ping -c 2 -W 2 -M do -s 8972 192.168.250.2")
        rate = lab.out("spark-1", f"cat {RDMA_SYSFS}/rocep1s0f1/ports/1/rate").strip()
        assert rate.startswith("200 Gb/sec")
        devinfo = lab.out("spark-1", "ibv_devinfo -d rocep1s0f1")
        assert re.search(r"active_mtu:\s+4096 \(5\)", devinfo), devinfo
    finally:
        for node in ("spark-1", "spark-2"):
            lab.sh(node, "ip link set enp1s0f1np1 mtu 1500")


def test_a_pulled_cable_shows_in_every_tool(lab: Lab) -> None:
    try:
        lab.cli("link", "spark-2", "enp1s0f1np1", "down")
        time.sleep(1.5)  # port state refreshes every second
        assert "rocep1s0f1 port 1 ==> enp1s0f1np1 (Down)" in lab.out("spark-2", "ibdev2netdev")
        # the far end loses carrier too, as with a real cable
        assert "rocep1s0f1 port 1 ==> enp1s0f1np1 (Down)" in lab.out("spark-1", "ibdev2netdev")
        assert "Link detected: no" in lab.out("spark-1", "ethtool enp1s0f1np1")
        state = lab.out("spark-1", f"cat {RDMA_SYSFS}/rocep1s0f1/ports/1/state").strip()
        assert state == "1: DOWN"
        assert "roceP2p1s0f1 port 1 ==> enP2p1s0f1np1 (Up)" in lab.out("spark-1", "ibdev2netdev")
    finally:
        lab.cli("link", "spark-2", "enp1s0f1np1", "up")
    time.sleep(1.5)
    assert "rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)" in lab.out("spark-1", "ibdev2netdev")


def test_ethtool_reports_the_lab_link_speed(lab: Lab) -> None:
    assert "Speed: 200000Mb/s" in lab.out("spark-1", "ethtool enP2p1s0f1np1")
    try:
        lab.cli("set", "link_speed_mbps.enP2p1s0f1np1=100000")
        assert "Speed: 100000Mb/s" in lab.out("spark-1", "ethtool enP2p1s0f1np1")
    finally:
        lab.cli("set", "link_speed_mbps.enP2p1s0f1np1=200000")


RESULT_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$", re.M)


def ib_write_bw_pair(lab: Lab, device: str, server_ip: str, port: int) -> tuple[str, str]:
    flags = f"-d {device} -R -q 4 -s 8388608 -D 2 --report_gbits -p {port}"
    lab.sh("spark-2", f"nohup ib_write_bw {flags} > /tmp/ibwb-{port}.log 2>&1 &")
    time.sleep(1)
    client = lab.out("spark-1", f"ib_write_bw {flags} {server_ip}", timeout=60)
    time.sleep(0.5)
    server = lab.out("spark-2", f"cat /tmp/ibwb-{port}.log")
    return client, server


def test_ib_write_bw_reports_the_configured_rail_bandwidth(
    lab: Lab, fabric_addresses: dict[str, dict[str, str]]
) -> None:
    sent_before = read_counter(lab, "spark-1", "rocep1s0f1", "port_xmit_data")
    client, server = ib_write_bw_pair(lab, "rocep1s0f1", "192.168.250.2", 18515)
    for report in (client, server):
        row = RESULT_ROW.search(report)
        assert row, report
        assert row.group(1) == "8388608"
        assert 100.0 <= float(row.group(4)) <= 112.0  # a healthy rail: ~106 Gb/s
    # the emulator really moved bytes over the rail
    assert read_counter(lab, "spark-1", "rocep1s0f1", "port_xmit_data") - sent_before > 1_000_000
    try:
        lab.cli("set", "ib_write_bw_gbits.rocep1s0f1=40", "--node", "spark-2")
        client, server = ib_write_bw_pair(lab, "rocep1s0f1", "192.168.250.2", 18516)
        for report in (client, server):
            row = RESULT_ROW.search(report)
            assert row, report
            assert float(row.group(4)) == 40.0
    finally:
        lab.cli("set", "ib_write_bw_gbits.rocep1s0f1=106.2", "--node", "spark-2")


def test_podman_in_a_node_runs_containers(lab: Lab) -> None:
    # no registry is reachable: the nested container runs on an overlay of the node's own root
    out = lab.out(
        "spark-1", "podman run --rm --cgroupns=private --rootfs /:O /bin/echo nested-podman-ok"
    )
    assert out.strip() == "nested-podman-ok"


def test_docker_in_a_node_runs_containers(lab: Lab) -> None:
    # a two-file image made on the spot: no registry is reachable from the lab
    script = (
        "set -e; d=$(mktemp -d); mkdir -p $d/bin $d/lib/x86_64-linux-gnu $d/lib64; "
        "cp /usr/bin/echo $d/bin/; cp /lib/x86_64-linux-gnu/libc.so.6 $d/lib/x86_64-linux-gnu/; "
        "cp /lib64/ld-linux-x86-64.so.2 $d/lib64/; "
        "tar -C $d -c . | docker import - llmfleet-test/echo:1 >/dev/null; rm -rf $d; "
        "docker run --rm llmfleet-test/echo:1 /bin/echo nested-docker-ok; "
        "docker rmi -f llmfleet-test/echo:1 >/dev/null"
    )
    assert lab.out("spark-1", script).strip() == "nested-docker-ok"
