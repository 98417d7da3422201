"""``llmfleet status``'s screen and JSON from the documents playbooks/status.yml writes (the
playbook itself runs against the lab in tests/lab/test_lab_operate.py): a column per host, a
headless rank, swap on, a dead unit, and a host that could not be read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from llmfleet import status as status_module
from llmfleet.cli import app
from llmfleet.run_outcome import Failure, RunResult

ROOT = Path(__file__).resolve().parents[3]
runner = CliRunner()
GIB = 1024**3


def document(host: str, rank: int, **changes: Any) -> dict[str, Any]:
    node = {
        "time": 1_000_000.0,
        "units": [
            {"name": "llmfleet-vllm.service", "installed": True, "active": "active",
             "sub": "running", "restarts": 0, "since": 1_000_000.0 - 7200},
            {"name": "llmfleet-ray.service", "installed": False, "active": "inactive",
             "sub": "dead", "restarts": None, "since": None},
        ],
        "containers": [{"name": "llmfleet-vllm", "exists": False}],
        "links": [{"name": "enp1s0f1np1", "present": True, "operstate": "up", "mtu": 9000,
                   "speed_mbps": 200000, "link_detected": True,
                   "ipv4": [f"192.168.100.{rank + 1}/24"]}],
        "memory": {"total_bytes": 128 * GIB, "free_bytes": 12 * GIB, "available_bytes": 100 * GIB,
                   "page_cache_bytes": 80 * GIB, "swap_total_bytes": 0, "swap_used_bytes": 0,
                   "swap_devices": []},
        "layout": {"tensor_parallel_size": 2, "pipeline_parallel_size": 1, "nnodes": 2,
                   "node_rank": rank, "headless": rank > 0, "master_addr": "192.168.100.1",
                   "max_model_len": 131072, "port": 8000},
        "serving": {"current": {"image": None, "profile": "tiny_lab", "model_revision": None},
                    "uncertain": False},
        "images": {},
    }  # fmt: skip
    node.update(changes)
    return {
        "host": host,
        "node": node,
        "gpus": [{"index": 0, "name": "NVIDIA GB10", "free_gib": 11.2, "total_gib": 119.67,
                  "page_cache_gib": 80.0}],
        "vllm": {"serves_api": rank == 0, "url": "http://127.0.0.1:8000" if rank == 0 else None,
                 "health": 200 if rank == 0 else None, "health_error": None,
                 "models": ["tiny-lab"] if rank == 0 else []},
        "ray": None,
        "benchmark": {"started": "2026-11-24T10:00:00Z", "headline": "c1: 32 ok, 0 errors"},
    }  # fmt: skip


@pytest.fixture
def screen(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("LLMFLEET_HOME", str(ROOT))
    monkeypatch.setenv("COLUMNS", "240")

    def run(documents: dict[str, Any], failures: list[Failure], *args: str) -> Any:
        result = RunResult(rc=2 if failures else 0, status="failed" if failures else "successful",
                           failures=failures)  # fmt: skip
        monkeypatch.setattr(
            status_module, "run_status_playbook", lambda *_args: (result, documents)
        )
        return runner.invoke(app, ["status", "-i", str(ROOT / "inventory" / "sparks"), *args])

    return run


def test_a_column_per_host_with_the_head_serving_and_the_other_rank_headless(screen: Any) -> None:
    swap = document("spark-2", 1)["node"]["memory"] | {
        "swap_total_bytes": 8 * GIB,
        "swap_used_bytes": GIB,
        "swap_devices": ["/swap.img"],
    }
    dead = [
        {"name": "llmfleet-vllm.service", "installed": True, "active": "failed", "sub": "failed",
         "restarts": 5, "since": None},
    ]  # fmt: skip
    documents = {
        "spark-1": document("spark-1", 0),
        "spark-2": document("spark-2", 1, memory=swap, units=dead),
    }
    result = screen(documents, [])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "spark-1" in out and "spark-2" in out
    assert "healthy: tiny-lab" in out
    assert "headless rank 1 (API on 192.168.100.1)" in out
    assert "llmfleet-vllm running for 2h" in out
    assert "llmfleet-vllm failed, 5 restarts" in out
    assert "swap on: 8.0 GiB (1.0 GiB used) /swap.img" in out
    assert "enp1s0f1np1 up 200000Mb/s MTU 9000 192.168.100.2/24" in out
    assert "TP 2 x PP 1, rank 0 of 2 node(s)" in out
    assert "GPU 0 NVIDIA GB10: free 11.2 of 119.67 GiB, page cache 80.0 GiB" in out
    assert "Last benchmark (2026-11-24T10:00:00Z): c1: 32 ok, 0 errors" in out


def test_vllm_in_the_ray_head_container_and_a_node_with_ray_workers_only(screen: Any) -> None:
    ray = {"ok": True, "nodes": "2", "expected": "2", "head": "spark-1", "deployment": "container",
           "container": "llmfleet-ray", "error": None}  # fmt: skip
    head = document("spark-1", 0)
    head["node"]["layout"] |= {"nnodes": None, "distributed_executor_backend": "ray"}
    worker = document("spark-2", 1, layout=None)
    for doc in (head, worker):
        doc["ray"] = ray
        doc["vllm"] |= {"executor": "ray", "deployment": "container"}
    result = screen({"spark-1": head, "spark-2": worker}, [])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "TP 2 x PP 1 over Ray's nodes (vLLM in the Ray head container llmfleet-ray)" in out
    assert "Ray executor's worker: ranks in Ray container llmfleet-ray (API on spark-1)" in out
    assert "not configured" not in out


def test_an_unreachable_host_shows_why_and_the_json_has_everything(screen: Any) -> None:
    failures = [Failure(host="spark-2", task="Gathering", msg="ssh: connect timed out",
                        unreachable=True)]  # fmt: skip
    result = screen({"spark-1": document("spark-1", 0)}, failures)
    assert result.exit_code == 3
    assert "unreachable: ssh: connect timed out" in result.output
    result = screen({"spark-1": document("spark-1", 0)}, failures, "--json")
    data = json.loads(result.stdout)
    assert data["hosts"]["spark-1"]["vllm"]["models"] == ["tiny-lab"]
    assert data["not_read"] == {"spark-2": "unreachable: ssh: connect timed out"}


def mac_document(**agent: Any) -> dict[str, Any]:
    """What the mlx_server role's status entry point reads on a Mac Studio."""
    return {
        "host": "mac-studio-1",
        "platform": "macos",
        "mlx": {
            "time": 1_000_000.0,
            "agent": {"label": "com.llmfleet.vllm-mlx", "installed": True, "loaded": True,
                      "running": True, "pid": 48211, "last_exit_status": 0,
                      "plist": "/Library/LaunchDaemons/com.llmfleet.vllm-mlx.plist",
                      **agent},
            "url": "http://127.0.0.1:8000",
            "served_model_name": "qwen2.5-coder-32b",
            "health": 200 if agent.get("running", True) else None,
            "health_error": None if agent.get("running", True) else "Connection refused",
            "models": ["qwen2.5-coder-32b"] if agent.get("running", True) else [],
            "memory": {"total_bytes": 192 * GIB,
                       "swap": {"total_bytes": 2 * GIB, "used_bytes": 0}},
            "log": {"path": "/Users/dev/Library/Logs/llmfleet/vllm-mlx.log", "lines": []},
        },
        "benchmark": None,
    }  # fmt: skip


def test_a_mac_shows_its_launchdaemon_health_and_swap(screen: Any) -> None:
    result = screen({"mac-studio-1": mac_document()}, [])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "com.llmfleet.vllm-mlx (launchd) running, PID 48211" in text
    assert "vllm-mlx healthy: qwen2.5-coder-32b" in text
    assert "one vllm-mlx process (MLX, unified memory)" in text
    assert "unified memory 192.0 GiB" in text and "swap in use: 0.0 GiB of 2.0 GiB" in text
    stopped = screen(
        {"mac-studio-1": mac_document(running=False, pid=None, last_exit_status=1)}, []
    )
    text = " ".join(stopped.output.split())
    assert "com.llmfleet.vllm-mlx (launchd) not running, last exit status 1" in text
    assert "vllm-mlx not answering: Connection refused" in text
    absent = screen(
        {"mac-studio-1": mac_document(installed=False, loaded=False, running=False)}, []
    )
    assert "com.llmfleet.vllm-mlx (launchd) not installed" in " ".join(absent.output.split())


PROBE_READY = {
    "phase": "ready",
    "ready_since": 1_000_000.0 - 3600,
    "failures": 0,
    "last_failure": None,
    "last_heal": {
        "epoch": 1_000_000.0 - 5400,
        "time": "2026-11-24T08:30:00Z",
        "reason": "3 requests in a row got no answer (last: no answer within 20 s)",
        "by": "probe",
    },
    "stale": False,
}


def test_the_probes_word_answers_requests_since_and_the_last_heal(screen: Any) -> None:
    result = screen({"spark-1": document("spark-1", 0, probe=PROBE_READY)}, [])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.replace("│", " ").split())
    assert "answers requests: tiny-lab for 1h" in out
    assert "last heal 1h ago: 3 requests in a row got no answer" in out


def test_an_api_that_answers_health_but_not_requests_says_so(screen: Any) -> None:
    failing = PROBE_READY | {
        "phase": "failing",
        "last_failure": "HTTP 500: EngineCore encountered an issue.",
        "last_heal": None,
    }
    result = screen({"spark-1": document("spark-1", 0, probe=failing)}, [])
    out = " ".join(result.output.replace("│", " ").split())
    assert "answers /health but does not generate: HTTP 500: EngineCore" in out
    warming = screen(
        {"spark-1": document("spark-1", 0, probe=PROBE_READY | {"phase": "starting"})}, []
    )
    assert "warming up: tiny-lab" in warming.output
    stale = screen({"spark-1": document("spark-1", 0, probe=PROBE_READY | {"stale": True})}, [])
    assert "probe: not running" in " ".join(stale.output.replace("│", " ").split())
