"""The gateway runs under systemd from a valid configuration, keeps its key in a root-only
file, refuses requests without the key, forwards those with it, serves each upstream's
counters and its own metrics, sends each request to the upstream of the model it names, and
takes an upstream that stops out of rotation."""

from __future__ import annotations

import os
import time

import pytest
import testinfra

KEY = "molecule-gateway-key"
API = "http://127.0.0.1:8080"


@pytest.fixture()
def gateway(host):
    if host.backend.get_hostname() != "molecule-spark-1":
        pytest.skip("the gateway runs on molecule-spark-1")
    return host


@pytest.fixture()
def upstreams():
    """molecule-spark-2, where the upstreams run (prepare.yml)."""
    return testinfra.get_host(
        "ansible://molecule-spark-2", ansible_inventory=os.environ["MOLECULE_INVENTORY_FILE"]
    )


# Each upstream's unit and port (prepare.yml).
UPSTREAMS = {"molecule-upstream": 18000, "molecule-other": 18001}


def start(upstreams, unit: str) -> None:
    """Start an upstream again, as prepare.yml did."""
    upstreams.run_expect(
        [0],
        f"systemd-run --unit={unit} python3 -m http.server {UPSTREAMS[unit]}"
        f" --directory /run/{unit}",
    )


def status(host, *args: str) -> str:
    return host.check_output("curl -s -o /dev/null -w '%{http_code}' " + " ".join(args))


def test_haproxy_runs_from_a_valid_configuration(gateway) -> None:
    assert gateway.service("haproxy.service").is_running
    assert gateway.service("haproxy.service").is_enabled
    gateway.run_expect([0], "haproxy -c -q -f /etc/haproxy/haproxy.cfg")


def test_the_key_lives_in_a_root_only_file_and_nowhere_else(gateway) -> None:
    keys = gateway.file("/etc/haproxy/llmfleet-api-keys")
    assert keys.mode == 0o600 and keys.user == "root"
    assert keys.content_string == f"{KEY}\n"
    assert KEY not in gateway.file("/etc/haproxy/haproxy.cfg").content_string
    cmdlines = gateway.check_output("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' || true")
    assert KEY not in cmdlines


def test_requests_need_the_key_and_reach_the_upstream_with_it(gateway) -> None:
    assert status(gateway, f"{API}/health") == "200"
    assert status(gateway, f"{API}/v1/models") == "401"
    assert status(gateway, f"-H 'Authorization: Bearer wrong' {API}/v1/models") == "401"
    # http.server answers 404 for a path it has no file for: the request reached it.
    assert status(gateway, f"-H 'Authorization: Bearer {KEY}' {API}/v1/models") == "404"
    assert status(gateway, f"-H 'x-api-key: {KEY}' {API}/health") == "200"


def test_the_upstreams_counters_are_read_through_the_gateway_with_the_key(gateway) -> None:
    counters = f"{API}/llmfleet/groups/upstream/metrics"
    assert status(gateway, counters) == "401"
    text = gateway.check_output(f"curl -sf -H 'Authorization: Bearer {KEY}' {counters}")
    assert 'vllm:request_success_total{model_name="molecule-model"} 7.0' in text
    # Another name has no route: the request goes on to the model's backend (a 404 there).
    unknown = f"{API}/llmfleet/groups/x/metrics"
    assert status(gateway, f"-H 'Authorization: Bearer {KEY}' {unknown}") == "404"


def server_state(gateway, proxy: str, server: str) -> str:
    """UP, DOWN, ... as the exporter shows the server."""
    metrics = gateway.check_output("curl -s http://127.0.0.1:8404/metrics")
    prefix = f'haproxy_server_status{{proxy="{proxy}",server="{server}",state="'
    for line in metrics.splitlines():
        if line.startswith(prefix) and line.endswith("} 1"):
            return line[len(prefix) :].split('"', 1)[0]
    return "?"


def test_the_exporter_shows_the_upstream_up(gateway) -> None:
    assert server_state(gateway, "llmfleet_model_1", "upstream") == "UP"


def responses(gateway, proxy: str, server: str) -> float:
    """The responses the server gave through the gateway, as the exporter counts them."""
    metrics = gateway.check_output("curl -s http://127.0.0.1:8404/metrics")
    prefix = f'haproxy_server_http_responses_total{{proxy="{proxy}",server="{server}",'
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines() if line.startswith(prefix)
    )


@pytest.mark.parametrize(
    ("model", "proxy", "server"),
    [
        ("other-model", "llmfleet_model_2", "other"),
        ("molecule-model", "llmfleet_model_1", "upstream"),
        # A model nobody serves goes to the first backend (whose vLLM answers 404 for it).
        ("unknown-model", "llmfleet_model_1", "upstream"),
    ],
)
def test_the_requests_model_picks_its_upstream(
    gateway, model: str, proxy: str, server: str
) -> None:
    before = responses(gateway, proxy, server)
    body = f'{{"model": "{model}", "messages": []}}'
    status(gateway, f"-H 'Authorization: Bearer {KEY}' -d '{body}' {API}/v1/chat/completions")
    assert responses(gateway, proxy, server) == before + 1


def test_an_upstream_that_stops_leaves_rotation_and_comes_back(gateway, upstreams) -> None:
    assert server_state(gateway, "llmfleet_model_1", "upstream") == "UP"
    upstreams.run_expect([0], "systemctl stop molecule-upstream.service")
    try:
        deadline = time.monotonic() + 10
        while server_state(gateway, "llmfleet_model_1", "upstream") != "DOWN":
            assert time.monotonic() < deadline, "the stopped upstream is still in rotation"
            time.sleep(0.5)
        # The other model's upstream keeps the gateway up.
        assert status(gateway, f"{API}/health") == "200"
    finally:
        start(upstreams, "molecule-upstream")
    deadline = time.monotonic() + 10
    while server_state(gateway, "llmfleet_model_1", "upstream") != "UP":
        assert time.monotonic() < deadline, "the upstream did not come back"
        time.sleep(0.5)


def test_health_fails_when_no_upstream_is_in_rotation(gateway, upstreams) -> None:
    upstreams.run_expect([0], "systemctl stop " + " ".join(f"{unit}.service" for unit in UPSTREAMS))
    try:
        deadline = time.monotonic() + 10
        while status(gateway, f"{API}/health") != "503":
            assert time.monotonic() < deadline, "/health still answers with no upstream up"
            time.sleep(0.5)
    finally:
        for unit in UPSTREAMS:
            start(upstreams, unit)
    deadline = time.monotonic() + 10
    while status(gateway, f"{API}/health") != "200":
        assert time.monotonic() < deadline, "/health did not come back"
        time.sleep(0.5)
