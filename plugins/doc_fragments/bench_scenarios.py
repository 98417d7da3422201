# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""The scenarios option of the load generator (module llm_benchmark)."""

from __future__ import annotations


class ModuleDocFragment:
    # The argument spec is module_utils/_bench/load_generator.py's SCENARIO_OPTIONS.
    DOCUMENTATION = r"""
options:
  scenarios:
    description:
      - The scenarios to run, in order. Names must be unique.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description:
          - Name of the scenario in the result, for example V(short_c4).
        type: str
        required: true
      kind:
        description:
          - V(requests) sends O(scenarios[].requests) independent requests, each with a unique
            prompt, at most O(scenarios[].concurrency) in flight.
          - V(session) is Claude Code's traffic instead - O(scenarios[].sessions) sessions at
            once, each O(scenarios[].turns) requests that re-send one system prompt
            (O(scenarios[].system_tokens)) and tool list (O(scenarios[].tool_tokens), 12 tools
            named like Claude Code's) shared by every session of the run, the session's task
            (O(scenarios[].prompt_tokens)), and each earlier turn's tool call and its result
            (O(scenarios[].turn_tokens)). The turns run in lockstep, and vLLM's prefix-cache
            counters (C(/metrics)) are read around each, so that every turn reports the prompt
            tokens vLLM computed and those it served from its cache.
        type: str
        choices: [requests, session]
        default: requests
      concurrency:
        description:
          - Requests in flight at the same time (a positive integer); V(requests) scenarios.
        type: int
        default: 1
      requests:
        description:
          - Number of requests the scenario sends (a positive integer); required for
            V(requests) scenarios, left out of V(session) ones.
        type: int
      prompt_tokens:
        description:
          - Prompt length to aim for, in tokens of the server's tokenizer, chat template included
            (a positive integer); of a session, its task's first message. The real count is in
            RV(benchmark.scenarios[].prompt_tokens).
        type: int
        default: 512
      max_tokens:
        description:
          - C(max_tokens) of every request (a positive integer). With O(ignore_eos) every request
            generates exactly this many tokens.
        type: int
        default: 128
      warmup:
        description:
          - A warm-up scenario (the first requests after a start pay for compilation and cache
            warm-up). It runs like any other, is marked C(warmup=true) in the result so reports
            can leave it out, and its errors do not count for O(fail_on_errors).
        type: bool
        default: false
      sessions:
        description:
          - Sessions at once (a positive integer); required for V(session) scenarios.
        type: int
      turns:
        description:
          - Requests per session, one per turn (a positive integer); required for V(session)
            scenarios.
        type: int
      system_tokens:
        description:
          - Tokens of the shared system prompt of a V(session) scenario.
        type: int
        default: 2000
      tool_tokens:
        description:
          - Tokens of the shared tool list of a V(session) scenario, over its 12 tools.
        type: int
        default: 8000
      turn_tokens:
        description:
          - Tokens of the tool result a V(session) scenario's turn adds to the history (0 or
            more).
        type: int
        default: 1000
"""
