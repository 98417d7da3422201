"""`llmfleet bench` on the served lab (what `make bench` runs): the matrix with no failed
request at concurrency 64, Claude Code timed with hyperfine, the report in JSON, markdown
and PNG compared with the previous run, the transport check against live and frozen RDMA
counters, and our numbers next to vLLM's own `vllm bench serve` on the same endpoint."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
from pathlib import Path

import pytest

from .conftest import Lab

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
KEY = "llmfleet-lab-key"  # inventory/lab/group_vars/all/serving.yml
# The transport check's runs: a scenario long enough for tensor parallel traffic.
SMALL_MATRIX = json.dumps(
    {
        "benchmark_scenarios": [
            {"name": "short_c4", "concurrency": 4, "requests": 8, "prompt_tokens": 256,
             "max_tokens": 32},
        ]
    }
)  # fmt: skip
# Both tools, one after the other on spark-1, against spark-1's endpoint: one request at a
# time, so what is compared is the server's speed and not how the lab's two shared cores
# schedule a busier client (vllm bench's slows the server's decode by about 10% at any
# concurrency, next to ours).
AGREEMENT = {"concurrency": 1, "requests": 32, "prompt_tokens": 256, "max_tokens": 32}
AGREEMENT_TOLERANCE = 0.15
ROUNDS = 3


def bench(lab: Lab, results: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return lab.run(
        "llmfleet", "bench", "-i", "inventory/lab", "--plain",
        "-e", f"benchmark_results_dir={results}", *extra,
        timeout=2400,
    )  # fmt: skip


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bench")


@pytest.fixture(scope="module")
def first_run(lab: Lab, site, results: Path) -> subprocess.CompletedProcess[str]:
    assert site.returncode == 0, site.stdout[-4000:]
    return bench(
        lab, results, "-e", "benchmark_claude_code=true", "-e", "benchmark_claude_code_runs=2"
    )


def records(results: Path) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted(results.glob("bench-*.json"))]


def test_the_matrix_runs_without_errors_at_concurrency_64(
    first_run: subprocess.CompletedProcess[str], results: Path
) -> None:
    assert first_run.returncode == 0, first_run.stdout[-6000:]
    [record] = records(results)
    scenarios = {s["name"]: s for s in record["benchmark"]["scenarios"]}
    assert list(scenarios) == [
        "warmup", "short_c4", "short_c8", "long_c2", "sweep_c1", "sweep_c64", "sweep_c256",
        "prefill_1k", "prefill_8k", "prefill_32k",
    ]  # fmt: skip
    c64 = scenarios["sweep_c64"]
    assert (c64["ok"], c64["errors"], c64["concurrency"]) == (64, 0, 64)
    for scenario in scenarios.values():
        assert scenario["errors"] == 0, scenario["error_samples"]
        assert scenario["ttft_s"]["p50"] > 0 and scenario["latency_s"]["p99"] > 0
    # The prefill sweep really sent long prompts (sized with the server's token count).
    assert scenarios["prefill_32k"]["prompt_tokens"] >= 0.9 * 32768
    assert record["config"]["model"] == "llmfleet-tiny"
    assert record["transport"]["transport"] == "gloo"


def test_progress_and_summary_are_shown(first_run: subprocess.CompletedProcess[str]) -> None:
    # The waiting task retries every 5 s and shows the load generator's progress each time.
    assert re.search(
        r"retrying \(\d+/\d+\): benchmark : Wait for the benchmark to finish: "
        r"bench \d+/10 \w+ \[[#.]{24}\] \d+/\d+ requests, \d+ errors?, \d+ s",
        first_run.stdout,
    ), first_run.stdout[-4000:]
    assert "sweep_c64: 64 ok, 0 errors" in first_run.stdout
    assert "Report: " in first_run.stdout


def test_claude_code_wall_time_is_measured_with_hyperfine(
    first_run: subprocess.CompletedProcess[str], results: Path
) -> None:
    claude = records(results)[0]["claude_code"]
    assert claude["runs"] == 2 and len(claude["times_s"]) == 2
    assert 0 < claude["min_s"] <= claude["mean_s"] <= claude["max_s"]
    # Each timed run was a successful Claude Code turn (hyperfine fails on any other).
    last = json.loads(Path("/tmp/llmfleet-bench-repo.last.json").read_text())
    assert last["type"] == "result" and last["is_error"] is False, last


def test_the_report_is_markdown_and_png(
    first_run: subprocess.CompletedProcess[str], results: Path
) -> None:
    [markdown] = results.glob("bench-*.md")
    text = markdown.read_text()
    assert "| sweep_c64 |" in text and "llmfleet-tiny" in text
    [png] = results.glob("bench-*.png")
    assert png.read_bytes().startswith(PNG_SIGNATURE)


def test_a_second_run_is_compared_with_the_first(
    lab: Lab, first_run: subprocess.CompletedProcess[str], results: Path
) -> None:
    again = bench(lab, results, "-e", SMALL_MATRIX)
    assert again.returncode == 0, again.stdout[-4000:]
    latest = records(results)[-1]
    assert latest["comparison"]["previous"] is not None
    change = latest["comparison"]["scenarios"]["short_c4"]["output_tokens_per_s"]
    assert change["previous"] > 0 and change["current"] > 0


def test_transport_check_passes_while_the_rdma_counters_move(
    lab: Lab, site, tmp_path: Path
) -> None:
    run = bench(lab, tmp_path, "-e", SMALL_MATRIX, "-e", "benchmark_transport=rdma")
    assert run.returncode == 0, run.stdout[-4000:]
    assert "fabric traffic during the run: spark-1 roceP2p1s0f1+rocep1s0f1" in run.stdout


def test_transport_check_fails_when_the_rdma_counters_are_frozen(
    lab: Lab, site, tmp_path: Path
) -> None:
    devices = ("rocep1s0f1", "roceP2p1s0f1")
    try:
        for device in devices:
            lab.cli("set", f"rdma_counters_frozen.{device}=true")
        run = bench(lab, tmp_path, "-e", SMALL_MATRIX, "-e", "benchmark_transport=rdma")
    finally:
        for device in devices:
            lab.cli("set", f"rdma_counters_frozen.{device}=false")
    assert run.returncode != 0
    assert "NCCL fell back to sockets" in run.stdout, run.stdout[-4000:]
    assert "spark-1, spark-2 moved less than 1.0 MiB" in run.stdout
    # The numbers were kept all the same.
    assert records(tmp_path)[0]["transport"]["passed"] is False


def ours(lab: Lab) -> dict[str, float]:
    """Our load generator on spark-1 (the module, ad hoc) against spark-1's endpoint."""
    args = {
        "url": "http://127.0.0.1:8000",
        "model": "llmfleet-tiny",
        "api_key": KEY,
        "scenarios": [{"name": "agreement", **AGREEMENT}],
    }
    run = lab.run(
        "ansible", "spark-1", "-i", "inventory/lab", "-o",
        "-m", "llmfleet.cluster.llm_benchmark", "-a", json.dumps(args),
        env={"ANSIBLE_STDOUT_CALLBACK": "default", "ANSIBLE_CALLBACK_RESULT_FORMAT": "json"},
        timeout=900,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    [scenario] = json.loads(run.stdout.split("=>", 1)[1])["benchmark"]["scenarios"]
    assert (scenario["ok"], scenario["output_tokens"]) == (
        AGREEMENT["requests"],
        AGREEMENT["requests"] * AGREEMENT["max_tokens"],
    )
    return {
        "TTFT median (ms)": scenario["ttft_s"]["p50"] * 1000,
        "output tokens/s": scenario["output_tokens_per_s"],
    }


def theirs(lab: Lab, seed: int) -> dict[str, float]:
    """vLLM's own `vllm bench serve` (random prompts of the same length) on spark-1. Each
    run needs a seed of its own: with the same one it sends the same prompts again, which
    the prefix cache then answers at once."""
    lab.sh(
        "spark-1",
        f"OPENAI_API_KEY={KEY} HF_HUB_OFFLINE=1 /opt/vllm/bin/vllm bench serve --seed {seed}"
        " --disable-tqdm"
        " --backend openai-chat --base-url http://127.0.0.1:8000"
        " --endpoint /v1/chat/completions --model llmfleet-tiny"
        " --tokenizer /opt/models/llmfleet-tiny --dataset-name random"
        f" --random-input-len {AGREEMENT['prompt_tokens']}"
        f" --random-output-len {AGREEMENT['max_tokens']}"
        f" --num-prompts {AGREEMENT['requests']} --max-concurrency {AGREEMENT['concurrency']}"
        " --ignore-eos --save-result --result-dir /tmp --result-filename vllm-bench.json",
        timeout=900,
    )
    result = json.loads(lab.out("spark-1", "cat /tmp/vllm-bench.json"))
    assert (result["completed"], result["total_output_tokens"]) == (
        AGREEMENT["requests"],
        AGREEMENT["requests"] * AGREEMENT["max_tokens"],
    )
    return {
        "TTFT median (ms)": result["median_ttft_ms"],
        "output tokens/s": result["output_throughput"],
    }


def test_our_numbers_agree_with_vllm_bench_serve(lab: Lab, site) -> None:
    """Both tools in turn, ROUNDS times each on the same endpoint (one run of either varies
    by about 10% on the lab's two shared cores): the medians of TTFT and of output
    throughput agree within 15%."""
    ours(lab)  # a warm-up
    runs: dict[str, list[dict[str, float]]] = {"ours": [], "vllm": []}
    for seed in range(1, ROUNDS + 1):
        runs["ours"].append(ours(lab))
        runs["vllm"].append(theirs(lab, seed))
    medians = {
        tool: {name: statistics.median(run[name] for run in results) for name in results[0]}
        for tool, results in runs.items()
    }
    print(f"ours vs vllm bench serve (medians of {ROUNDS} runs): {json.dumps(medians)}")
    for name, theirs_value in medians["vllm"].items():
        mine = medians["ours"][name]
        assert abs(mine - theirs_value) <= AGREEMENT_TOLERANCE * theirs_value, (
            f"{name}: ours {mine:.3f}, vllm bench serve {theirs_value:.3f}"
        )
