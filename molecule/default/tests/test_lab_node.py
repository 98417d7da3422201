"""Real effects on a molecule lab node: systemd, CX7 links, emulated RDMA, vLLM."""

from __future__ import annotations

import json

SYSFS = "/run/llmfleet-lab/sysfs/class/infiniband"


def test_systemd_is_pid_one_and_running(host):
    assert host.run("systemctl is-system-running").stdout.strip() in ("running", "degraded")
    assert host.service("llmfleet-lab-rdma").is_running


def test_both_cx7_halves_are_veth_links(host):
    for name in ("enp1s0f1np1", "enP2p1s0f1np1"):
        link = json.loads(host.check_output(f"ip -d -j link show {name}"))[0]
        assert link["linkinfo"]["info_kind"] == "veth"
        assert "UP" in link["flags"]


def test_emulated_rdma_devices_map_to_the_links(host):
    out = host.check_output("ibdev2netdev")
    assert "rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)" in out
    assert "roceP2p1s0f1 port 1 ==> enP2p1s0f1np1 (Up)" in out
    assert host.file(f"{SYSFS}/rocep1s0f1/ports/1/link_layer").content_string.strip() == "Ethernet"


def test_rdma_counter_is_the_link_byte_counter_in_words(host):
    tx_bytes = int(host.file("/sys/class/net/enp1s0f1np1/statistics/tx_bytes").content_string)
    words = int(host.file(f"{SYSFS}/rocep1s0f1/ports/1/counters/port_xmit_data").content_string)
    # the emulator refreshes every 0.2 s; idle links barely move in between
    assert abs(words * 4 - tx_bytes) < 64 * 1024


def test_vllm_cpu_build_is_installed(host):
    assert "+cpu" in host.check_output("/opt/vllm/bin/vllm --version")


def test_the_model_comes_from_the_labs_hub_not_the_image(host):
    # The node image carries no model (role model_weights fetches it): the lab's Hub
    # publishes it, and a node reaches the Hub by its name on the lab network.
    info = host.check_output(
        "curl -sf -H 'Authorization: Bearer llmfleet-lab-hub-token'"
        " http://hub:8080/api/models/llmfleet/llmfleet-tiny"
    )
    assert '"id": "llmfleet/llmfleet-tiny"' in info or '"id":"llmfleet/llmfleet-tiny"' in info
    refused = host.run(
        "curl -s -o /dev/null -w '%{http_code}' http://hub:8080/api/models/llmfleet/llmfleet-tiny"
    )
    assert refused.stdout == "401"
