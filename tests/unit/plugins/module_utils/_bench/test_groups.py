"""The load each serving group carried, read from each group's own vLLM counters, and the
session id a session's requests carry for a gateway to keep it on one group."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ansible_collections.llmfleet.cluster.plugins.module_utils._bench import groups as _bench_groups
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench import (
    load_generator as _load_generator,
)

from tests.unit.plugins.fake_llm_server import API_KEY, MODEL, FakeLlmServer, free_port
from tests.unit.plugins.module_utils._bench.test_sessions import session

StartServer = Callable[..., FakeLlmServer]

SESSIONS = session(turns=2)
SHORT = {
    "name": "short",
    "concurrency": 2,
    "requests": 4,
    "prompt_tokens": 32,
    "max_tokens": 4,
    "warmup": False,
}


def test_counters_are_the_served_models_only() -> None:
    text = (
        'vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 3.0\n'
        'vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 2.0\n'
        'vllm:request_success_total{engine="0",finished_reason="stop",model_name="other"} 9.0\n'
        'vllm:prefix_cache_queries_total{engine="0",model_name="m"} 100.0\n'
        'vllm:prefix_cache_hits_total{engine="0",model_name="m"} 40.0\n'
    )
    assert _bench_groups.parse_group_counters(text, "m") == {
        "requests": 5.0,
        "queries": 100.0,
        "hits": 40.0,
    }
    assert _bench_groups.parse_group_counters("", "m") == {
        "requests": 0.0,
        "queries": None,
        "hits": None,
    }


def test_the_load_is_each_groups_requests_and_share() -> None:
    before = {"a": {"requests": 10.0}, "b": {"requests": 4.0}, "c": None}
    after = {"a": {"requests": 16.0}, "b": {"requests": 6.0}, "c": {"requests": 1.0}}
    assert _bench_groups.group_load(before, after) == [
        {"name": "a", "requests": 6, "share": 0.75},
        {"name": "b", "requests": 2, "share": 0.25},
        {"name": "c", "requests": None, "share": None},
    ]


def test_groups_need_names_once_and_urls() -> None:
    assert _bench_groups.group_problems(
        [{"name": "a", "url": "http://h:8000"}, {"name": "a", "url": "ftp://h"}, {"url": "x"}]
    ) == [
        "groups has a twice; expected one entry per group",
        "groups[2] (a): url must be an http:// or https:// URL with a host, got 'ftp://h'",
        "groups[3] needs a name and a url, got {'url': 'x'}",
    ]
    assert _bench_groups.group_problems([]) == []


def test_each_scenario_reports_the_load_of_every_group(fake_server: StartServer) -> None:
    served, idle = fake_server(), fake_server()
    groups = [
        {"name": "serving_1", "url": served.url},
        {"name": "serving_2", "url": idle.url},
        {"name": "gone", "url": f"http://127.0.0.1:{free_port()}"},
    ]
    result = _load_generator.run_benchmark(
        served.url, MODEL, [SHORT, SESSIONS], api_key=API_KEY, groups=groups
    )
    short, sessions = result["scenarios"]
    assert short["by_group"] == [
        {"name": "serving_1", "requests": 4, "share": 1.0},
        {"name": "serving_2", "requests": 0, "share": 0.0},
        {"name": "gone", "requests": None, "share": None},
    ]
    assert sessions["by_group"][0] == {"name": "serving_1", "requests": 6, "share": 1.0}
    # A group that cannot be read leaves the summed prefix-cache figures unknown.
    assert all(turn["prefix_cache_hit_ratio"] is None for turn in sessions["by_turn"])


def sessions_through(served: FakeLlmServer, other: FakeLlmServer) -> dict[str, Any]:
    """The session scenario sent to ``served``, the counters read at both groups."""
    groups = [{"name": "serving_1", "url": served.url}, {"name": "serving_2", "url": other.url}]
    result = _load_generator.run_benchmark(
        served.url, MODEL, [SESSIONS], api_key=API_KEY, groups=groups
    )
    sessions: dict[str, Any] = result["scenarios"][0]
    return sessions


def test_the_prefix_cache_of_a_run_through_groups_sums_theirs(fake_server: StartServer) -> None:
    sessions = sessions_through(fake_server(), fake_server())
    later = sessions["by_turn"][1]
    assert later["prefix_cache_hit_ratio"] >= 0.9
    assert later["prefill_cached_tokens"] + later["prefill_computed_tokens"] > 0


def test_speculative_decoding_through_groups_sums_theirs(fake_server: StartServer) -> None:
    """Both groups decode speculatively: their counters are summed like the prefix cache's;
    when one does not, the run reports no acceptance rather than half of one."""
    served = fake_server(speculative=(4, 3))
    sessions = sessions_through(served, fake_server(speculative=(4, 3)))
    assert sessions["speculative"]["acceptance_rate"] == 0.75
    assert sessions["speculative"]["mean_acceptance_length"] == 4.0
    assert sessions_through(served, fake_server())["speculative"] is None


def test_counters_behind_a_gateway_are_read_with_the_key(fake_server: StartServer) -> None:
    # The gateway's route to a group's counters, which takes the key as its API does.
    route = "/llmfleet/groups/serving_1"
    gateway = fake_server(metrics_path=f"{route}/metrics", metrics_key=True)
    groups = [{"name": "serving_1", "url": gateway.url + route}]
    keyed = _bench_groups.Groups(groups, MODEL, api_key=API_KEY)
    unkeyed = _bench_groups.Groups(groups, MODEL)
    assert asyncio.run(keyed.read())["serving_1"] == {"requests": 0.0, "queries": 0.0, "hits": 0.0}
    assert asyncio.run(unkeyed.read()) == {"serving_1": None}
    assert gateway.headers[0]["authorization"] == f"Bearer {API_KEY}"
    assert "authorization" not in gateway.headers[1]


def test_a_sessions_requests_carry_one_id_of_their_own(fake_server: StartServer) -> None:
    server = fake_server()
    _load_generator.run_benchmark(server.url, MODEL, [SESSIONS], api_key=API_KEY)
    chats = [h for h in server.headers if "content-length" in h][1:]  # after calibration
    ids = [h["x-claude-code-session-id"] for h in chats]
    assert len(ids) == 6 and len(set(ids)) == 3
    first_turn, second_turn = ids[:3], ids[3:]
    assert sorted(first_turn) == sorted(second_turn)
    assert all(session_id.rsplit("-s", 1)[1] in {"000", "001", "002"} for session_id in ids)
