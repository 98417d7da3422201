"""The real Claude Code CLI (npm) on this machine, through the wrapper `llmfleet up`
installed, against the lab's vLLM, whose model answers by script (inventory/lab): Claude
Code's agent loop (tool calls parsed by each tool-call parser a shipped profile names, the
tools run in a sample repository, their results sent back, the final answer quoting them)
through the wrapper's /v1/messages and through claude-code-router on spark-1; the loop's
requests and the next turn hit the prefix cache; what changes without
CLAUDE_CODE_ATTRIBUTION_HEADER=0."""

from __future__ import annotations

import http.server
import json
import os
import re
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import Lab, run_up

WRAPPER = Path.home() / ".local" / "bin" / "claude-local"
MODEL = "llmfleet-tiny"  # inventory/lab/group_vars/all/clients.yml
ROUTER_KEY = "llmfleet-lab-router-key"
# A next request shares Claude Code's system prompt and tool list (most of its prompt).
PREFIX_HIT_FLOOR = 0.5
# Within one agent loop, each request re-sends the last one and adds a little.
LOOP_PREFIX_HIT_FLOOR = 0.9
# The tool-call parsers of the shipped profiles (tests/unit/lab/test_scripted_model.py
# checks the lab's script writes each); the lab serves hermes unless told otherwise.
PARSERS = ("hermes", "minimax_m2")
LAB_PARSER = "hermes"
# Another parser is vLLM restarted twice (to it and back: about 200 s of make test), for what
# vLLM's parser and the lab's script do with the format (the script's format is unit-tested):
# the lab's own parser runs Claude Code's loop in make test, every shipped one in extended.
PARSER_PARAMS = [
    pytest.param(name, marks=[] if name == LAB_PARSER else [pytest.mark.extended])
    for name in PARSERS
]
# A tool call that reached Claude Code as text instead of a tool_use block.
CALL_MARKUP = ("<tool_call>", "minimax:tool_call", "<invoke")
NOTES = "The code word is teal.\nfib.py is the slow version on purpose.\n"
BILLING = "x-anthropic-billing-header"
FIB = "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
METRIC_LINE = re.compile(r"^(vllm:[a-z_]+)\{([^}]*)\} ([0-9.e+-]+)$", re.M)


@dataclass(frozen=True)
class Turn:
    events: list[dict]
    stderr: str

    @property
    def result(self) -> dict:
        results = [e for e in self.events if e.get("type") == "result"]
        assert results, f"no result event: {self.events[-3:]} {self.stderr[-2000:]}"
        return results[-1]

    def blocks(self, role: str, kind: str) -> list[dict]:
        """The content blocks of one kind in the messages of `role` (assistant, user)."""
        return [
            block
            for event in self.events
            if event.get("type") == role
            for block in event.get("message", {}).get("content", [])
            if isinstance(block, dict) and block.get("type") == kind
        ]


def metrics(lab: Lab) -> dict[str, float]:
    """vLLM's counters for the served model on rank 0, summed over their other labels."""
    totals: dict[str, float] = {}
    for name, labels, value in METRIC_LINE.findall(
        lab.out("spark-1", "curl -s localhost:8000/metrics")
    ):
        if f'model_name="{MODEL}"' in labels:
            totals[name] = totals.get(name, 0.0) + float(value)
    return totals


def delta(after: dict[str, float], before: dict[str, float], name: str) -> float:
    return after.get(name, 0.0) - before.get(name, 0.0)


def hit_ratio(after: dict[str, float], before: dict[str, float]) -> float:
    queries = delta(after, before, "vllm:prefix_cache_queries_total")
    assert queries > 0, "no prefix-cache lookups: did the request reach vLLM?"
    return delta(after, before, "vllm:prefix_cache_hits_total") / queries


def claude(command: Path, workdir: Path, prompt: str, *args: str) -> Turn:
    """One headless Claude Code turn in `workdir`, its own HOME beside it."""
    proc = subprocess.run(
        [str(command), "-p", prompt, "--output-format", "stream-json", "--verbose", *args],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "HOME": str(workdir.parent / "home"), "NO_COLOR": "1"},
    )
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0, (
        f"claude exited {proc.returncode}: {proc.stdout[-3000:]}{proc.stderr[-3000:]}"
    )
    return Turn(events, proc.stderr)


def variant(tmp: Path, name: str, replace: dict[str, str | None]) -> Path:
    """A copy of the installed wrapper with some exports changed (None drops the line)."""
    lines = []
    for line in WRAPPER.read_text().splitlines():
        variable = (
            line.removeprefix("export ").split("=", 1)[0] if line.startswith("export ") else ""
        )
        if variable not in replace:
            lines.append(line)
        elif replace[variable] is not None:
            lines.append(f"export {variable}='{replace[variable]}'")
    path = tmp / name
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o700)
    return path


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A small git repository to work in, and an empty HOME for Claude Code's state."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (tmp_path / "home").mkdir()
    (repo / "fib.py").write_text(FIB)
    (repo / "NOTES.md").write_text(NOTES)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    return repo.resolve()


@pytest.fixture(scope="module", params=PARSER_PARAMS)
def parser(request: pytest.FixtureRequest, lab: Lab, site) -> Iterator[str]:
    """The lab's vLLM serving with each parser in turn: another one is a changed serve.yaml
    (the ranks restart), and the lab's own again at the end."""
    tags = ("--tags", "preflight,vllm_server")
    if request.param != LAB_PARSER:
        served = {"vllm_server_profile_overrides": {"tool_call_parser": request.param}}
        proc = run_up(lab, *tags, "-e", json.dumps(served))
        assert proc.returncode == 0, proc.stdout[-4000:]
        assert f"tool-call-parser: {request.param}" in lab.out(
            "spark-1", "cat /etc/llmfleet/vllm/serve.yaml"
        )
    yield request.param
    if request.param != LAB_PARSER:
        proc = run_up(lab, *tags)
        assert proc.returncode == 0, proc.stdout[-4000:]


def assert_agent_loop(turn: Turn, files: dict[Path, str], workdir: Path, *, absolute: bool) -> None:
    """Claude Code called Read on each file at once (tool_use blocks, never text), ran the
    calls, sent their results back, and ended with the model's answer quoting each. The
    scripted model names a file by its absolute path when Claude Code's environment message
    (its working directory) reached it, else relative to the working directory."""
    calls = turn.blocks("assistant", "tool_use")
    assert [call["name"] for call in calls] == ["Read"] * len(files), turn.events
    paths = [Path(call["input"]["file_path"]) for call in calls]
    assert [path.is_absolute() for path in paths] == [absolute] * len(files), paths
    assert [(workdir / path).resolve() for path in paths] == list(files), turn.events
    results = {block["tool_use_id"]: block for block in turn.blocks("user", "tool_result")}
    for call, first_line in zip(calls, files.values(), strict=True):
        result = results.get(call["id"])
        assert result is not None and not result.get("is_error"), (call, results)
        assert first_line in json.dumps(result["content"]), result
    texts = [block["text"] for block in turn.blocks("assistant", "text")]
    assert not [text for text in texts if any(markup in text for markup in CALL_MARKUP)], texts
    assert turn.result["subtype"] == "success" and turn.result["is_error"] is False, turn.result
    # Parallel calls finish in any order, and their results reach the model in that order.
    answer = re.search(r"They begin with (.*)\.$", turn.result["result"])
    assert answer is not None, turn.result
    assert sorted(answer.group(1).split(" and ")) == sorted(f'"{line}"' for line in files.values())


def test_the_wrapper_is_installed_for_its_owner_only(site) -> None:
    assert site.returncode == 0, site.stdout[-4000:]
    assert WRAPPER.stat().st_mode & 0o777 == 0o700
    text = WRAPPER.read_text()
    assert "export CLAUDE_CODE_ATTRIBUTION_HEADER=0" in text
    assert "export ANTHROPIC_AUTH_TOKEN=llmfleet-lab-key" in text
    assert f"export ANTHROPIC_DEFAULT_OPUS_MODEL={MODEL}" in text


def test_claude_code_runs_its_tool_loop_through_vllm_messages(
    lab: Lab, parser: str, workdir: Path
) -> None:
    """A Read of the file the prompt names, parsed by vLLM's `parser` into a tool_use block,
    run by Claude Code, its result back at /v1/messages, the answer quoting it."""
    journal_since = lab.out("spark-1", "date '+%Y-%m-%d %H:%M:%S'").strip()
    before = metrics(lab)
    turn = claude(WRAPPER, workdir, "What does fib.py do? Answer in one sentence.")
    after = metrics(lab)
    init = next(e for e in turn.events if e.get("type") == "system" and e.get("subtype") == "init")
    assert init["model"] == MODEL
    assert_agent_loop(turn, {workdir / "fib.py": "def fib(n):"}, workdir, absolute=True)
    assert delta(after, before, "vllm:request_success_total") >= 2
    log = lab.out(
        "spark-1", f"journalctl -u llmfleet-vllm --since '{journal_since}' --no-pager -o cat"
    )
    assert re.search(r'"POST /v1/messages(\?beta=true)? HTTP/1.1" 200', log), log[-3000:]


class RecordingProxy:
    """Forwards Claude Code's requests to the lab's vLLM and keeps their bodies, so a test
    sees what the client really sent (the billing header or not)."""

    def __init__(self, upstream: str, watch: Callable[[], dict[str, float]] | None = None) -> None:
        self.bodies: list[dict] = []
        # With `watch` (vLLM's counters): their values before each request was forwarded.
        self.before: list[dict[str, float]] = []
        # Where each Claude Code turn's requests end in `bodies` (the caller marks them).
        self.marks: list[int] = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                if self.path.startswith("/v1/messages") and "count_tokens" not in self.path:
                    if watch is not None:
                        proxy.before.append(watch())
                    proxy.bodies.append(json.loads(body))
                headers = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower() not in {"host", "content-length", "accept-encoding"}
                }
                request = urllib.request.Request(upstream + self.path, body, headers, method="POST")
                try:
                    with urllib.request.urlopen(request, timeout=600) as response:
                        status, data, reply = response.status, response.read(), response.headers
                except urllib.error.HTTPError as error:
                    status, data, reply = error.code, error.read(), error.headers
                self.send_response(status)
                for key, value in reply.items():
                    if key.lower() not in {"transfer-encoding", "content-length", "connection"}:
                        self.send_header(key, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def billing_headers(self) -> list[str | None]:
        """The first system block of each request when it is Claude Code's billing header."""
        firsts = [(body.get("system") or [{}])[0] for body in self.bodies]
        return [
            block.get("text") if str(block.get("text", "")).startswith(BILLING) else None
            for block in firsts
        ]


@pytest.fixture
def proxy(lab: Lab) -> Iterator[RecordingProxy]:
    recorder = RecordingProxy(f"http://{lab.management_ip('spark-1')}:8000")
    yield recorder
    recorder.server.shutdown()


def test_the_agent_loop_hits_the_prefix_cache(
    lab: Lab, site, workdir: Path, tmp_path: Path
) -> None:
    """Each request of one agent loop after the first that carries the tool list (the tool
    results going back, and whatever Claude Code sends beside them) starts with what the
    one before sent: vLLM serves at least LOOP_PREFIX_HIT_FLOOR of their prompt tokens from
    its prefix cache."""
    recorder = RecordingProxy(f"http://{lab.management_ip('spark-1')}:8000", lambda: metrics(lab))
    try:
        command = variant(tmp_path, "claude-loop", {"ANTHROPIC_BASE_URL": recorder.url})
        turn = claude(command, workdir, "Compare fib.py and NOTES.md, briefly.")
        end = metrics(lab)
    finally:
        recorder.server.shutdown()
    assert turn.result["subtype"] == "success", turn.result
    with_tools = [i for i, body in enumerate(recorder.bodies) if body.get("tools")]
    assert len(with_tools) >= 2, [sorted(body) for body in recorder.bodies]
    ratio = hit_ratio(end, recorder.before[with_tools[1]])
    print(
        f"prefix-cache hit ratio of the agent loop after its first request:"
        f" {ratio:.3f} over {len(recorder.bodies) - with_tools[1]} request(s)"
    )
    assert ratio >= LOOP_PREFIX_HIT_FLOOR, ratio


def conversation(lab: Lab, command: Path, root: Path, proxy: RecordingProxy) -> dict[str, float]:
    """Turn 1, its next turn (--continue), then a new conversation in the same repository;
    the prefix-cache hit ratio of the second and third requests."""
    repo = root / "repo"
    repo.mkdir(parents=True)
    (root / "home").mkdir()
    (repo / "fib.py").write_text(FIB)
    claude(command, repo, "Read fib.py and say what it computes.")
    proxy.marks.append(len(proxy.bodies))
    before = metrics(lab)
    claude(command, repo, "Now suggest a faster version, briefly.", "--continue")
    proxy.marks.append(len(proxy.bodies))
    middle = metrics(lab)
    claude(command, repo, "Which line of fib.py recurses?")
    return {
        "next turn": hit_ratio(middle, before),
        "next conversation": hit_ratio(metrics(lab), middle),
    }


def test_the_next_turn_hits_the_prefix_cache(
    lab: Lab, site, tmp_path: Path, proxy: RecordingProxy
) -> None:
    """With the wrapper the prompt never carries Claude Code's billing header and the next
    turn, and the next conversation, reuse the cached system prompt and tool list."""
    command = variant(tmp_path, "claude-recorded", {"ANTHROPIC_BASE_URL": proxy.url})
    ratios = conversation(lab, command, tmp_path / "wrapper", proxy)
    print(f"prefix-cache hit ratio with CLAUDE_CODE_ATTRIBUTION_HEADER=0: {json.dumps(ratios)}")
    assert len(proxy.bodies) >= 3 and proxy.billing_headers() == [None] * len(proxy.bodies)
    assert min(ratios.values()) >= PREFIX_HIT_FLOOR, ratios


def test_without_the_setting_the_header_changes_and_vllm_strips_it(
    lab: Lab, site, tmp_path: Path, proxy: RecordingProxy
) -> None:
    """Without CLAUDE_CODE_ATTRIBUTION_HEADER=0 every request starts with the billing header,
    whose hash follows the conversation's first message: the same within a conversation,
    different for the next one. A server that keeps it misses the prefix cache from the
    first block on; vLLM 0.32 drops that block itself (chat_utils and the Anthropic
    endpoint), so the ratio holds here. Both ratios go into the record."""
    command = variant(
        tmp_path,
        "claude-billing",
        {"ANTHROPIC_BASE_URL": proxy.url, "CLAUDE_CODE_ATTRIBUTION_HEADER": None},
    )
    ratios = conversation(lab, command, tmp_path / "billing", proxy)
    print(f"prefix-cache hit ratio with the billing header sent: {json.dumps(ratios)}")
    headers = proxy.billing_headers()
    assert all(headers), headers
    first, second = proxy.marks
    turns = [headers[:first], headers[first:second], headers[second:]]
    print(f"billing headers per turn: {json.dumps(turns, indent=1)}")
    first_turn, next_turn, next_conversation = (set(turn) for turn in turns)
    assert first_turn & next_turn and not next_conversation & (first_turn | next_turn), turns
    assert min(ratios.values()) >= PREFIX_HIT_FLOOR, ratios


def router_turn(
    lab: Lab, workdir: Path, tmp_path: Path, prompt: str, files: dict[Path, str]
) -> None:
    """Claude Code -> claude-code-router on spark-1 (Anthropic API, its own key) -> the
    lab vLLM's OpenAI endpoint: one turn of ``prompt``, whose Reads of ``files`` the router
    turns into tool_use blocks of one message."""
    address = lab.management_ip("spark-1")
    assert lab.out("spark-1", "systemctl is-active llmfleet-claude-code-router").strip() == "active"
    journal_since = lab.out("spark-1", "date '+%Y-%m-%d %H:%M:%S'").strip()
    command = variant(
        tmp_path,
        "claude-router",
        {"ANTHROPIC_BASE_URL": f"http://{address}:3456", "ANTHROPIC_AUTH_TOKEN": ROUTER_KEY},
    )
    turn = claude(command, workdir, prompt)
    # The router does not pass Claude Code's environment message on (the model reads the
    # files by their relative names).
    assert_agent_loop(turn, files, workdir, absolute=False)
    # The router, not Claude Code, called vLLM: OpenAI chat completions from spark-1.
    log = lab.out(
        "spark-1", f"journalctl -u llmfleet-vllm --since '{journal_since}' --no-pager -o cat"
    )
    assert re.search(
        rf'{re.escape(address)}:\d+ - "POST /v1/chat/completions HTTP/1.1" 200', log
    ), log[-3000:]


def test_claude_code_runs_its_tool_loop_through_claude_code_router(
    lab: Lab, parser: str, workdir: Path, tmp_path: Path
) -> None:
    """One Read, made a tool_call by vLLM's `parser` and a tool_use block by the router."""
    prompt = "What does fib.py do? Answer in one sentence."
    router_turn(lab, workdir, tmp_path, prompt, {workdir / "fib.py": "def fib(n):"})


# Extended, a finding: once in three full runs (2026-11-28, two labs on two loaded cores)
# the first of the two parallel calls reached Claude Code without its input (Read without
# `file_path`), the second whole. The same two calls streamed from vLLM's chat completions
# by hand came whole 17 times in 17; whether vLLM's hermes parser (several tokens in one
# streamed chunk under load) or the router's stream translation drops it is not known yet.
@pytest.mark.extended
def test_claude_code_runs_parallel_tool_calls_through_claude_code_router(
    lab: Lab, parser: str, workdir: Path, tmp_path: Path
) -> None:
    """Two parallel Reads, made tool_calls by vLLM's `parser`, that the router turns into two
    tool_use blocks of one message."""
    router_turn(
        lab, workdir, tmp_path, "Compare fib.py and NOTES.md, briefly.",
        {workdir / "fib.py": "def fib(n):", workdir / "NOTES.md": "The code word is teal."},
    )  # fmt: skip
