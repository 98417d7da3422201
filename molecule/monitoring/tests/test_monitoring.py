"""Prometheus on spark-1 scrapes node_exporter on both nodes and the vLLM on spark-1, every
port bound to the node's own address on the management (podman) network only."""

from __future__ import annotations

import json
import re
import time
from urllib.parse import quote

import pytest

SERVER = "molecule-spark-1"
NODES = {"molecule-spark-1", "molecule-spark-2"}
DASHBOARD = "/etc/grafana/dashboards/llmfleet/llmfleet-dashboard.json"


def name(host) -> str:
    return host.backend.get_hostname()


_ADDRESSES: dict[str, str] = {}


def address(host) -> str:
    """The node's address on the management (podman) network: its default route's."""
    if name(host) not in _ADDRESSES:
        facts = host.ansible("setup", "gather_subset=!all,network", check=False)["ansible_facts"]
        _ADDRESSES[name(host)] = facts["ansible_default_ipv4"]["address"]
    return _ADDRESSES[name(host)]


def listening(host, port: int) -> set[str]:
    return {s for s in host.socket.get_listening_sockets() if s.endswith(f":{port}")}


def get_json(host, url: str) -> dict:
    return json.loads(host.check_output("curl -sf -m 20 %s", url))


def query(host, expr: str) -> list[dict]:
    url = f"http://{address(host)}:9090/api/v1/query?query={quote(expr)}"
    answer = get_json(host, url)
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def query_until(host, expr: str, wanted, timeout: int = 120) -> list[dict]:
    """Poll until wanted(result) holds: a fresh target needs a scrape or two."""
    deadline = time.monotonic() + timeout
    while True:
        result = query(host, expr)
        if wanted(result) or time.monotonic() > deadline:
            return result
        time.sleep(5)


@pytest.fixture
def server(host):
    if name(host) != SERVER:
        pytest.skip("Prometheus runs on molecule-spark-1 only")
    return host


def test_node_exporter_listens_on_the_management_address_only(host) -> None:
    assert host.service("prometheus-node-exporter").is_enabled
    assert host.service("prometheus-node-exporter").is_running
    assert listening(host, 9100) == {f"tcp://{address(host)}:9100"}
    defaults = host.file("/etc/default/prometheus-node-exporter").content_string
    assert f'ARGS="--web.listen-address={address(host)}:9100"' in defaults.splitlines()
    metrics = host.check_output("curl -sf http://%s:9100/metrics", address(host))
    assert "node_cpu_seconds_total" in metrics
    assert host.run("curl -sf -m 5 http://127.0.0.1:9100/metrics").rc != 0


def test_prometheus_runs_on_spark_1_alone(host) -> None:
    if name(host) != SERVER:
        assert not host.package("prometheus").is_installed
        assert listening(host, 9090) == set()
        return
    assert host.service("prometheus").is_enabled and host.service("prometheus").is_running
    assert listening(host, 9090) == {f"tcp://{address(host)}:9090"}


def test_prometheus_runs_with_the_configured_retention(server) -> None:
    pid = server.check_output("systemctl show --property MainPID --value prometheus")
    cmdline = server.check_output("tr '\\0' ' ' < /proc/%s/cmdline", pid)
    assert f"--web.listen-address={address(server)}:9090" in cmdline
    assert "--storage.tsdb.retention.time=7d" in cmdline


def test_promtool_accepts_the_configuration(server) -> None:
    out = server.check_output("promtool check config /etc/prometheus/prometheus.yml 2>&1")
    assert "SUCCESS" in out


def test_the_scrape_jobs_name_every_node_and_no_dcgm_without_gpus(server) -> None:
    targets = get_json(server, f"http://{address(server)}:9090/api/v1/targets")["data"]
    jobs: dict[str, set[str]] = {}
    for target in targets["activeTargets"]:
        jobs.setdefault(target["labels"]["job"], set()).add(target["labels"]["instance"])
    assert jobs == {"prometheus": {SERVER}, "node": NODES, "vllm": {SERVER}}
    assert listening(server, 9400) == set()


def test_every_node_exporter_is_up(server) -> None:
    result = query_until(
        server, 'up{job="node"}', lambda r: len(r) == 2 and all(s["value"][1] == "1" for s in r)
    )
    assert {s["metric"]["instance"]: s["value"][1] for s in result} == dict.fromkeys(NODES, "1")


def test_vllm_metrics_reach_prometheus(server) -> None:
    result = query_until(server, "vllm:num_requests_running", lambda r: len(r) > 0)
    assert result, "no vllm:num_requests_running sample in Prometheus"
    assert {s["metric"]["job"] for s in result} == {"vllm"}
    assert {s["metric"]["instance"] for s in result} == {SERVER}
    up = query(server, 'up{job="vllm"}')
    assert [s["value"][1] for s in up] == ["1"]


def test_grafana_is_provisioned_on_spark_1_only(host) -> None:
    datasource = host.file("/etc/grafana/provisioning/datasources/llmfleet.yaml")
    if name(host) != SERVER:
        assert not datasource.exists
        return
    lines = [line.strip() for line in datasource.content_string.splitlines()]
    url = f"http://{address(host)}:9090"
    assert f"url: {url}" in lines and "uid: llmfleet-prometheus" in lines
    assert "Prometheus Server is Ready" in host.check_output("curl -sf %s/-/ready", url)
    provider = host.file("/etc/grafana/provisioning/dashboards/llmfleet.yaml").content_string
    assert "path: /etc/grafana/dashboards/llmfleet" in provider
    dashboard = json.loads(host.file(DASHBOARD).content_string)
    assert dashboard["schemaVersion"] == 39
    # Grafana is not installed: the role must not have made up a grafana.ini.
    assert not host.file("/etc/grafana/grafana.ini").exists


def test_every_vllm_metric_of_the_dashboard_is_served(server) -> None:
    dashboard = json.loads(server.file(DASHBOARD).content_string)
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    wanted = {m for e in exprs for m in re.findall(r"vllm:[a-z_]+", e)}
    assert "vllm:time_to_first_token_seconds_bucket" in wanted
    served = server.check_output("curl -sf http://127.0.0.1:8000/metrics")
    missing = {m for m in wanted if not re.search(rf"^{re.escape(m)}[{{ ]", served, re.M)}
    assert not missing, f"the dashboard queries metrics vLLM does not serve: {sorted(missing)}"
