"""The session scenario: Claude Code-shaped sessions against the fake server, whose prefix
cache counts shared words the way vLLM's counts shared tokens."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench import (
    load_generator as _load_generator,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench import (
    sessions as _bench_sessions,
)

from tests.unit.plugins.fake_llm_server import API_KEY, MODEL, FakeLlmServer

StartServer = Callable[..., FakeLlmServer]


def session(name: str = "sessions", **values: Any) -> dict[str, Any]:
    base = {
        "name": name,
        "kind": "session",
        "sessions": 3,
        "turns": 3,
        "system_tokens": 200,
        "tool_tokens": 1200,
        "turn_tokens": 60,
        "prompt_tokens": 40,
        "max_tokens": 4,
        "warmup": False,
    }
    base.update(values)
    return base


def test_a_session_scenario_needs_sessions_and_turns_and_no_request_count() -> None:
    problems = _load_generator.validate_scenarios(
        [session("a", sessions=None, turn_tokens=-1), session("b", requests=8, turns=0)]
    )
    assert problems == [
        "scenario 'a': sessions must be a positive integer, got None (a session scenario)",
        "scenario 'a': turn_tokens must be a whole number, 0 or more, got -1 (a session scenario)",
        "scenario 'b': turns must be a positive integer, got 0 (a session scenario)",
        "scenario 'b': a session scenario sends sessions x turns requests; leave requests out",
    ]
    assert _load_generator.validate_scenarios([session(turn_tokens=0)]) == []


def test_the_plan_counts_sessions_times_turns() -> None:
    [plan] = _load_generator.plan("http://x", MODEL, [session(sessions=4, turns=5)])["scenarios"]
    assert plan == {
        "name": "sessions",
        "kind": "session",
        "warmup": False,
        "concurrency": 4,
        "requests": 20,
        "prompt_tokens_target": 40,
        "max_tokens": 4,
        "sessions": 4,
        "turns": 5,
        "system_tokens": 200,
        "tool_tokens": 1200,
        "turn_tokens": 60,
    }


def test_every_turn_re_sends_the_one_before_and_sessions_share_system_and_tools() -> None:
    scenario = session()
    system, tools = _bench_sessions.shared_prefix("run1", scenario, 1.0)
    assert system.startswith("run1 ")
    assert tools[0]["function"]["description"].startswith("run1 ")
    assert [tool["function"]["name"] for tool in tools] == list(_bench_sessions.TOOL_NAMES)
    # About tool_tokens in all (a filler word is a token here; JSON splits into fewer words
    # than a tokenizer makes tokens of it).
    words = sum(len(json.dumps(tool).split()) for tool in tools)
    assert 0.75 * 1200 <= words <= 1.25 * 1200, words
    turns = [
        _bench_sessions.session_messages("run1", scenario, 1.0, system, session=1, turn=turn)
        for turn in range(3)
    ]
    for earlier, later in itertools.pairwise(turns):
        assert later[: len(earlier)] == earlier
        assert [m["role"] for m in later[len(earlier) :]] == ["assistant", "tool"]
    call = turns[2][2]["tool_calls"][0]
    assert turns[2][3]["tool_call_id"] == call["id"] and call["function"]["name"] == "Read"
    other = _bench_sessions.session_messages("run1", scenario, 1.0, system, session=2, turn=0)
    assert other[0] == turns[0][0] and other[1] != turns[0][1]


def test_prefix_counters_are_read_for_the_served_model_only() -> None:
    text = (
        'vllm:prefix_cache_queries_total{engine="0",model_name="m"} 100.0\n'
        'vllm:prefix_cache_queries_total{engine="1",model_name="m"} 20.0\n'
        'vllm:prefix_cache_hits_total{engine="0",model_name="m"} 90.0\n'
        'vllm:prefix_cache_hits_total{engine="0",model_name="other"} 5.0\n'
        "vllm:prefix_cache_hits_created 1.7e9\n"
    )
    assert _bench_sessions.parse_prefix_counters(text, "m") == {"queries": 120.0, "hits": 90.0}
    assert _bench_sessions.parse_prefix_counters("# nothing\n", "m") is None


def test_sessions_end_to_end(fake_server: StartServer, tmp_path: Path) -> None:
    server = fake_server()
    progress = tmp_path / "progress.json"
    result = _load_generator.run_benchmark(
        server.url, MODEL, [session()], api_key=API_KEY, progress_file=str(progress)
    )
    [run] = result["scenarios"]
    assert (run["kind"], run["requests"], run["ok"], run["errors"]) == ("session", 9, 9, 0)
    assert server.max_in_flight == 3
    assert json.loads(progress.read_text())["done"] == json.loads(progress.read_text())[
        "requests"
    ] == 9  # fmt: skip
    bodies = server.bodies[1:]  # after the calibration request
    assert all(body["tools"] == bodies[0]["tools"] for body in bodies)
    # Lockstep: every session's turn 1, then every session's turn 2...
    assert [len(body["messages"]) for body in bodies] == [2] * 3 + [4] * 3 + [6] * 3
    turns = run["by_turn"]
    assert [t["turn"] for t in turns] == [1, 2, 3]
    assert all(t["ok"] == 3 and t["ttft_s"]["p50"] is not None for t in turns)
    # The first turn computes the shared prefix once and each task; the later ones re-send
    # what the cache holds and compute only the new call and result.
    assert turns[0]["prefix_cache_hit_ratio"] < 0.8, turns[0]
    for later in turns[1:]:
        assert later["prefix_cache_hit_ratio"] >= 0.9, later
        assert later["prefill_computed_tokens"] < later["prefill_cached_tokens"]
    assert turns[2]["prompt_tokens_per_request"] > turns[0]["prompt_tokens_per_request"]
    assert run["session_wall_s"]["max"] <= run["duration_s"]


def test_without_metrics_the_prefix_cache_is_not_reported(fake_server: StartServer) -> None:
    server = fake_server(metrics=False)
    result = _load_generator.run_benchmark(server.url, MODEL, [session(turns=2)], api_key=API_KEY)
    [run] = result["scenarios"]
    assert run["ok"] == 6
    assert {t["prefix_cache_hit_ratio"] for t in run["by_turn"]} == {None}
    assert {t["prefill_computed_tokens"] for t in run["by_turn"]} == {None}


def test_speculative_decoding_is_reported_from_vllms_counters(fake_server: StartServer) -> None:
    """4 tokens proposed per draft, 2 accepted: vLLM's acceptance rate 0.5 and its mean
    acceptance length 3 (tokens per step), per turn and over the scenario."""
    server = fake_server(speculative=(4, 2))
    result = _load_generator.run_benchmark(server.url, MODEL, [session(turns=2)], api_key=API_KEY)
    [run] = result["scenarios"]
    assert run["speculative"] == {
        "drafts": 6, "draft_tokens": 24, "accepted_tokens": 12,
        "acceptance_rate": 0.5, "mean_acceptance_length": 3.0,
    }  # fmt: skip
    assert [t["speculative"]["drafts"] for t in run["by_turn"]] == [3, 3]


def test_without_speculative_counters_there_is_no_acceptance(fake_server: StartServer) -> None:
    result = _load_generator.run_benchmark(
        fake_server().url, MODEL, [session(turns=1)], api_key=API_KEY
    )
    [run] = result["scenarios"]
    assert run["speculative"] is None
    assert run["by_turn"][0]["speculative"] is None


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (None, None),
        ({"queries": 1, "hits": 0}, {"queries": 2, "hits": 1}),
        # No draft between the reads (a turn with one token each): nothing to divide.
        ({"drafts": 5, "draft_tokens": 20, "accepted_tokens": 9},) * 2,
    ],
)
def test_no_acceptance_without_counters_or_drafts(before: Any, after: Any) -> None:
    assert _bench_sessions.speculative_acceptance(before, after) is None


@pytest.mark.parametrize(
    ("scenario", "largest"),
    [(session(), 200 + 1200 + 40 + 2 * (60 + _bench_sessions.TOOL_FRAME_TOKENS))],
)
def test_the_largest_prompt_is_the_last_turn(scenario: dict[str, Any], largest: int) -> None:
    assert _bench_sessions.largest_prompt_tokens(scenario) == largest
