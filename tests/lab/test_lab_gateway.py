"""Two serving groups behind the serving gateway, on a 4-node lab of its own.

`llmfleet lab up --nodes 4` serves as two tensor-parallel groups of two (spark-1 and
spark-2, spark-3 and spark-4) with the gateway (HAProxy) on spark-1 (inventory/lab/nodes.py).
The tests send real requests through the gateway to real vLLM ranks and read each group's
own request counters (vLLM's /metrics on its rank 0) to see where they went.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from .conftest import TEST_LAB, Lab, llmfleet, run_up

GATEWAY_LAB = f"{TEST_LAB}-gateway"
KEY = "llmfleet-lab-key"
MODEL = "llmfleet-tiny"
# Rank 0 of each group: where its API and counters are.
GROUPS = {"serving_1": "spark-1", "serving_2": "spark-3"}
# Fixed session ids: the gateway's hashing puts each on the same group in every run.
SESSIONS = [f"lab-session-{letter}" for letter in "abcdefgh"]


@pytest.fixture(scope="module")
def grouped_lab() -> Iterator[Lab]:
    llmfleet("lab", "down", "--name", GATEWAY_LAB)
    llmfleet("lab", "up", "--name", GATEWAY_LAB, "--nodes", "4")
    lab = Lab(GATEWAY_LAB)
    try:
        result = run_up(lab)
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


def served_requests(lab: Lab) -> dict[str, float]:
    """Each group's finished requests, from vLLM's own counter on its rank 0."""
    counts = {}
    for group, node in GROUPS.items():
        with urllib.request.urlopen(
            f"http://{lab.management_ip(node)}:8000/metrics", timeout=30
        ) as response:
            text = response.read().decode()
        counts[group] = sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("vllm:request_success_total{")
        )
    return counts


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


def test_a_sessions_requests_land_on_one_group_and_sessions_spread(grouped_lab: Lab) -> None:
    homes = {}
    for session in SESSIONS:
        before = served_requests(grouped_lab)
        for turn in range(3):
            assert chat(grouped_lab, session, f"{session} turn {turn}") == 200
        after = served_requests(grouped_lab)
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
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        metrics = subprocess.run(
            ["curl", "-s", f"http://{grouped_lab.management_ip('spark-1')}:8404/metrics"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        if 'server="serving_2",state="UP"} 1' in metrics:
            break
        time.sleep(3)
    else:
        pytest.fail("serving_2 did not return to rotation within 300 s")
    before = served_requests(grouped_lab)
    for session in SESSIONS:
        assert chat(grouped_lab, session, f"{session} back") == 200
    after = served_requests(grouped_lab)
    assert after["serving_2"] > before["serving_2"]
