"""The gateway runs under systemd from a valid configuration, keeps its key in a root-only
file, refuses requests without the key, forwards those with it, serves its metrics, and
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


def test_the_exporter_shows_the_upstream_up(gateway) -> None:
    metrics = gateway.check_output("curl -s http://127.0.0.1:8404/metrics")
    assert (
        'haproxy_server_status{proxy="llmfleet_model_1",server="upstream",state="UP"} 1' in metrics
    )


def test_an_upstream_that_stops_leaves_rotation_and_comes_back(gateway) -> None:
    upstream = testinfra.get_host(
        "ansible://molecule-spark-2", ansible_inventory=os.environ["MOLECULE_INVENTORY_FILE"]
    )
    upstream.run_expect([0], "systemctl stop molecule-upstream.service")
    try:
        deadline = time.monotonic() + 10
        while status(gateway, f"{API}/health") != "503" and time.monotonic() < deadline:
            time.sleep(0.5)
        assert status(gateway, f"{API}/health") == "503"
    finally:
        upstream.run_expect(
            [0],
            "systemd-run --unit=molecule-upstream python3 -m http.server 18000"
            " --directory /run/molecule-upstream",
        )
    deadline = time.monotonic() + 10
    while status(gateway, f"{API}/health") != "200" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert status(gateway, f"{API}/health") == "200"
