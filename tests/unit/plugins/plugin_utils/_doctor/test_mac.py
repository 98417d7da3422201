"""llmfleet doctor on a Mac Studio (vllm-mlx under launchd): each check passes on a healthy
Mac and finds its problem, with evidence and a fix, on a broken one; a mixed inventory
judges each host by its own checks."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._doctor import findings as doctor

from .test_findings import cluster

GIB = 1 << 30


def healthy_mac() -> dict[str, Any]:
    """What playbooks/doctor.yml keeps of a Mac (the mlx_server role's status reading)."""
    return {
        "host": "mac-studio-1",
        "platform": "macos",
        "mlx": {
            "agent": {"label": "com.llmfleet.vllm-mlx", "installed": True, "loaded": True,
                      "running": True, "pid": 48211, "last_exit_status": 0,
                      "plist": "/Library/LaunchDaemons/com.llmfleet.vllm-mlx.plist"},
            "url": "http://127.0.0.1:8000",
            "served_model_name": "qwen2.5-coder-32b",
            "health": 200,
            "health_error": None,
            "models": ["qwen2.5-coder-32b"],
            "memory": {"total_bytes": 192 * GIB, "swap": {"total_bytes": 2 * GIB, "used_bytes": 0}},
            "log": {"path": "/Users/dev/Library/Logs/llmfleet/vllm-mlx.log",
                    "lines": ["2026-11-24T10:00:00.000000Z ValueError: model not found", ""]},
        },
    }  # fmt: skip


def statuses(found: list[dict[str, Any]]) -> dict[str, str]:
    return {item["check"]: item["status"] for item in found}


def test_a_healthy_mac_passes_every_mac_check_and_no_other() -> None:
    found = doctor.findings([healthy_mac()])
    assert statuses(found) == {"mlx_agent": "ok", "mlx_api": "ok", "mlx_swap": "ok"}
    assert all(item["fix"] is None for item in found)


def test_a_mixed_inventory_judges_each_host_by_its_own_checks() -> None:
    found = doctor.findings([*cluster(), healthy_mac()])
    assert {item["check"] for item in found if item["host"] == "mac-studio-1"} == {
        "mlx_agent",
        "mlx_api",
        "mlx_swap",
    }
    assert not [item for item in found if item["status"] == "problem"], found


@pytest.mark.parametrize(
    ("check", "change", "evidence"),
    [
        (
            "mlx_agent",
            {"running": False, "pid": None, "last_exit_status": 1},
            "loaded without a process, last exit status 1; its log ends: "
            "2026-11-24T10:00:00.000000Z ValueError: model not found",
        ),
        (
            "mlx_agent",
            {"loaded": False, "running": False},
            "launchd's system domain has no service com.llmfleet.vllm-mlx",
        ),
        (
            "mlx_agent",
            {"installed": False, "loaded": False, "running": False},
            "no LaunchDaemon at",
        ),
    ],
)
def test_a_daemon_that_does_not_run_says_why(check: str, change: dict, evidence: str) -> None:
    mac = healthy_mac()
    mac["mlx"]["agent"].update(change)
    (problem,) = [item for item in doctor.findings([mac]) if item["status"] == "problem"]
    assert problem["check"] == check and evidence in problem["evidence"], problem
    assert "llmfleet up" in problem["fix"]


def test_an_api_that_does_not_answer_or_serves_another_model() -> None:
    down = healthy_mac()
    down["mlx"].update(health=None, health_error="Connection refused", models=[])
    found = {item["check"]: item for item in doctor.findings([down])}
    assert found["mlx_api"]["status"] == "problem"
    assert found["mlx_api"]["evidence"] == "http://127.0.0.1:8000/health: Connection refused"
    other = copy.deepcopy(healthy_mac())
    other["mlx"]["models"] = ["mlx-community/Qwen2.5-Coder-32B-Instruct-8bit"]
    found = {item["check"]: item for item in doctor.findings([other])}
    assert found["mlx_api"]["status"] == "problem"
    assert "clients ask for qwen2.5-coder-32b" in found["mlx_api"]["evidence"]


def test_swap_in_use_beyond_a_gib_means_the_model_does_not_fit() -> None:
    mac = healthy_mac()
    mac["mlx"]["memory"]["swap"]["used_bytes"] = GIB // 2
    assert statuses(doctor.findings([mac]))["mlx_swap"] == "ok"
    mac["mlx"]["memory"]["swap"]["used_bytes"] = 6 * GIB
    found = {item["check"]: item for item in doctor.findings([mac])}
    assert found["mlx_swap"]["status"] == "problem"
    assert found["mlx_swap"]["evidence"] == "6.0 GiB of swap in use, 192 GiB of unified memory"
