"""Two serving groups behind the serving gateway, on a 4-node lab of its own.

`llmfleet lab up --nodes 4` serves as two tensor-parallel groups of two (spark-1 and
spark-2, spark-3 and spark-4) with the gateway (HAProxy) on spark-1 (inventory/lab/nodes.py).
The tests send real requests through the gateway to real vLLM ranks and read each group's
own request counters (vLLM's /metrics on its rank 0, through the gateway: the groups answer
the cluster's hosts only) to see where they went.

This machine is the client of both this lab and the session's test lab, which run at the
same time in the two workers: this lab's Claude Code goes to a folder of the module's own
(its command and its npm install), so that the test lab's `claude-local` keeps pointing at
the test lab; its run's artifacts (RDMA results) go to a folder of their own too.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.groups import (
    parse_group_counters,
)

from .conftest import ROOT, TEST_LAB, Lab, llmfleet, run_up
from .test_lab_clients import FIB, claude

# Extended (make test leaves it out, pytest -m extended runs it): its 4 nodes serve two groups
# of two, and its site run alone took 16 of CI's 90 minutes beside the other labs on two
# cores (2026-11-28). make test runs the gateway in molecule's serving_gateway scenario
# (HAProxy in front of two plain upstreams: the key, each model's upstream, the counters, an
# upstream that stops leaving rotation); the serving probe it relies on is healed by the
# test lab's fault matrix.
pytestmark = pytest.mark.extended

GATEWAY_LAB = f"{TEST_LAB}-gateway"
# This lab's RDMA results apart from the test lab's: the test lab's no-op run re-measured
# its fabric (perftest, 42 more round trips) after this lab's result came last in the
# shared folder.
ARTIFACTS = ROOT / "artifacts" / "lab-gateway"
KEY = "llmfleet-lab-key"
MODEL = "llmfleet-tiny"
# Rank 0 of each group: where its API and counters are.
GROUPS = {"serving_1": "spark-1", "serving_2": "spark-3"}
# Fixed session ids: the gateway's hashing puts each on the same group in every run.
SESSIONS = [f"lab-session-{letter}" for letter in "abcdefgh"]
# Claude Code's second turn re-sends the first: all but its new tokens come from the cache
# of the group that served the first turn, if it reaches that group again.
PREFIX_HIT_FLOOR = 0.9
# 16 Claude Code-shaped sessions at once, two turns each, through the gateway.
SIXTEEN_SESSIONS = json.dumps(
    {
        "benchmark_scenarios": [
            {"name": "sessions_c16", "kind": "session", "sessions": 16, "turns": 2,
             "system_tokens": 300, "tool_tokens": 1500, "prompt_tokens": 100,
             "turn_tokens": 200, "max_tokens": 8},
        ]
    }
)  # fmt: skip
GROUP_SHARE = (0.35, 0.65)


@pytest.fixture(scope="module")
def client_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gateway-client")


@pytest.fixture(scope="module")
def grouped_lab(client_dir: Path) -> Iterator[Lab]:
    llmfleet("lab", "down", "--name", GATEWAY_LAB)
    llmfleet("lab", "up", "--name", GATEWAY_LAB, "--nodes", "4", "--path", "native")
    lab = Lab(GATEWAY_LAB)
    try:
        result = run_up(
            lab,
            "-e", f"llmfleet_artifacts_dir={ARTIFACTS}",
            "-e", f"claude_code_bin_dir={client_dir / 'bin'}",
            "-e", f"claude_code_install_dir={client_dir / 'claude-code'}",
        )  # fmt: skip
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
        yield lab
    finally:
        llmfleet("lab", "down", "--name", GATEWAY_LAB)


def request(
    url: str, body: dict | None = None, headers: dict[str, str] | None = None, timeout: int = 120
) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    for name, value in (headers or {}).items():
        req.add_header(name, value)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, {}


def gateway(lab: Lab) -> str:
    return f"http://{lab.management_ip('spark-1')}:8080"


def chat(lab: Lab, session: str | None, text: str, key: str | None = KEY) -> int:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    if session:
        headers["X-Claude-Code-Session-Id"] = session
    body = {"model": MODEL, "messages": [{"role": "user", "content": text}], "max_tokens": 4}
    return request(f"{gateway(lab)}/v1/chat/completions", body, headers)[0]


def group_counters(lab: Lab) -> dict[str, dict]:
    """Each group's own vLLM counters of the served model, its rank 0's /metrics as the
    gateway serves them (the groups answer the cluster's hosts only): finished requests and
    prefix-cache queries and hits."""
    counters = {}
    for group in GROUPS:
        request = urllib.request.Request(
            f"{gateway(lab)}/llmfleet/groups/{group}/metrics",
            headers={"Authorization": f"Bearer {KEY}"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            counters[group] = parse_group_counters(response.read().decode(), MODEL)
    return counters


def gateway_metrics(lab: Lab) -> str:
    """The gateway's Prometheus exporter (HAProxy's own counts), empty when it does not answer."""
    return subprocess.run(
        ["curl", "-s", f"http://{lab.management_ip('spark-1')}:8404/metrics"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout


def routed_requests(lab: Lab) -> dict[str, float]:
    """The requests the gateway sent to each group and got answered (HAProxy's own counts of
    the model's backend): the serving probe's requests, sent to vLLM on its own host, are not
    among them, as they are among vLLM's."""
    metrics = gateway_metrics(lab)
    routed = dict.fromkeys(GROUPS, 0.0)
    for line in metrics.splitlines():
        if not line.startswith("haproxy_server_http_responses_total{"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line.partition("}")[0]))
        if labels.get("proxy") == "llmfleet_model_1" and labels.get("code") == "2xx":
            routed[labels["server"]] = float(line.rsplit(" ", 1)[1])
    return routed


def prefix_counters(lab: Lab) -> dict[str, float]:
    """Both groups' prefix-cache counters, summed: the cache of the whole cluster."""
    counters = group_counters(lab).values()
    return {key: sum(c[key] for c in counters) for key in ("queries", "hits")}


def test_both_apis_answer_through_the_gateway_with_the_key_and_401_without(
    grouped_lab: Lab,
) -> None:
    url = gateway(grouped_lab)
    message = {"model": MODEL, "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
    assert chat(grouped_lab, None, "hi") == 200
    assert chat(grouped_lab, None, "hi", key=None) == 401
    assert chat(grouped_lab, None, "hi", key="wrong") == 401
    # Claude Code's ANTHROPIC_API_KEY sends x-api-key, which vLLM alone refuses.
    assert request(f"{url}/v1/messages", message, {"x-api-key": KEY})[0] == 200
    assert request(f"{url}/v1/messages", message)[0] == 401


def test_the_groups_answer_the_cluster_and_not_this_machine(grouped_lab: Lab) -> None:
    rank_0 = grouped_lab.management_ip(GROUPS["serving_2"])
    health = f"http://{rank_0}:8000/health"
    # This machine is no cluster host: cluster_firewall drops its connections to vLLM's port.
    with pytest.raises(OSError):
        urllib.request.urlopen(health, timeout=3)
    # The gateway's host and the other group's hosts reach it.
    for node in ("spark-1", "spark-2"):
        reached = grouped_lab.sh(node, f"curl -s -o /dev/null -w '%{{http_code}}' {health}")
        assert reached.stdout.strip() == "200", (node, reached.stdout, reached.stderr)
    # Its counters come through the gateway, with the key only.
    counters = f"{gateway(grouped_lab)}/llmfleet/groups/serving_2/metrics"
    assert request(counters)[0] == 401
    assert group_counters(grouped_lab)["serving_2"]["requests"] >= 0


def test_a_sessions_requests_land_on_one_group_and_sessions_spread(grouped_lab: Lab) -> None:
    homes = {}
    for session in SESSIONS:
        before = routed_requests(grouped_lab)
        for turn in range(3):
            assert chat(grouped_lab, session, f"{session} turn {turn}") == 200
        after = routed_requests(grouped_lab)
        moved = {group: after[group] - before[group] for group in GROUPS}
        assert sorted(moved.values()) == [0, 3], f"{session}: {moved}"
        homes[session] = max(moved, key=lambda group: moved[group])
    assert set(homes.values()) == set(GROUPS), homes


def test_a_group_that_stops_loses_only_requests_in_flight_and_comes_back(
    grouped_lab: Lab,
) -> None:
    statuses: list[int] = []
    stop = threading.Event()

    def stream() -> None:
        number = 0
        while not stop.is_set():
            number += 1
            statuses.append(chat(grouped_lab, SESSIONS[number % len(SESSIONS)], f"r{number}"))

    worker = threading.Thread(target=stream)
    worker.start()
    try:
        time.sleep(5)
        grouped_lab.sh("spark-3", "systemctl stop llmfleet-vllm")
        at_stop = len(statuses)
        time.sleep(20)
    finally:
        stop.set()
        worker.join(timeout=180)
    after_stop = statuses[at_stop:]
    failed = [status for status in after_stop if status != 200]
    # One request at a time: only the one in flight on serving_2 when it stopped may fail.
    assert len(failed) <= 1, statuses
    assert len(after_stop) >= 5, statuses

    grouped_lab.sh("spark-3", "systemctl start llmfleet-vllm")
    wait_for_state(grouped_lab, "serving_2", "UP", 300)
    before = routed_requests(grouped_lab)
    for session in SESSIONS:
        assert chat(grouped_lab, session, f"{session} back") == 200
    after = routed_requests(grouped_lab)
    assert after["serving_2"] > before["serving_2"]


def wait_for_state(lab: Lab, group: str, state: str, seconds: int) -> float:
    """Wait until HAProxy holds ``group`` in ``state`` (UP, DOWN) in the model's backend,
    which checks the group (the counters' route does not); returns how long it took."""
    started = time.monotonic()
    while time.monotonic() < started + seconds:
        metrics = gateway_metrics(lab)
        if f'proxy="llmfleet_model_1",server="{group}",state="{state}"}} 1' in metrics:
            return time.monotonic() - started
        time.sleep(2)
    pytest.fail(f"{group} was not {state} in the gateway within {seconds} s")


def test_a_group_that_stops_generating_leaves_rotation_and_comes_back(grouped_lab: Lab) -> None:
    """serving_2's engine wedged (SIGSTOP of its engine core): its /health stays 200, its
    serving probe finds no answer, and the gateway, which checks the group at its probe,
    takes it out of rotation; every session is served by serving_1 meanwhile. Once the engine
    answers again (before the probe's heal), the group is back."""
    engine = "$(pgrep -f '^VLLM::EngineCore')"
    grouped_lab.sh("spark-3", f"kill -STOP {engine}")
    try:
        took = wait_for_state(grouped_lab, "serving_2", "DOWN", 90)
        print(f"serving_2 left rotation {took:.0f} s after its engine stopped")
        assert grouped_lab.sh("spark-3", "curl -sf localhost:8000/health").returncode == 0
        assert [
            chat(grouped_lab, session, "while serving_2 is wedged") for session in SESSIONS
        ] == [200] * len(SESSIONS)
    finally:
        grouped_lab.sh("spark-3", f"kill -CONT {engine}")
    wait_for_state(grouped_lab, "serving_2", "UP", 300)


def test_claude_codes_next_turn_through_the_gateway_hits_its_groups_cache(
    grouped_lab: Lab, client_dir: Path, tmp_path: Path
) -> None:
    """A teammate's own Claude Code pointed at the gateway, without claude-local's
    CLAUDE_CODE_ATTRIBUTION_HEADER=0: each request starts with the billing header, whose
    hash changes from one conversation to the next (test_lab_clients records it). vLLM drops
    that block itself before the prompt is built (vllm-project/vllm#36829, in the lab's
    0.32), so the gateway passes the request as it is and the next turn still hits its
    group's prefix cache."""
    repo, home = tmp_path / "repo", tmp_path / "home"
    repo.mkdir()
    home.mkdir()
    (repo / "fib.py").write_text(FIB)
    wrapper = (client_dir / "bin" / "claude-local").read_text()
    assert "export CLAUDE_CODE_ATTRIBUTION_HEADER=0\n" in wrapper
    command = tmp_path / "claude-teammate"
    command.write_text(wrapper.replace("export CLAUDE_CODE_ATTRIBUTION_HEADER=0\n", ""))
    command.chmod(0o700)
    claude(command, repo, "Read fib.py and say what it computes.")
    before = prefix_counters(grouped_lab)
    claude(command, repo, "Now suggest a faster version, briefly.", "--continue")
    after = prefix_counters(grouped_lab)
    queries = after["queries"] - before["queries"]
    hits = after["hits"] - before["hits"]
    assert queries > 0, "no prefix-cache lookups: did the turn reach a group?"
    print(f"prefix-cache hit ratio of the next turn through the gateway: {hits / queries:.3f}")
    assert hits / queries >= PREFIX_HIT_FLOOR


def test_the_benchmark_through_the_gateway_reports_each_groups_share(
    grouped_lab: Lab, tmp_path: Path
) -> None:
    run = grouped_lab.run(
        "llmfleet", "bench", "-i", "inventory/lab", "--plain",
        "-e", f"benchmark_results_dir={tmp_path}", "-e", SIXTEEN_SESSIONS,
        timeout=2400,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    [result] = [json.loads(path.read_text()) for path in tmp_path.glob("bench-*.json")]
    [sessions] = result["benchmark"]["scenarios"]
    assert sessions["errors"] == 0
    shares = {group["name"]: group["share"] for group in sessions["by_group"]}
    print(f"16 sessions through the gateway, share of the requests per group: {shares}")
    assert set(shares) == set(GROUPS)
    assert all(GROUP_SHARE[0] <= share <= GROUP_SHARE[1] for share in shares.values()), shares
    [report] = tmp_path.glob("bench-*.md")
    assert "## Load per serving group" in report.read_text()
