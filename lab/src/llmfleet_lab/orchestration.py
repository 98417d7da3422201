"""A benchmark of the orchestration itself, on a fresh lab.

What a user waits for, measured in one run on the same lab (so the machine's speed cancels
out of the ratios):

* the fresh converge (`llmfleet up` on new nodes) and, during it, the time until vLLM
  first answers ``/health``;
* vLLM's own start: its units stopped and started again on every node at once, with the
  configuration the converge wrote, until ``/health`` answers;
* a no-op re-run (time, changed and run tasks per host): `llmfleet up` as a user runs it,
  which stops after one call per host when nothing changed, and with ``--full``, which walks
  every task;
* a profile change (one ``vllm serve`` option) converged with `llmfleet up`, which walks only
  the tags the changed variable reaches, then another with ``--full`` (every task walked, as
  before), whose half is its target.

The figures that matter are ratios and counts: first answer / vLLM's own start, the no-op
run's tasks. Results are written beside the serving benchmark (``artifacts/bench``) as
JSON and markdown.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console

from llmfleet_lab import cluster, podman
from llmfleet_lab.errors import LabError

# Targets of issue 12 (the benchmark reports them; no test asserts a time).
NO_OP_TARGET_S = 20.0
FIRST_ANSWER_RATIO_TARGET = 1.5
RECAP = re.compile(
    r"^(?P<host>\S+)\s+: ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)"
    r"\s+unreachable=(?P<unreachable>\d+)\s+failed=(?P<failed>\d+)\s+skipped=(?P<skipped>\d+)",
    re.M,
)
VLLM_UNITS = ("llmfleet-vllm",)
PROFILE_CHANGE = {"vllm_server_profile_overrides": {"max_num_seqs": 7}}
# The second change, walked with --full: another value, so that vLLM restarts again.
PROFILE_CHANGE_FULL = {"vllm_server_profile_overrides": {"max_num_seqs": 6}}
# A profile change against the same change walked in full (issue 38: less than half).
PROFILE_CHANGE_TARGET = 0.5


@dataclass
class Run:
    """One `llmfleet up`: how long it took and its play recap per host."""

    seconds: float
    recap: dict[str, dict[str, int]]
    first_answer_s: float | None = None


@dataclass
class OrchestrationResult:
    timestamp: str
    lab: str
    nodes: int
    lab_up_s: float
    fresh: Run
    vllm_own_start_s: float
    no_op: Run
    profile_change: Run
    # the same no-op run with --full: every task walked
    no_op_full: Run | None = None
    # another profile change, with --full: every task walked, as before the limited walk
    profile_change_full: Run | None = None
    targets: dict[str, float] = field(
        default_factory=lambda: {
            "no_op_s": NO_OP_TARGET_S,
            "first_answer_over_vllm_start": FIRST_ANSWER_RATIO_TARGET,
            "profile_change_over_full": PROFILE_CHANGE_TARGET,
        }
    )

    @property
    def profile_change_ratio(self) -> float | None:
        full = self.profile_change_full
        if full is None or full.seconds <= 0:
            return None
        return self.profile_change.seconds / full.seconds

    @property
    def first_answer_ratio(self) -> float | None:
        if self.fresh.first_answer_s is None or self.vllm_own_start_s <= 0:
            return None
        return self.fresh.first_answer_s / self.vllm_own_start_s

    def to_json(self) -> str:
        data = asdict(self)
        data["first_answer_over_vllm_start"] = self.first_answer_ratio
        data["profile_change_over_full"] = self.profile_change_ratio
        return json.dumps(data, indent=2)


def parse_recap(output: str) -> dict[str, dict[str, int]]:
    """The PLAY RECAP counts per host of an ansible run's output (the last recap wins)."""
    return {
        m["host"]: {
            key: int(m[key]) for key in ("ok", "changed", "unreachable", "failed", "skipped")
        }
        for m in RECAP.finditer(output)
    }


def _figure(value: float | None, unit: str = "s") -> str:
    return "n/a" if value is None else f"{value:.1f} {unit}".rstrip()


def render_markdown(result: OrchestrationResult) -> str:
    """The report a person reads: figures, targets, and the counts per host."""
    ratio = result.first_answer_ratio
    no_op_ok = result.no_op.seconds <= NO_OP_TARGET_S
    ratio_ok = ratio is not None and ratio <= FIRST_ANSWER_RATIO_TARGET
    change = result.profile_change_ratio
    change_ok = change is not None and change < PROFILE_CHANGE_TARGET
    lines = [
        f"# Orchestration benchmark, lab {result.lab} ({result.nodes} nodes), {result.timestamp}",
        "",
        "| figure | value | target |",
        "| --- | --- | --- |",
        f"| lab up (fresh nodes) | {_figure(result.lab_up_s)} | |",
        f"| fresh `llmfleet up` | {_figure(result.fresh.seconds)} | |",
        f"| ... of which until vLLM first answers | {_figure(result.fresh.first_answer_s)} | |",
        f"| vLLM's own start (units restarted, same config)"
        f" | {_figure(result.vllm_own_start_s)} | |",
        f"| **first answer / vLLM's own start** | {_figure(ratio, 'x')} |"
        f" <= {FIRST_ANSWER_RATIO_TARGET} {'(met)' if ratio_ok else '(not met)'} |",
        f"| **no-op `llmfleet up`** | {_figure(result.no_op.seconds)} |"
        f" <= {NO_OP_TARGET_S:.0f} s {'(met)' if no_op_ok else '(not met)'} |",
        f"| no-op `llmfleet up --full` (every task walked)"
        f" | {_figure(result.no_op_full.seconds if result.no_op_full else None)} | |",
        f"| profile change (one serve option, the tags it reaches)"
        f" | {_figure(result.profile_change.seconds)} | |",
        f"| profile change with `--full` (every task walked)"
        f" | {_figure(result.profile_change_full.seconds if result.profile_change_full else None)}"
        " | |",
        f"| **profile change / the same with --full** | {_figure(change, 'x')} |"
        f" < {PROFILE_CHANGE_TARGET} {'(met)' if change_ok else '(not met)'} |",
        "",
        "| run | host | ok (tasks run) | changed | skipped |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, run in (
        ("fresh", result.fresh),
        ("no-op", result.no_op),
        ("no-op --full", result.no_op_full),
        ("profile change", result.profile_change),
        ("profile change --full", result.profile_change_full),
    ):
        if run is None:
            continue
        for host, counts in sorted(run.recap.items()):
            lines.append(
                f"| {name} | {host} | {counts['ok']} | {counts['changed']} | {counts['skipped']} |"
            )
    return "\n".join(lines) + "\n"


class HealthWatch:
    """Polls ``url`` from a thread and records when it first answers 200."""

    def __init__(self, url: str, started: float) -> None:
        self.url = url
        self.started = started
        self.first_answer_s: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> HealthWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                # An http:// URL this module builds from the lab's own address.
                with urllib.request.urlopen(self.url, timeout=2) as response:  # noqa: S310
                    if response.status == 200:
                        self.first_answer_s = time.monotonic() - self.started
                        return
            except (OSError, urllib.error.URLError):
                pass
            self._stop.wait(0.5)


def _tool_env(lab: str) -> dict[str, str]:
    """The environment of the runs: this lab, and this interpreter's scripts first on PATH
    (llmfleet and ansible-playbook come from the same environment as this process)."""
    scripts = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "LLMFLEET_LAB": lab,
        "PATH": os.pathsep.join([scripts, os.environ.get("PATH", "")]),
    }


def _llmfleet_up(
    lab: str,
    root: Path,
    health_url: str | None,
    extra_vars: Sequence[str] = (),
    options: Sequence[str] = (),
) -> Run:
    args = ["llmfleet", "up", "-i", "inventory/lab", "--plain", *options]
    for value in extra_vars:
        args += ["-e", value]
    started = time.monotonic()
    watching: AbstractContextManager[HealthWatch | None] = (
        HealthWatch(health_url, started) if health_url else nullcontext()
    )
    with watching as watch:
        proc = subprocess.run(
            args,
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
            timeout=3600,
            env=_tool_env(lab),
        )
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        raise LabError(
            f"`{' '.join(args)}` failed (exit {proc.returncode})", detail=proc.stdout[-3000:]
        )
    return Run(
        seconds=round(seconds, 1),
        recap=parse_recap(proc.stdout),
        first_answer_s=None
        if watch is None or watch.first_answer_s is None
        else round(watch.first_answer_s, 1),
    )


def _vllm_units_on(containers: Sequence[str]) -> list[str]:
    """The nodes that have vLLM's unit: every rank's on the native path, the head's alone on
    the Ray path (the other ranks are workers of Ray's, in its container)."""
    return [
        container
        for container in containers
        if podman.exec_in(
            container, "systemctl", "show", "-p", "LoadState", "--value", *VLLM_UNITS
        ).stdout.strip()
        == "loaded"
    ]


def _vllm_own_start(lab: str, containers: Sequence[str], health_url: str) -> float:
    """Stop vLLM on every node that runs its unit, start it on all at once, time until
    /health answers."""
    containers = _vllm_units_on(containers)
    for container in containers:
        podman.exec_in(container, "systemctl", "stop", *VLLM_UNITS, timeout=180)
    started = time.monotonic()
    for container in containers:
        podman.exec_in(container, "systemctl", "start", "--no-block", *VLLM_UNITS)
    with HealthWatch(health_url, started) as watch:
        deadline = started + 1200
        while watch.first_answer_s is None and time.monotonic() < deadline:
            time.sleep(0.5)
    if watch.first_answer_s is None:
        raise LabError(f"lab {lab!r}: vLLM did not answer {health_url} within 1200 s")
    return round(watch.first_answer_s, 1)


def run(
    console: Console,
    *,
    lab: str,
    root: Path,
    output_dir: Path,
    nodes: int = 2,
    say: Callable[[str], None] | None = None,
) -> tuple[Path, OrchestrationResult]:
    """Remove the lab, bring it up fresh and measure; returns the JSON path and result."""
    say = say or console.print
    say(f"removing lab {lab!r} for a fresh start")
    cluster.down(console, lab=lab)
    started = time.monotonic()
    status = cluster.up(console, nodes=nodes, lab=lab)
    lab_up_s = round(time.monotonic() - started, 1)
    head = status.nodes[0]
    health_url = f"http://{head.management_ip}:8000/health"
    # The lab's model has 2 attention heads: an even lab serves as groups of two behind the
    # gateway (inventory/lab/nodes.py); on an odd one, vLLM serves on the first two (the
    # layout the validation play suggests) and the others run the rest of the roles.
    layout = [json.dumps({"llmfleet_vllm_hosts": ["spark-1", "spark-2"]})] if nodes % 2 else []
    say(f"lab up in {lab_up_s} s; fresh converge (llmfleet up), watching {health_url}")
    fresh = _llmfleet_up(lab, root, health_url, layout)
    say(f"fresh converge {fresh.seconds} s, first answer at {fresh.first_answer_s} s")
    say("no-op re-run")
    no_op = _llmfleet_up(lab, root, None, layout)
    say(f"no-op {no_op.seconds} s; the same with --full (every task walked)")
    no_op_full = _llmfleet_up(lab, root, None, layout, ["--full"])
    # Before vLLM's own start: its restart by hand would walk every task (a unit restarted).
    say(f"no-op --full {no_op_full.seconds} s; profile change (the tags it reaches)")
    change = _llmfleet_up(lab, root, None, [*layout, json.dumps(PROFILE_CHANGE)])
    say(f"profile change {change.seconds} s; another, with --full")
    change_full = _llmfleet_up(
        lab, root, None, [*layout, json.dumps(PROFILE_CHANGE_FULL)], ["--full"]
    )
    say(f"profile change --full {change_full.seconds} s; vLLM's own start (units restarted)")
    serving = [node.container for node in status.nodes[:2]]
    own = _vllm_own_start(lab, serving, health_url)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    result = OrchestrationResult(
        timestamp=stamp,
        lab=lab,
        nodes=nodes,
        lab_up_s=lab_up_s,
        fresh=fresh,
        vllm_own_start_s=own,
        no_op=no_op,
        profile_change=change,
        profile_change_full=change_full,
        no_op_full=no_op_full,
    )
    output_dir.mkdir(parents=True, exist_ok=True)
    path = output_dir / f"orchestration-{stamp}.json"
    path.write_text(result.to_json() + "\n", encoding="utf-8")
    path.with_suffix(".md").write_text(render_markdown(result), encoding="utf-8")
    return path, result
