"""module_utils/_http/chat_client: the stream of one chat completion, the errors it reports."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._http import (
    chat_client as _chat_client,
)


def stream_record(events: list[str]) -> dict[str, Any]:
    state = _chat_client.StreamState()
    for now, data in enumerate(events, start=1):
        state.on_data(data, float(now))
    rec: dict[str, Any] = {}
    state.finish(rec)
    return rec


def content(text: str, key: str = "content", finish: str | None = None) -> str:
    return json.dumps({"choices": [{"index": 0, "delta": {key: text}, "finish_reason": finish}]})


USAGE = json.dumps({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 9}})


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        # the first chunk with a choice is the first token (vLLM sends the role chunk with
        # it, as `vllm bench serve` counts it); usage wins over the chunk count
        (
            [content(""), content("a"), content("b"), USAGE, "[DONE]"],
            {"ok": True, "first": 1.0, "chunks": 2, "output_tokens": 9, "prompt_tokens": 12},
        ),
        # reasoning models: reasoning_content (older vLLM) or reasoning (newer) is a token
        (
            [content("", "reasoning_content"), content("hm", "reasoning_content"), "[DONE]"],
            {"ok": True, "first": 1.0, "chunks": 1, "output_tokens": 1, "prompt_tokens": None},
        ),
        # a usage chunk (no choices) is not a token
        (
            [USAGE, content("a"), "[DONE]"],
            {"ok": True, "first": 2.0, "chunks": 1, "output_tokens": 9, "prompt_tokens": 12},
        ),
        (
            [content("hm", "reasoning"), content("x"), "[DONE]"],
            {"ok": True, "first": 1.0, "chunks": 2, "output_tokens": 2, "prompt_tokens": None},
        ),
        # no [DONE] but a finish_reason: complete
        (
            [content("a"), content("b", finish="stop")],
            {"ok": True, "first": 1.0, "chunks": 2, "output_tokens": 2},
        ),
        # cut off: neither [DONE], nor finish_reason, nor usage
        (
            [content("a"), content("b")],
            {"ok": False, "error": "the stream ended before [DONE]", "output_tokens": 2},
        ),
        (
            [content("a"), '{"error": {"message": "CUDA out of memory", "code": 500}}'],
            {"ok": False, "error": "error in the stream: CUDA out of memory"},
        ),
        (["{not json"], {"ok": False, "error": "invalid JSON in the stream: {not json"}),
    ],
)
def test_stream_state(events: list[str], expected: dict[str, Any]) -> None:
    rec = stream_record(events)
    for key, value in expected.items():
        assert rec[key] == value, key


def test_error_body_is_cut_at_300_characters() -> None:
    assert _chat_client.error_text(500, b"x" * 1000) == "HTTP 500: " + "x" * 300
