# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""A load generator for OpenAI-compatible LLM servers (vLLM, llama.cpp, vllm-mlx).

Standard library only: it runs with whatever Python the managed node has, so a
benchmark can be sent from the serving host itself, from a client machine or from
the controller, with no package to install. The module ``llm_benchmark`` is a thin
wrapper around ``run_benchmark``; unit tests call every piece directly.

What it does, as ``vllm bench serve`` and llama-benchy do:

* A scenario sends ``requests`` streaming requests to ``POST {url}/v1/chat/completions``
  with at most ``concurrency`` in flight (a pool of that many workers), each timed by
  ``_http.chat_client`` over ``_http.stream``.
* Every request gets a unique prompt (``prompts``).
* Tokenizers differ, so a run starts with one uncounted calibration request with
  ``CALIBRATION_WORDS`` filler words and ``max_tokens=1``; its ``usage.prompt_tokens``
  gives the tokens per word used to size every later prompt. Each scenario reports
  the prompt tokens the server really counted.
* Each scenario's metrics come from its request records (``latency_metrics``).
* A scenario of kind ``session`` is Claude Code-shaped traffic instead: sessions that
  re-send a shared system prompt and tool list and a growing history (``sessions``).
"""

from __future__ import annotations

import asyncio
import json
import os
import time

from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.groups import (
    GROUPS_OPTION,
    Groups,
    group_load,
    group_problems,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.latency_metrics import (
    scenario_metrics,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.prompts import (
    DEFAULT_TOKENS_PER_WORD,
    make_prompt,
    make_run_id,
    request_body,
    words_for_tokens,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.sessions import (
    KIND as SESSION,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.sessions import (
    run_session_scenario,
    session_plan,
    session_problems,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._http.chat_client import (
    ENDPOINT_OPTIONS,
    Client,
    clock,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._http.stream import parse_url

API = "openai-chat"
# The calibration request: this many filler words, max_tokens=1.
CALIBRATION_WORDS = 500
REQUESTS = "requests"
SCENARIO_INT_KEYS = ("concurrency", "requests", "prompt_tokens", "max_tokens")
# A scenario as the module's argument spec takes it (documented in the doc fragment
# bench_scenarios).
SCENARIO_OPTIONS = {
    "name": {"type": "str", "required": True},
    "kind": {"type": "str", "default": REQUESTS, "choices": [REQUESTS, SESSION]},
    "concurrency": {"type": "int", "default": 1},
    "requests": {"type": "int"},
    # token counts, not credentials (the sanity test flags names with "token")
    "prompt_tokens": {"type": "int", "default": 512, "no_log": False},
    "max_tokens": {"type": "int", "default": 128, "no_log": False},
    "warmup": {"type": "bool", "default": False},
    "sessions": {"type": "int"},
    "turns": {"type": "int"},
    "system_tokens": {"type": "int", "default": 2000, "no_log": False},
    "tool_tokens": {"type": "int", "default": 8000, "no_log": False},
    "turn_tokens": {"type": "int", "default": 1000, "no_log": False},
}


class BenchError(Exception):
    """The benchmark could not run (bad input, or the server cannot be reached)."""

    def __init__(self, message, url=None):
        super().__init__(message)
        self.message = message
        self.url = url

    def __str__(self):
        return self.message


def validate_scenarios(scenarios):
    """Problems with the scenario list, one message each (empty when it is fine)."""
    problems = []
    if not scenarios:
        return ["scenarios must list at least one scenario"]
    seen = set()
    for position, scenario in enumerate(scenarios, start=1):
        name = scenario.get("name")
        label = "scenario {0}".format(position) if not name else "scenario {0!r}".format(name)
        if not name or not str(name).strip():
            problems.append("scenario {0} has no name".format(position))
        elif name in seen:
            problems.append("scenario name {0!r} is used more than once".format(name))
        else:
            seen.add(name)
        session = scenario.get("kind") == SESSION
        if session:
            problems.extend(session_problems(label, scenario))
        for key in SCENARIO_INT_KEYS:
            if session and key in ("concurrency", "requests"):
                continue  # the sessions are the concurrency
            value = scenario.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                problems.append(
                    "{0}: {1} must be a positive integer, got {2!r}".format(label, key, value)
                )
    return problems


def plan(url, model, scenarios, ignore_eos=True):
    """The result skeleton: what would be sent, with no metrics (check mode)."""
    return {
        "url": url,
        "model": model,
        "api": API,
        "started": None,
        "finished": None,
        "ignore_eos": bool(ignore_eos),
        "tokens_per_word": None,
        "calibration": None,
        "scenarios": [scenario_plan(s) for s in scenarios],
    }


def scenario_plan(scenario):
    plan = {
        "name": scenario["name"],
        "kind": scenario.get("kind") or REQUESTS,
        "warmup": bool(scenario.get("warmup", False)),
        "concurrency": scenario.get("concurrency"),
        "requests": scenario.get("requests"),
        "prompt_tokens_target": scenario["prompt_tokens"],
        "max_tokens": scenario["max_tokens"],
    }
    if plan["kind"] == SESSION:
        plan.update(session_plan(scenario))
    return plan


def write_progress(path, progress):
    """Replace ``path`` with ``progress`` as JSON, atomically (temp file + os.replace)."""
    tmp = "{0}.{1}.tmp".format(path, os.getpid())
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(progress, handle)
    os.replace(tmp, path)


def utc_now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


async def calibrate(client, run_id, seed=0, ignore_eos=True, words=CALIBRATION_WORDS):
    """Tokens per filler word from one uncounted request; BenchError when it fails.

    Returns ``(tokens_per_word, calibration)``; the server's ``prompt_tokens`` in
    ``calibration`` is None when it reported no usage (then DEFAULT_TOKENS_PER_WORD
    is used).
    """
    # The same body as the counted requests, so a server that refuses one of its
    # fields (ignore_eos, stream_options) fails here, before any scenario.
    body = request_body(client.model, make_prompt(run_id, 0, words, seed), 1, ignore_eos)
    record = await client.chat(body)
    if not record["ok"]:
        raise BenchError(
            "the calibration request to {0} failed: {1}".format(client.chat_url, record["error"]),
            url=client.url,
        )
    calibration = {"words": words, "prompt_tokens": record["prompt_tokens"]}
    if not record["prompt_tokens"]:
        return DEFAULT_TOKENS_PER_WORD, calibration
    return record["prompt_tokens"] / words, calibration


async def run_scenario(
    client,
    scenario,
    tokens_per_word,
    run_id,
    *,
    first_index=1,
    seed=0,
    ignore_eos=True,
    on_progress=None,
):
    """Run one scenario; its plan plus its metrics.

    Prompts are numbered from ``first_index``. ``on_progress(done, errors, elapsed_s)``
    is called after every finished request.
    """
    words = words_for_tokens(scenario["prompt_tokens"], tokens_per_word)
    count = scenario["requests"]
    bodies = [
        request_body(
            client.model,
            make_prompt(run_id, first_index + i, words, seed),
            scenario["max_tokens"],
            ignore_eos,
        )
        for i in range(count)
    ]
    records = []
    pending = iter(range(count))  # shared by the workers: each takes the next request
    start = clock()

    async def worker():
        for i in pending:
            records.append(await client.chat(bodies[i]))
            if on_progress is not None:
                errors = len([r for r in records if not r["ok"]])
                on_progress(len(records), errors, clock() - start)

    await asyncio.gather(*(worker() for _worker in range(min(scenario["concurrency"], count))))
    duration = clock() - start
    result = scenario_plan(scenario)
    result.update(scenario_metrics(records, duration))
    return result


async def _run(client, scenarios, ignore_eos, progress_file, *, seed, groups):
    run_id = make_run_id()
    tokens_per_word, calibration = await calibrate(client, run_id, seed, ignore_eos)
    results = []
    first_index = 1
    total = len(scenarios)
    for number, scenario in enumerate(scenarios, start=1):

        def report(done, errors, elapsed, scenario=scenario, number=number):
            if progress_file:
                write_progress(
                    progress_file,
                    {
                        "scenario": scenario["name"],
                        "scenario_index": number,
                        "scenarios": total,
                        "done": done,
                        "requests": scenario_plan(scenario)["requests"],
                        "errors": errors,
                        "elapsed_s": round(elapsed, 3),
                    },
                )

        report(0, 0, 0.0)
        groups_before = await groups.read() if groups else None
        if scenario.get("kind") == SESSION:
            result = scenario_plan(scenario)
            result.update(
                await run_session_scenario(
                    client,
                    scenario,
                    tokens_per_word,
                    run_id,
                    seed=seed,
                    ignore_eos=ignore_eos,
                    on_progress=report,
                    read_counters=groups.prefix_counters if groups else None,
                )
            )
        else:
            result = await run_scenario(
                client,
                scenario,
                tokens_per_word,
                run_id,
                first_index=first_index,
                seed=seed,
                ignore_eos=ignore_eos,
                on_progress=report,
            )
            first_index += scenario["requests"]
        if groups:
            result["by_group"] = group_load(groups_before, await groups.read())
        results.append(result)
    return tokens_per_word, calibration, results


def run_benchmark(
    url,
    model,
    scenarios,
    *,
    api_key=None,
    ignore_eos=True,
    request_timeout=600.0,
    validate_certs=True,
    progress_file=None,
    seed=0,
    groups=None,
):
    """Calibrate, run every scenario in order, return the result (see ``plan``).

    ``groups``: the serving groups behind a gateway at ``url`` (``[{name, url}]``, each
    group's own vLLM); each scenario then reports the share of its requests each carried
    (``by_group``), and a session scenario the prefix cache of all of them.

    Raises BenchError for invalid input or when the calibration request fails
    (the server cannot be reached, refuses the key, does not know the model...).
    """
    problems = validate_scenarios(scenarios)
    if request_timeout is None or request_timeout <= 0:
        problems.append(
            "request_timeout must be a positive number of seconds, got {0}".format(request_timeout)
        )
    problems += group_problems(groups)
    try:
        client = Client(url, model, api_key, request_timeout, validate_certs)
    except ValueError as error:
        problems.insert(0, str(error))
    if problems:
        raise BenchError("; ".join(problems), url=url)
    result = plan(url, model, scenarios, ignore_eos)
    result["started"] = utc_now()
    tokens_per_word, calibration, scenario_results = asyncio.run(
        _run(
            client,
            scenarios,
            ignore_eos,
            progress_file,
            seed=seed,
            groups=Groups(groups, model, validate_certs=validate_certs, api_key=api_key),
        )
    )
    result["finished"] = utc_now()
    result["tokens_per_word"] = round(tokens_per_word, 4)
    result["calibration"] = calibration
    result["scenarios"] = scenario_results
    return result


# ---------------------------------------------------------------------------
# what the llm_benchmark module checks and reports
# ---------------------------------------------------------------------------
# llm_benchmark's options (documented in the module and its doc fragments).
ARGUMENT_SPEC = {
    **ENDPOINT_OPTIONS,
    "scenarios": {
        "type": "list",
        "elements": "dict",
        "required": True,
        "options": SCENARIO_OPTIONS,
    },
    "ignore_eos": {"type": "bool", "default": True},
    "progress_file": {"type": "path"},
    "groups": GROUPS_OPTION,
    "seed": {"type": "int", "default": 0},
    "fail_on_errors": {"type": "bool", "default": False},
}


def check_params(params):
    """Problems with the module's parameters that the argument spec cannot see (empty when
    fine)."""
    problems = []
    try:
        parse_url(params["url"])
    except ValueError as error:
        problems.append(str(error))
    problems.extend(validate_scenarios(params["scenarios"]))
    problems.extend(group_problems(params.get("groups")))
    progress_dir = os.path.dirname(params["progress_file"] or "") or "."
    if params["progress_file"] and not os.path.isdir(progress_dir):
        problems.append(
            "progress_file {0}: the directory {1} does not exist".format(
                params["progress_file"], progress_dir
            )
        )
    if params["request_timeout"] <= 0:
        problems.append(
            "request_timeout must be a positive number of seconds, got {0}".format(
                params["request_timeout"]
            )
        )
    return problems


def check_mode_result(params):
    """The module's result in check mode: what would be sent, and the plan."""
    total = sum(scenario_plan(s)["requests"] for s in params["scenarios"])
    return {
        "msg": "check mode: would send {0} requests in {1} scenarios to {2}".format(
            total, len(params["scenarios"]), params["url"]
        ),
        "benchmark": plan(
            params["url"], params["model"], params["scenarios"], params["ignore_eos"]
        ),
    }


def errors_failure(benchmark):
    """The failure of a run whose measured (not warm-up) scenarios had failed requests:
    ``msg``, ``errors`` and up to 5 distinct ``error_samples``; None when none failed."""
    measured = [s for s in benchmark["scenarios"] if not s["warmup"] and s["errors"]]
    if not measured:
        return None
    samples = []
    for scenario in measured:
        for message in scenario["error_samples"]:
            if message not in samples:
                samples.append(message)
    errors = sum(s["errors"] for s in measured)
    return {
        "msg": "{0} of {1} requests failed in {2}: {3}".format(
            errors,
            sum(s["requests"] for s in measured),
            ", ".join(s["name"] for s in measured),
            " | ".join(samples[:5]),
        ),
        "errors": errors,
        "error_samples": samples[:5],
    }


def run_warnings(benchmark):
    """What a finished run warns about: prompts sized without the server's usage, and every
    scenario with failed requests."""
    warnings = []
    if benchmark["calibration"]["prompt_tokens"] is None:
        warnings.append(
            "the server reported no usage.prompt_tokens; prompts were sized with an assumed "
            "{0} tokens per word".format(benchmark["tokens_per_word"])
        )
    for scenario in benchmark["scenarios"]:
        if scenario["errors"]:
            warnings.append(
                "scenario {0}: {1} of {2} requests failed: {3}".format(
                    scenario["name"],
                    scenario["errors"],
                    scenario["requests"],
                    " | ".join(scenario["error_samples"]),
                )
            )
    return warnings
