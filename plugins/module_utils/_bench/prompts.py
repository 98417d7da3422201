# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""The prompts and request bodies of a benchmark run.

Every request gets a unique prompt: a nonce first (the run's random id and the
request's number), so that no two prompts share a prefix-cache block and a later
request is never cheaper than an earlier one, then filler words (deterministic for
a seed) up to the scenario's ``prompt_tokens``, sized with the tokens per word the
run's calibration measured.
"""

from __future__ import annotations

import os
import random

# Used when the server reports no usage.prompt_tokens (then the sizes are a guess).
DEFAULT_TOKENS_PER_WORD = 1.2
PROMPT_SUFFIX = "Continue the text."
# Common English words that most tokenizers encode as one token each (with their
# leading space), so that tokens per word stays close to 1 and calibrates well.
_FILLER_TEXT = (
    "the of and to in is was for on that with as by at from his her they this "
    "have had are not but which one were all their there been has when who will "
    "more would time can about people into year some could them other than then "
    "now only its over also after new first two may any most these way well even "
    "because good each those both work life day part world place house under long "
    "water small great between never city same another while last might should "
    "country state family system program question during number point hand large "
    "group often school early light night river music market story paper window"
)
FILLER_WORDS = tuple(_FILLER_TEXT.split())


def make_run_id():
    """8 random hex digits: prompts of two runs never share a prefix either."""
    return os.urandom(4).hex()


def filler_words(count, seed, index):
    """``count`` filler words, the same for the same (seed, index), different otherwise."""
    # Filler, not secrets: a reproducible generator is the point.
    rng = random.Random(seed * 1_000_003 + index)  # noqa: S311
    return [rng.choice(FILLER_WORDS) for _word in range(count)]


def make_prompt(run_id, index, words, seed=0):
    """The prompt of request ``index``: its nonce first, ``words`` filler words, the suffix."""
    nonce = "{0}-{1:06d}".format(run_id, index)
    return "{0}: {1} {2}".format(nonce, " ".join(filler_words(words, seed, index)), PROMPT_SUFFIX)


def words_for_tokens(prompt_tokens, tokens_per_word):
    """Filler words that make about ``prompt_tokens`` prompt tokens (at least 1)."""
    if not tokens_per_word or tokens_per_word <= 0:
        tokens_per_word = DEFAULT_TOKENS_PER_WORD
    return max(1, round(prompt_tokens / tokens_per_word))


def request_body(model, prompt, max_tokens, ignore_eos=True):
    """The JSON body of a streaming chat completion request of one user message."""
    return chat_body(model, [{"role": "user", "content": prompt}], max_tokens, ignore_eos)


def chat_body(model, messages, max_tokens, ignore_eos=True, tools=None):
    """The JSON body of a streaming chat completion request of these messages (and tools)."""
    body = {
        "model": model,
        "messages": messages,
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0,
    }
    if tools:
        body["tools"] = tools
    if ignore_eos:
        # vLLM's extension: generate exactly max_tokens, so runs are comparable.
        body["ignore_eos"] = True
    return body
