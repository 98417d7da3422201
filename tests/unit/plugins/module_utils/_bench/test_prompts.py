"""module_utils/_bench/prompts: unique prompts, sized by the calibration, and request bodies."""

from __future__ import annotations

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench import (
    prompts as _bench_prompts,
)


def test_prompts_are_unique_with_the_nonce_first() -> None:
    prompts = [_bench_prompts.make_prompt("abcd1234", i, 50, seed=7) for i in range(200)]
    assert len(set(prompts)) == 200
    firsts = [p.split()[0] for p in prompts]
    assert len(set(firsts)) == 200
    assert firsts[3] == "abcd1234-000003:"
    for prompt in prompts:
        assert len(prompt.split()) == 1 + 50 + 3
        assert prompt.endswith(" " + _bench_prompts.PROMPT_SUFFIX)
        assert all(w in _bench_prompts.FILLER_WORDS for w in prompt.split()[1:-3])


def test_two_runs_never_share_a_prefix() -> None:
    ids = {_bench_prompts.make_run_id() for _run in range(50)}
    assert len(ids) == 50
    assert all(len(i) == 8 for i in ids)


def test_filler_is_deterministic_for_a_seed() -> None:
    assert _bench_prompts.filler_words(100, 3, 1) == _bench_prompts.filler_words(100, 3, 1)
    assert _bench_prompts.filler_words(100, 3, 1) != _bench_prompts.filler_words(100, 4, 1)
    assert _bench_prompts.filler_words(100, 3, 1) != _bench_prompts.filler_words(100, 3, 2)
    assert _bench_prompts.make_prompt("r", 5, 30, seed=1) == _bench_prompts.make_prompt(
        "r", 5, 30, seed=1
    )
    assert len(_bench_prompts.filler_words(0, 0, 0)) == 0


@pytest.mark.parametrize(
    ("tokens", "per_word", "words"),
    [
        (512, 1.0, 512),
        (512, 1.28, 400),
        (1000, 1.3, 769),
        (100, 0.5, 200),
        (1, 4.0, 1),  # never below one word
        (120, None, 100),  # no calibration: DEFAULT_TOKENS_PER_WORD (1.2)
        (120, 0, 100),
    ],
)
def test_words_for_tokens(tokens: int, per_word: float | None, words: int) -> None:
    assert _bench_prompts.words_for_tokens(tokens, per_word) == words


@pytest.mark.parametrize("ignore_eos", [True, False])
def test_request_body(ignore_eos: bool) -> None:
    body = _bench_prompts.request_body("m", "hello", 64, ignore_eos)
    expected = {
        "model": "m",
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": 64,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0,
    }
    if ignore_eos:
        expected["ignore_eos"] = True
    assert body == expected
