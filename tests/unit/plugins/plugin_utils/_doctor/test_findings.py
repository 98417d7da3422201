"""plugin_utils/_doctor/findings: every check of llmfleet doctor passes on a healthy
two-Spark group and finds its problem, with evidence and a fix, when that one thing is broken."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._doctor import findings as doctor

GIB = 1 << 30
NETDEVS = ("enp1s0f1np1", "enP2p1s0f1np1")
FABRIC_ENVIRON = {"NCCL_SOCKET_IFNAME": NETDEVS[0], "GLOO_SOCKET_IFNAME": NETDEVS[0]}
# What nccl_env's wrapper exported at the start of vLLM and Ray (nccl_env_gid_index auto).
GID_ENVIRON = {"NCCL_IB_GID_INDEX": "3"}


def healthy_host(host: str, rank: int) -> dict[str, Any]:
    environ = {**FABRIC_ENVIRON, **GID_ENVIRON}
    return {
        "host": host,
        "group": ["spark-1", "spark-2"],
        "expect": {
            "fabric_interface": NETDEVS[0],
            "nccl_mode": "ib",
            "executor": "ray",
            "ray_cluster": True,
            "memory_usage_threshold": "0.97",
            "object_store_bytes": 2 * GIB,
            "min_link_mbps": 200000,
            "max_clock_skew_s": 1.0,
        },
        "node": {
            "links": [
                {
                    "name": name,
                    "present": True,
                    "operstate": "up",
                    "mtu": 9000,
                    "speed_mbps": 200000,
                    "ipv4": [f"192.168.{100 + half}.{11 + rank}/24"],
                }
                for half, name in enumerate(NETDEVS)
            ],
            "memory": {"swap_total_bytes": 0, "swap_used_bytes": 0, "swap_devices": []},
            "processes": {
                "vllm": [
                    {"pid": 100, "cmdline": "vllm serve --config serve.yaml", "environ": environ}
                ]
                if rank == 0
                else [],
                "raylet": [
                    {
                        "pid": 50,
                        "cmdline": "raylet --node_ip_address=x",
                        "environ": {"RAY_memory_usage_threshold": "0.97", **GID_ENVIRON},
                    }
                ],
            },
            "packages": {"vllm": "0.11.0"},
            "images": {"llmfleet-ray": {"image_id": "sha256:" + "a" * 64}},
            "serving": {"current": {"profile": "minimax", "model_revision": "abc", "image": "x"}},
        },
        "gpu": {
            "gpus": [{"index": 0}],
            "fits": True,
            "drop_cache_before_restart": False,
            "msg": "GPU 0: free 100 GiB",
        },
        "vllm": {
            "serves_api": rank == 0,
            "health": 200 if rank == 0 else None,
            "generation": {"status": 200, "error": None} if rank == 0 else None,
        },
        "ray": {"ok": True, "nodes": 2, "expected": 2, "object_store_bytes": 2 * GIB},
        # The environment file pins no index (nccl_env_gid_index auto).
        "nccl_env": {},
        "rdma": {"gid_index": 3, "device": "rocep1s0f1"},
        "traffic": {"moved_bytes": 1 << 20},
        "clock": {"node": 1000.2, "before": 1000.0, "after": 1000.4},
    }


def cluster() -> list[dict[str, Any]]:
    return [healthy_host("spark-1", 0), healthy_host("spark-2", 1)]


def test_a_healthy_group_has_no_problem_and_every_check_speaks() -> None:
    found = doctor.findings(cluster())
    assert [f for f in found if f["status"] != "ok"] == []
    assert {f["check"] for f in found} == {check.__name__[6:] for check in doctor.CHECKS}


Breakage = Callable[[list[dict[str, Any]]], None]


def _set(path: str, value: Any, host: int = 1) -> Breakage:
    def apply(docs: list[dict[str, Any]]) -> None:
        target: Any = docs[host]
        *keys, last = path.split(".")
        for key in keys:
            target = target[int(key)] if key.isdigit() else target[key]
        target[last] = value

    return apply


BROKEN: dict[str, tuple[Breakage, int, str]] = {
    "ray_client": (
        _set("node.processes.vllm", [{"pid": 7, "cmdline": "vllm serve --address ray://h:10001",
                                      "environ": FABRIC_ENVIRON}], 0),
        0, "ray://",
    ),
    # The address in the environment only (seed 004 exported it in the shell).
    "ray_client_from_environment": (
        _set("node.processes.vllm.0.environ", {**FABRIC_ENVIRON, "RAY_ADDRESS": "ray://h:10001"},
             0),
        0, "serve.yaml with RAY_ADDRESS=ray://h:10001",
    ),
    "ranks": (_set("vllm.health", 503, 0), 0, "does not answer /health"),
    # Rank 1 rebooted: rank 0 answers /health and fails every request.
    "generation": (
        _set("vllm.generation", {"status": 500, "error": "EngineCore encountered an issue."}, 0),
        0, "answers /health but does not generate: HTTP 500 EngineCore encountered an issue.",
    ),
    "socket_interface": (
        _set("node.processes.vllm.0.environ", {"NCCL_SOCKET_IFNAME": NETDEVS[0],
                                               "GLOO_SOCKET_IFNAME": "eth0"}, 0),
        0, "GLOO_SOCKET_IFNAME=eth0",
    ),
    "rdma_traffic": (_set("traffic.moved_bytes", 8936), 1, "8936 bytes"),
    "peer_links": (_set("node.links.0.mtu", 1500), 1, "MTU 1500 here, 9000 on spark-1"),
    "link_rate": (_set("node.links.1.operstate", "down"), 1, "enP2p1s0f1np1 down (rail down)"),
    # After a reboot the fabric address's GID moved to 5; Ray on spark-2 started with 3.
    "gid_index": (_set("rdma.gid_index", 5), 1, "raylet pid 50 started with NCCL_IB_GID_INDEX=3"),
    "swap": (
        _set("node.memory", {"swap_total_bytes": 8 * GIB, "swap_used_bytes": GIB,
                             "swap_devices": ["/swap.img"]}),
        1, "swap of 8.0 GiB on /swap.img (1.0 GiB used)",
    ),
    # Fits only once the page cache is dropped, and nothing drops it (preflight_drop_caches
    # never): test_a_fit_that_needs_the_page_cache_the_collection_drops_is_no_problem has the
    # collection drop it.
    "page_cache": (_set("gpu.drop_cache_before_restart", True), 1, "GPU 0"),
    "versions": (
        _set("node.packages", {"vllm": "0.12.0"}), 0, "vLLM: spark-1 0.11.0, spark-2 0.12.0",
    ),
    "ray_settings": (
        _set("node.processes.raylet.0.environ", {}), 1, "RAY_memory_usage_threshold=unset",
    ),
    "clock": (_set("clock.node", 1003.0), 1, "+2.800 s"),
}  # fmt: skip


@pytest.mark.parametrize("check", sorted(BROKEN))
def test_each_check_finds_its_problem_with_evidence_and_a_fix(check: str) -> None:
    breakage, host_index, evidence = BROKEN[check]
    docs = cluster()
    breakage(docs)
    problems = [f for f in doctor.findings(docs) if f["status"] == "problem"]
    assert {f["check"] for f in problems} == {check.removesuffix("_from_environment")}, problems
    # A mismatch between peers is a problem on both of them.
    (problem,) = [f for f in problems if f["host"] == docs[host_index]["host"]]
    assert evidence in problem["evidence"]
    assert problem["fix"]


def test_a_fit_that_needs_the_page_cache_the_collection_drops_is_no_problem() -> None:
    """Right after `llmfleet up` on unified memory: vLLM holds its memory, the page cache
    holds the rest, and preflight drops it before vLLM restarts (when_short)."""
    docs = cluster()
    for doc in docs:
        doc["gpu"].update(drop_cache_before_restart=True, page_cache_dropped_before_restart=True)
    findings = [f for f in doctor.findings(docs) if f["check"] == "page_cache"]
    assert [f["status"] for f in findings] == ["ok", "ok"], findings
    assert "dropped before vLLM restarts (preflight_drop_caches)" in findings[0]["evidence"]
    # Short even with the page cache counted: a problem, whatever drops it.
    docs[1]["gpu"]["fits"] = False
    [problem] = [f for f in doctor.findings(docs) if f["status"] == "problem"]
    assert (problem["check"], problem["host"]) == ("page_cache", "spark-2")


def test_a_probe_that_gave_up_healing_is_a_problem_with_its_last_heal() -> None:
    docs = cluster()
    docs[0]["node"]["probe"] = {
        "phase": "given up",
        "last_failure": "HTTP 500: EngineCore encountered an issue.",
        "last_heal": {
            "time": "2026-11-26T21:40:24Z",
            "reason": "3 requests in a row got no answer",
        },
    }
    [problem] = [f for f in doctor.findings(docs) if f["status"] == "problem"]
    assert problem["check"] == "generation" and problem["host"] == "spark-1"
    assert problem["evidence"] == (
        "the serving probe gave up healing: HTTP 500: EngineCore encountered an issue.;"
        " last heal 2026-11-26T21:40:24Z: 3 requests in a row got no answer"
    )


def test_checks_that_do_not_apply_stay_silent_and_missing_evidence_is_skipped() -> None:
    docs = cluster()
    for doc in docs:
        doc["expect"] |= {"nccl_mode": "socket", "executor": "mp", "ray_cluster": False}
    checks = {f["check"] for f in doctor.findings(docs)}
    assert not {"ray_client", "rdma_traffic", "gid_index", "ray_settings"} & checks

    single = [copy.deepcopy(cluster()[0])]
    single[0]["group"] = ["spark-1"]
    assert not {"ranks", "peer_links", "versions", "socket_interface"} & {
        f["check"] for f in doctor.findings(single)
    }

    unread = cluster()
    unread[0]["node"]["processes"]["vllm"][0]["environ"] = None
    unread[1]["traffic"] = None
    skipped = {f["check"]: f for f in doctor.findings(unread) if f["status"] == "skipped"}
    assert set(skipped) == {"socket_interface", "rdma_traffic"}
    assert "needs root" in skipped["socket_interface"]["evidence"]


def gid_finding(doc: dict[str, Any]) -> dict[str, Any]:
    (found,) = [f for f in doctor.findings([doc]) if f["check"] == "gid_index"]
    return found


def test_the_gid_index_compared_is_the_one_each_process_started_with() -> None:
    """vLLM started before the reboot's table, raylet after: only vLLM's is stale."""
    doc = healthy_host("spark-1", 0)
    doc["rdma"]["gid_index"] = 5
    doc["node"]["processes"]["raylet"][0]["environ"]["NCCL_IB_GID_INDEX"] = "5"
    found = gid_finding(doc)
    assert found["status"] == "problem"
    assert found["evidence"] == (
        "vLLM pid 100 started with NCCL_IB_GID_INDEX=3; the RoCE v2 GID of the fabric address"
        " on rocep1s0f1 is at index 5"
    )
    assert "systemctl restart llmfleet-ray llmfleet-vllm" in found["fix"]

    doc["node"]["processes"]["vllm"][0]["environ"]["NCCL_IB_GID_INDEX"] = "5"
    found = gid_finding(doc)
    assert found["status"] == "ok"
    assert "raylet pid 50 started with NCCL_IB_GID_INDEX=5" in found["evidence"]


def test_a_pinned_index_the_device_no_longer_has_is_a_problem_of_the_setting() -> None:
    doc = healthy_host("spark-1", 0)
    doc["nccl_env"] = {"NCCL_IB_GID_INDEX": "7"}
    found = gid_finding(doc)
    assert found["status"] == "problem"
    assert "NCCL_IB_GID_INDEX=7 pinned in the environment file" in found["evidence"]
    assert "vLLM pid" not in found["evidence"]
    assert found["fix"].startswith("set nccl_env_gid_index to auto (or 3)")


@pytest.mark.parametrize(
    ("environ", "gid_index", "evidence"),
    [
        ({}, 3, "no running vLLM or raylet carries NCCL_IB_GID_INDEX and the environment file"
                " pins none: NCCL picks the GID itself"),
        (None, 3, "(vLLM pid 100, raylet pid 50: environment unreadable, needs root)"),
        (GID_ENVIRON, None, "rocep1s0f1 has no RoCE v2 GID now"),
    ],
)  # fmt: skip
def test_nothing_to_compare_is_skipped_with_the_reason(
    environ: dict[str, str] | None, gid_index: int | None, evidence: str
) -> None:
    doc = healthy_host("spark-1", 0)
    for name in ("vllm", "raylet"):
        doc["node"]["processes"][name][0]["environ"] = environ
    doc["rdma"]["gid_index"] = gid_index
    found = gid_finding(doc)
    assert found["status"] == "skipped"
    assert evidence in found["evidence"]
