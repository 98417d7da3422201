# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""The session scenario of a benchmark run: traffic shaped like Claude Code's.

Claude Code's load is a few long-lived sessions, each request re-sending one system prompt
and tool list (about 12K tokens, the same for every session of a team) and the session's
growing history; the prefix cache decides how much of that is computed again. A session
scenario runs ``sessions`` such sessions at once for ``turns`` turns:

* every request carries the run's shared system prompt (``system_tokens``) and a list of
  ``TOOL_NAMES`` tool definitions (``tool_tokens`` in all), the run's nonce first, so a run
  never reuses an earlier run's cache but its sessions share one another's;
* turn 1 is the session's task (``prompt_tokens``, the session's nonce first); each later
  turn re-sends everything before it plus the previous turn's tool call (a ``Read``, as
  Claude Code re-sends the model's ``tool_use``) and its result (``turn_tokens``);
* every request of a session carries its id in ``SESSION_HEADER``, as Claude Code's do, so
  that a serving gateway keeps the session on one group;
* the turns run in lockstep (every session's turn n, then turn n+1), so that vLLM's
  prefix-cache counters (``/metrics``, read before and after each turn) belong to one turn.

The shape (block sizes, growth per turn) is the one a real Claude Code request to the lab
showed: docs/benchmarks.md. ``run_session_scenario`` returns the usual scenario metrics over
all requests plus ``by_turn`` (one entry per turn index) and ``session_wall_s``.
"""

from __future__ import annotations

import asyncio
import json
import re

from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.latency_metrics import (
    scenario_metrics,
    summarize,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.prompts import (
    chat_body,
    filler_words,
    words_for_tokens,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._http.chat_client import clock
from ansible_collections.llmfleet.cluster.plugins.module_utils._http.stream import (
    body_pieces,
    build_request,
    read_head,
)

KIND = "session"
SESSION_INT_KEYS = ("sessions", "turns", "system_tokens", "tool_tokens", "turn_tokens")
# Claude Code's own tools, the names a model trained for it expects.
TOOL_NAMES = (
    "Bash", "Read", "Edit", "Write", "Glob", "Grep",
    "Agent", "TodoWrite", "WebFetch", "WebSearch", "NotebookEdit", "Skill",
)  # fmt: skip
# The JSON around a tool's descriptions, in tokens (name, schema keys, punctuation).
TOOL_FRAME_TOKENS = 40
# Filler indexes of the pieces of a session scenario (the requests' prompts use 0 onwards).
SYSTEM_INDEX = 1_000_000
TOOL_INDEX = 1_100_000
TASK_INDEX = 1_200_000
RESULT_INDEX = 2_000_000
METRICS_PATH = "/metrics"
# Claude Code names its session in this header on every request; a serving gateway keeps a
# session on one group by it.
SESSION_HEADER = "X-Claude-Code-Session-Id"
# A labelled vLLM counter: its name (between ``vllm:`` and ``_total``), labels, value.
COUNTER_LINE = re.compile(
    r"^vllm:([a-z_]+)_total\{([^}]*)\}\s+([0-9.eE+-]+)\s*$",
    re.MULTILINE,
)


def session_problems(label, scenario):
    """Problems with a session scenario's own keys (empty when fine)."""
    problems = []
    for key in SESSION_INT_KEYS:
        value = scenario.get(key)
        minimum = 0 if key == "turn_tokens" else 1
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            problems.append(
                "{0}: {1} must be {2}, got {3!r} (a session scenario)".format(
                    label,
                    key,
                    "a whole number, 0 or more" if minimum == 0 else "a positive integer",
                    value,
                )
            )
    if scenario.get("requests") is not None:
        problems.append(
            "{0}: a session scenario sends sessions x turns requests; leave requests out".format(
                label
            )
        )
    return problems


def session_plan(scenario):
    """What a session scenario adds to its plan (see ``scenario_plan``)."""
    return {
        "kind": KIND,
        "concurrency": scenario["sessions"],
        "requests": scenario["sessions"] * scenario["turns"],
        **{key: scenario[key] for key in SESSION_INT_KEYS},
    }


def largest_prompt_tokens(scenario):
    """About the prompt tokens of a session's last turn (the served context must hold it
    and ``max_tokens``)."""
    return (
        scenario["system_tokens"]
        + scenario["tool_tokens"]
        + scenario["prompt_tokens"]
        + (scenario["turns"] - 1) * (scenario["turn_tokens"] + TOOL_FRAME_TOKENS)
    )


def _words(tokens, tokens_per_word):
    return words_for_tokens(tokens, tokens_per_word) if tokens > 0 else 0


def shared_prefix(run_id, scenario, tokens_per_word, seed=0):
    """``(system, tools)``: the system prompt and tool list every session of the run sends,
    each starting with the run's nonce."""
    system = "{0} shared system prompt: {1}".format(
        run_id,
        " ".join(
            filler_words(_words(scenario["system_tokens"], tokens_per_word), seed, SYSTEM_INDEX)
        ),
    )
    per_tool = max(1, scenario["tool_tokens"] // len(TOOL_NAMES) - TOOL_FRAME_TOKENS)
    tools = []
    for number, name in enumerate(TOOL_NAMES):
        words = filler_words(_words(per_tool, tokens_per_word), seed, TOOL_INDEX + number)
        half = len(words) // 2
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": name,
                    # The run's nonce first here too: a chat template may render the
                    # tools before the system prompt.
                    "description": " ".join(([run_id] if number == 0 else []) + words[:half]),
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "input": {"type": "string", "description": " ".join(words[half:])}
                        },
                        "required": ["input"],
                    },
                },
            }
        )
    return system, tools


def _tool_call_id(session, turn):
    return "call_{0:03d}_{1:03d}".format(session, turn)


def session_messages(run_id, scenario, tokens_per_word, system, *, session, turn, seed=0):
    """The messages of ``turn`` (0 for the first) of ``session``: the task, then each earlier
    turn's Read call and its result."""
    task = filler_words(
        _words(scenario["prompt_tokens"], tokens_per_word), seed, TASK_INDEX + session
    )
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": "{0}-s{1:03d}: {2}".format(run_id, session, " ".join(task))},
    ]
    result_words = _words(scenario["turn_tokens"], tokens_per_word)
    for earlier in range(turn):
        call_id = _tool_call_id(session, earlier)
        path = "/work/session-{0:03d}/file-{1:03d}.py".format(session, earlier)
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "Read", "arguments": json.dumps({"input": path})},
                    }
                ],
            }
        )
        result = filler_words(result_words, seed, RESULT_INDEX + session * 1000 + earlier)
        messages.append({"role": "tool", "tool_call_id": call_id, "content": " ".join(result)})
    return messages


def model_counters(text, model):
    """Each vLLM counter of ``model`` in Prometheus text, ``{name: value}`` (the name without
    ``vllm:`` and ``_total``), summed over the other labels."""
    totals = {}
    for name, labels, value in COUNTER_LINE.findall(text or ""):
        if 'model_name="' in labels and 'model_name="{0}"'.format(model) not in labels:
            continue
        totals[name] = totals.get(name, 0.0) + float(value)
    return totals


# vLLM's speculative decoding counters (vllm/v1/spec_decode/metrics.py): drafts proposed,
# the tokens they held, the tokens the model accepted.
SPECULATIVE_COUNTERS = {
    "drafts": "spec_decode_num_drafts",
    "draft_tokens": "spec_decode_num_draft_tokens",
    "accepted_tokens": "spec_decode_num_accepted_tokens",
}


def parse_prefix_counters(text, model):
    """``{"queries": n, "hits": n}`` (tokens) from vLLM's Prometheus text for ``model``
    (summed over the other labels), with ``drafts``, ``draft_tokens`` and
    ``accepted_tokens`` when it decodes speculatively; None when the text has no prefix-cache
    counters."""
    totals = model_counters(text, model)
    if "prefix_cache_queries" not in totals or "prefix_cache_hits" not in totals:
        return None
    return {
        "queries": totals["prefix_cache_queries"],
        "hits": totals["prefix_cache_hits"],
        **speculative_counters(totals),
    }


def speculative_counters(totals):
    """The speculative decoding counters of ``model_counters``' totals, by the names of
    SPECULATIVE_COUNTERS; {} when the server does not decode speculatively."""
    if not all(name in totals for name in SPECULATIVE_COUNTERS.values()):
        return {}
    return {key: totals[name] for key, name in SPECULATIVE_COUNTERS.items()}


def speculative_acceptance(before, after):
    """Between two reads of the counters: ``acceptance_rate`` (accepted over proposed
    tokens) and ``mean_acceptance_length`` (tokens per step, 1 + accepted per draft, as vLLM
    logs it), with the counts; None without speculative counters or drafts."""
    if (
        not before
        or not after
        or any(k not in before or k not in after for k in SPECULATIVE_COUNTERS)
    ):
        return None
    moved = {key: after[key] - before[key] for key in SPECULATIVE_COUNTERS}
    if moved["drafts"] <= 0 or moved["draft_tokens"] <= 0:
        return None
    return {
        "drafts": int(moved["drafts"]),
        "draft_tokens": int(moved["draft_tokens"]),
        "accepted_tokens": int(moved["accepted_tokens"]),
        "acceptance_rate": round(moved["accepted_tokens"] / moved["draft_tokens"], 4),
        "mean_acceptance_length": round(1 + moved["accepted_tokens"] / moved["drafts"], 3),
    }


async def read_metrics_text(endpoint, ssl_context, timeout, api_key=None):
    """The Prometheus text a server's /metrics answers, or None when it has none (llama.cpp,
    vllm-mlx, a gateway) or cannot be read. ``endpoint``: ``parse_url``'s."""
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(
                endpoint["host"],
                endpoint["port"],
                ssl=ssl_context,
                server_hostname=endpoint["host"] if ssl_context else None,
            ),
            timeout,
        )
    except (OSError, asyncio.TimeoutError):
        return None
    try:
        writer.write(build_request(endpoint, METRICS_PATH, b"", api_key, method="GET"))
        await writer.drain()
        status, _reason, headers = await read_head(reader)
        data = b""
        async for piece in body_pieces(reader, status, headers):
            data += piece
    except (OSError, ValueError, asyncio.IncompleteReadError):
        return None
    finally:
        writer.close()
    if status != 200:
        return None
    return data.decode("utf-8", errors="replace")


async def read_prefix_counters(client):
    """vLLM's prefix-cache counters of the served model at the client's endpoint, or None
    when it has no /metrics or cannot be read."""
    text = await read_metrics_text(
        client.endpoint, client.ssl_context, client.timeout, client.api_key
    )
    return parse_prefix_counters(text, client.model) if text is not None else None


def turn_metrics(turn, records, duration_s, before, after):
    """One turn's entry: TTFT, the prompt tokens vLLM computed and served from its prefix
    cache (None without counters), output tokens per second of the turn's wall time."""
    ok = [r for r in records if r["ok"]]
    prompt = [r["prompt_tokens"] for r in ok if r["prompt_tokens"] is not None]
    entry = {
        "turn": turn,
        "ok": len(ok),
        "errors": len(records) - len(ok),
        "duration_s": round(duration_s, 6),
        "ttft_s": summarize([r["first"] - r["start"] for r in ok if r["first"] is not None]),
        "prompt_tokens_per_request": round(sum(prompt) / len(prompt), 1) if prompt else None,
        "output_tokens_per_s": (
            round(sum(r["output_tokens"] for r in ok) / duration_s, 4) if duration_s > 0 else None
        ),
        "prefill_cached_tokens": None,
        "prefill_computed_tokens": None,
        "prefix_cache_hit_ratio": None,
        "speculative": speculative_acceptance(before, after),
    }
    if before is not None and after is not None:
        queries = after["queries"] - before["queries"]
        hits = after["hits"] - before["hits"]
        entry["prefill_cached_tokens"] = int(hits)
        entry["prefill_computed_tokens"] = int(queries - hits)
        entry["prefix_cache_hit_ratio"] = round(hits / queries, 4) if queries > 0 else None
    return entry


def session_id(run_id, session):
    """The id a session's requests carry in ``SESSION_HEADER``, as Claude Code's carry theirs."""
    return "{0}-s{1:03d}".format(run_id, session)


async def run_session_scenario(
    client,
    scenario,
    tokens_per_word,
    run_id,
    *,
    seed=0,
    ignore_eos=True,
    on_progress=None,
    read_counters=None,
):
    """Run one session scenario; its plan's metrics (over every request), ``by_turn`` and
    ``session_wall_s`` (from a session's first request sent to its last answered).
    ``on_progress(done, errors, elapsed_s)`` is called after every finished request.
    ``read_counters()``: the prefix-cache counters read around each turn (the endpoint's own
    by default; a gateway's groups' summed, when the run knows them)."""
    read_counters = read_counters or (lambda: read_prefix_counters(client))
    system, tools = shared_prefix(run_id, scenario, tokens_per_word, seed)
    sessions = range(scenario["sessions"])
    records = []
    by_session = [[] for _session in sessions]
    turns = []
    start = clock()

    async def send(session, turn):
        messages = session_messages(
            run_id, scenario, tokens_per_word, system, session=session, turn=turn, seed=seed
        )
        record = await client.chat(
            chat_body(client.model, messages, scenario["max_tokens"], ignore_eos, tools),
            headers={SESSION_HEADER: session_id(run_id, session)},
        )
        records.append(record)
        by_session[session].append(record)
        if on_progress is not None:
            on_progress(len(records), len([r for r in records if not r["ok"]]), clock() - start)
        return record

    first = last = None
    for turn in range(scenario["turns"]):
        before = await read_counters()
        turn_start = clock()
        turn_records = await asyncio.gather(*(send(session, turn) for session in sessions))
        duration = clock() - turn_start
        after = await read_counters()
        if turn == 0:
            first = before
        last = after
        turns.append(turn_metrics(turn + 1, list(turn_records), duration, before, after))
    result = scenario_metrics(records, clock() - start)
    result["by_turn"] = turns
    # Speculative decoding over the whole scenario (None when the server does not do it).
    result["speculative"] = speculative_acceptance(first, last)
    result["session_wall_s"] = summarize(
        [max(r["end"] for r in rs) - min(r["start"] for r in rs) for rs in by_session if rs]
    )
    return result
