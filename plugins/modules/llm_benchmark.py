#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Ansible module llm_benchmark: load an OpenAI-compatible LLM server and measure it."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: llm_benchmark
short_description: Measure TTFT, latency and token throughput of an OpenAI-compatible LLM server
version_added: "0.1.0"
author:
  - llmfleet maintainers (!UNKNOWN)
description:
  - Sends streaming chat completion requests (C(POST <url>/v1/chat/completions) with
    C(stream=true) and C(stream_options.include_usage=true)) to a vLLM, llama.cpp or vllm-mlx
    server, scenario after scenario, and returns per scenario the time to first token, the time
    per output token, the request latency (mean, p50, p90, p99, min, max), the output token
    throughput and the errors. This is what C(vllm bench serve) and llama-benchy measure.
    A V(session) scenario sends Claude Code-shaped sessions instead and reports per turn.
  - A scenario sends O(scenarios[].requests) requests with at most O(scenarios[].concurrency)
    in flight. Every request gets a unique prompt whose first word is a nonce (the run's random
    id and the request's number), so the prefix cache can never make a later request cheaper,
    followed by filler words up to about O(scenarios[].prompt_tokens) tokens.
  - "Tokenizers differ, so the run starts with one calibration request that is not counted:
    500 filler words and C(max_tokens=1). The server's C(usage.prompt_tokens) gives the tokens
    per word (RV(benchmark.tokens_per_word)) used to size every later prompt; each scenario
    reports the prompt tokens the server really counted."
  - The task fails when the calibration request fails (the server cannot be reached, refuses
    the key, does not serve O(model)), naming the URL and the error. Requests that fail during
    the scenarios are counted in RV(benchmark.scenarios[].errors) and only fail the task with
    O(fail_on_errors).
  - Uses only Python's standard library on the node that runs it, which can be the server
    itself, a client machine, or the controller (C(delegate_to)).
  - Sends load but changes nothing; never reports a change.
options:
  ignore_eos:
    description:
      - Send C(ignore_eos=true), vLLM's extension that makes every request generate exactly
        C(max_tokens) tokens, so that runs and servers are comparable.
      - Turn it off for servers that refuse unknown fields; the output length then depends on the
        model.
    type: bool
    default: true
  progress_file:
    description:
      - "After every finished request, replace this file (atomically) with one JSON object:
        C({\"scenario\": name, \"scenario_index\": i, \"scenarios\": n, \"done\": k,
        \"requests\": total, \"errors\": e, \"elapsed_s\": t}), where C(scenario_index) counts
        from 1, C(requests) is the scenario's number of requests and C(elapsed_s) the seconds
        since the scenario started. Another process can read it to draw a progress bar."
      - It is also written with C(done=0) when a scenario starts. Its directory must exist.
    type: path
  seed:
    description:
      - Seed of the filler words. The same seed gives the same filler; the nonce at the start of
        every prompt is new in every run.
    type: int
    default: 0
  fail_on_errors:
    description:
      - Fail the task when any request of a scenario that is not a warm-up failed. The failed
        result still holds RV(benchmark).
    type: bool
    default: false
extends_documentation_fragment:
  - llmfleet.cluster.llm_endpoint
  - llmfleet.cluster.bench_scenarios
  - llmfleet.cluster.bench_groups
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: In check mode nothing is sent; RV(benchmark) holds the plan (the scenarios without
      metrics).
  diff_mode:
    support: none
  idempotent:
    description:
      - When run twice in a row, the second run changes nothing.
    support: full
    details: It only sends requests; C(changed) is always false. The measurements differ between
      runs.
  platform:
    platforms: posix
notes:
  - "One connection per request (C(Connection: close)); the connection time is part of the TTFT
    and latency, as in C(vllm bench serve). No HTTP proxy is used."
  - Percentiles interpolate linearly between the two nearest values (numpy's default).
  - C(ttft_s), C(tpot_s), C(latency_s) and the throughputs count successful requests only;
    C(tpot_s) and C(decode_tokens_per_s) only those with more than one output token.
  - When the server reports no C(usage), output tokens are the number of streamed chunks with
    text and prompts are sized with an assumed 1.2 tokens per word.
  - The task takes as long as the benchmark; use C(async) with C(poll) for long runs (and
    O(progress_file) to watch them).
seealso:
  - name: vLLM benchmark CLI (vllm bench serve)
    description: The metrics this module reports, as vLLM's own serving benchmark defines them.
    link: https://docs.vllm.ai/en/latest/cli/bench/serve.html
"""

EXAMPLES = r"""
- name: Benchmark the served model as the field notes did (warm-up, short at 4 and 8, long at 2)
  llmfleet.cluster.llm_benchmark:
    url: "{{ llmfleet_endpoint_url }}"
    model: "{{ llmfleet_served_model }}"
    api_key: "{{ llmfleet_api_key }}"
    scenarios:
      - name: warmup
        warmup: true
        concurrency: 1
        requests: 2
        prompt_tokens: 128
        max_tokens: 32
      - name: short_c4
        concurrency: 4
        requests: 32
        prompt_tokens: 512
        max_tokens: 256
      - name: short_c8
        concurrency: 8
        requests: 64
        prompt_tokens: 512
        max_tokens: 256
      - name: long_c2
        concurrency: 2
        requests: 8
        prompt_tokens: 32000
        max_tokens: 256
    progress_file: /tmp/llmfleet-bench-progress.json
    fail_on_errors: true
  delegate_to: localhost
  run_once: true
  register: __bench_result

- name: Show TTFT p99 and output throughput of every measured scenario
  ansible.builtin.debug:
    msg: >-
      {{ item.name }}: TTFT p99 {{ item.ttft_s.p99 }} s,
      {{ item.output_tokens_per_s }} output tok/s, {{ item.errors }} errors
  loop: "{{ __bench_result.benchmark.scenarios | rejectattr('warmup') | list }}"
  loop_control:
    label: "{{ item.name }}"

- name: Benchmark 16 sessions through a serving gateway, with each group's share of them
  llmfleet.cluster.llm_benchmark:
    url: http://spark-1:8080
    model: "{{ llmfleet_served_model }}"
    api_key: "{{ llmfleet_api_key }}"
    groups: [{name: serving_1, url: "http://spark-1:8000"}, {name: serving_2, url: "http://spark-3:8000"}]
    scenarios: [{name: sessions_c16, kind: session, sessions: 16, turns: 3, system_tokens: 3000,
                 tool_tokens: 9000, prompt_tokens: 200, turn_tokens: 400, max_tokens: 64}]
  delegate_to: localhost

- name: Keep the result next to the others for comparisons
  ansible.builtin.copy:
    content: "{{ __bench_result.benchmark | to_nice_json }}"
    dest: "benchmarks/{{ __bench_result.benchmark.started }}.json"
    mode: "0644"
  delegate_to: localhost
  run_once: true

- name: Fail when the median time to first token at concurrency 8 is above half a second
  ansible.builtin.assert:
    that:
      - __bench_c8.ttft_s.p50 < 0.5
    fail_msg: TTFT p50 at concurrency 8 is above 0.5 s
  vars:
    __bench_c8: >-
      {{ __bench_result.benchmark.scenarios | selectattr('name', 'eq', 'short_c8') | first }}

# Ad hoc, the key from the environment (LLMFLEET_API_KEY):
#   ansible localhost -m llmfleet.cluster.llm_benchmark -a '{"url": "http://spark-1:8000",
#     "model": "minimax-m2", "scenarios": [{"name": "c4", "concurrency": 4, "requests": 16}]}'
"""

RETURN = r"""
msg:
  description: One line per scenario (joined by C(; )) with the successful requests, the median
    TTFT and the output throughput; in check mode, what would be sent.
  returned: always
  type: str
  sample: "warmup (warm-up): 2/2 ok, TTFT p50 0.092 s, 61.2 output tok/s; short_c4: 32/32 ok,
    TTFT p50 0.118 s, 78.4 output tok/s"
benchmark:
  description:
    - The benchmark. In check mode the plan only - RV(benchmark.started), RV(benchmark.finished),
      RV(benchmark.tokens_per_word) and RV(benchmark.calibration) null, and the scenarios without
      metrics.
    - Times in seconds, throughputs per second.
  returned: always
  type: dict
  contains:
    url:
      description: O(url) as given.
      type: str
      returned: always
      sample: http://192.168.100.10:8000
    model:
      description: O(model).
      type: str
      returned: always
      sample: minimax-m2
    api:
      description: The API used; always C(openai-chat) (C(/v1/chat/completions), streaming).
      type: str
      returned: always
      sample: openai-chat
    started:
      description: When the calibration request was sent, UTC, ISO 8601 with C(Z); null in check
        mode.
      type: str
      returned: always
      sample: "2025-06-01T09:30:00Z"
    finished:
      description: When the last scenario ended, UTC, ISO 8601 with C(Z); null in check mode.
      type: str
      returned: always
      sample: "2025-06-01T09:31:12Z"
    ignore_eos:
      description: O(ignore_eos).
      type: bool
      returned: always
      sample: true
    tokens_per_word:
      description: Prompt tokens per filler word the calibration request measured (chat template
        included), or 1.2 when the server reported no usage; null in check mode.
      type: float
      returned: always
      sample: 1.018
    calibration:
      description: The calibration request - C(words) filler words sent and C(prompt_tokens) the
        server counted (null when it reported no usage); null in check mode.
      type: dict
      returned: always
      sample: {words: 500, prompt_tokens: 509}
    scenarios:
      description: One entry per scenario, in the order they ran.
      type: list
      elements: dict
      returned: always
      contains:
        name:
          description: O(scenarios[].name).
          type: str
          returned: always
          sample: short_c4
        warmup:
          description: O(scenarios[].warmup); leave such scenarios out of comparisons.
          type: bool
          returned: always
          sample: false
        concurrency:
          description: O(scenarios[].concurrency).
          type: int
          returned: always
          sample: 4
        requests:
          description: O(scenarios[].requests), the requests sent.
          type: int
          returned: always
          sample: 32
        prompt_tokens_target:
          description: O(scenarios[].prompt_tokens).
          type: int
          returned: always
          sample: 512
        max_tokens:
          description: O(scenarios[].max_tokens).
          type: int
          returned: always
          sample: 256
        ok:
          description: Requests that succeeded.
          type: int
          returned: unless check mode
          sample: 32
        errors:
          description: Requests that failed (non-2xx status, connection error, timeout, error in
            the stream, stream cut before C([DONE])).
          type: int
          returned: unless check mode
          sample: 0
        error_samples:
          description: "Up to 5 distinct error messages, for example
            C(HTTP 500: <first 300 characters of the body>) or C(timed out after 600 s)."
          type: list
          elements: str
          returned: unless check mode
          sample: []
        duration_s:
          description: Wall time of the scenario, from its first request sent to its last answered.
          type: float
          returned: unless check mode
          sample: 104.43
        requests_per_s:
          description: Successful requests per second of RV(benchmark.scenarios[].duration_s).
          type: float
          returned: unless check mode
          sample: 0.3064
        ttft_s:
          description: Time to first token (the first streamed chunk with a choice, which vLLM
            sends with the first generated token, as C(vllm bench serve) counts it) - C(mean),
            C(p50), C(p90), C(p99), C(min), C(max); each null when no request succeeded.
          type: dict
          returned: unless check mode
          sample: {mean: 0.1213, p50: 0.118, p90: 0.1402, p99: 0.2131, min: 0.0975, max: 0.2154}
        tpot_s:
          description: Time per output token after the first, (end - first token) divided by
            (output tokens - 1) per request; same statistics.
          type: dict
          returned: unless check mode
          sample: {mean: 0.0505, p50: 0.0503, p90: 0.0521, p99: 0.0533, min: 0.0491, max: 0.0534}
        latency_s:
          description: Request latency, from sending to the end of the stream; same statistics.
          type: dict
          returned: unless check mode
          sample: {mean: 13.0, p50: 12.95, p90: 13.41, p99: 13.72, min: 12.61, max: 13.74}
        prompt_tokens:
          description: Prompt tokens of the successful requests, as the server counted them
            (C(usage.prompt_tokens)); C(0) when it reported no usage.
          type: int
          returned: unless check mode
          sample: 16352
        prompt_tokens_per_request:
          description: Mean prompt tokens per successful request, to compare with
            RV(benchmark.scenarios[].prompt_tokens_target); null without usage.
          type: float
          returned: unless check mode
          sample: 511.0
        output_tokens:
          description: Output tokens of the successful requests (C(usage.completion_tokens), else
            the chunks with text).
          type: int
          returned: unless check mode
          sample: 8192
        output_tokens_per_s:
          description: RV(benchmark.scenarios[].output_tokens) divided by
            RV(benchmark.scenarios[].duration_s) (the overall throughput).
          type: float
          returned: unless check mode
          sample: 78.4439
        decode_tokens_per_s:
          description: Output tokens after the first, summed over requests, divided by the
            summed time from first token to end - the decode speed one client sees; null when
            no request had two tokens or more.
          type: float
          returned: unless check mode
          sample: 19.8012
        kind:
          description: O(scenarios[].kind); a V(session) scenario also returns its
            O(scenarios[].sessions), O(scenarios[].turns), O(scenarios[].system_tokens),
            O(scenarios[].tool_tokens) and O(scenarios[].turn_tokens), with
            RV(benchmark.scenarios[].requests) = sessions x turns.
          type: str
          returned: always
          sample: session
        by_turn:
          description: Of a V(session) scenario, one entry per turn - C(turn) (from 1), C(ok),
            C(errors), C(duration_s), C(ttft_s) (statistics as above), C(prompt_tokens_per_request),
            C(output_tokens_per_s) (over the turn's wall time), and from vLLM's counters
            C(prefill_cached_tokens), C(prefill_computed_tokens), C(prefix_cache_hit_ratio) (null
            without C(/metrics)) and the turn's C(speculative).
          type: list
          elements: dict
          returned: session scenarios, unless check mode
          sample: [{turn: 2, ok: 4, errors: 0, duration_s: 3.1, ttft_s: {p50: 0.21, p99: 0.38},
                    prompt_tokens_per_request: 11840.0, output_tokens_per_s: 160.2,
                    prefill_cached_tokens: 44800, prefill_computed_tokens: 2560,
                    prefix_cache_hit_ratio: 0.9459}]
        speculative:
          description: Of a V(session) scenario, vLLM's C(spec_decode) counters over it -
            C(drafts), C(draft_tokens), C(accepted_tokens), C(acceptance_rate) (accepted over
            proposed) and C(mean_acceptance_length) (1 + accepted per draft); null without
            speculative decoding or C(/metrics).
          type: dict
          returned: session scenarios, unless check mode
          sample: {drafts: 410, draft_tokens: 1640, accepted_tokens: 902, acceptance_rate: 0.55}
        session_wall_s:
          description: Of a V(session) scenario, each session's time from its first request sent
            to its last answered; the statistics above.
          type: dict
          returned: session scenarios, unless check mode
          sample: {mean: 12.1, p50: 12.0, p90: 12.4, p99: 12.5, min: 11.8, max: 12.5}
        by_group:
          description:
            - With O(groups), one entry per group - C(name), C(requests) (the requests it
              finished during the scenario, from its own counter) and C(share) (of all the
              groups' requests); both null for a group that could not be read.
          type: list
          elements: dict
          returned: with O(groups), unless check mode
          sample: [{name: serving_1, requests: 26, share: 0.5417},
                   {name: serving_2, requests: 22, share: 0.4583}]
"""

# Ansible's module layout: documentation first, imports after it.
from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.latency_metrics import (  # noqa: E402
    summary_line,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.load_generator import (  # noqa: E402
    ARGUMENT_SPEC,
    BenchError,
    check_mode_result,
    check_params,
    errors_failure,
    run_benchmark,
    run_warnings,
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    problems = check_params(params)
    if problems:
        module.fail_json(msg="; ".join(problems))
    if module.check_mode:
        module.exit_json(changed=False, **check_mode_result(params))
    try:
        benchmark = run_benchmark(
            params["url"],
            params["model"],
            params["scenarios"],
            api_key=params["api_key"] or None,
            ignore_eos=params["ignore_eos"],
            request_timeout=params["request_timeout"],
            validate_certs=params["validate_certs"],
            progress_file=params["progress_file"],
            seed=params["seed"],
            groups=params["groups"],
        )
    except BenchError as error:
        module.fail_json(msg=str(error), url=error.url)
    except OSError as error:
        # the progress file could not be written
        module.fail_json(msg="cannot write the progress file: {0}".format(error))
    for warning in run_warnings(benchmark):
        module.warn(warning)
    failure = errors_failure(benchmark) if params["fail_on_errors"] else None
    if failure:
        module.fail_json(benchmark=benchmark, **failure)
    msg = "; ".join(summary_line(s) for s in benchmark["scenarios"])
    module.exit_json(changed=False, msg=msg, benchmark=benchmark)


if __name__ == "__main__":
    main()
