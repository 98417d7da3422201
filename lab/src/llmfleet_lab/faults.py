"""`llmfleet lab faults`: the fault matrix of a served lab, with a steady stream of requests.

Each case breaks one thing the way it breaks on Sparks (a node rebooted, a rank killed, an
engine wedged, a link pulled, Ray's head killed, a runaway allocation), one after the other
on the same served lab, while a client sends one chat request a second to the group's API
with the key. It measures how long after the node (or the link) is back the group answers
again, how many requests failed, and whether any request sent once the heal began (the
serving probe restarted the group, or saw it restarted) got an HTTP 500 from a half-dead
group. Results: ``faults-<time>.json`` and ``.md`` (``make bench`` writes them beside the
benchmark's; the lab test asserts each case's bound).
"""

from __future__ import annotations

import json
import statistics
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from llmfleet_lab import cluster, podman
from llmfleet_lab.errors import LabError
from llmfleet_lab.fault_cases import BOUND_S, CASES, Case
from llmfleet_lab.nodes import DEFAULT_LAB, RAY_CONTAINER_PATH, lab_nodes, lab_path

# inventory/lab/group_vars/all/serving.yml: the lab's own key (not a secret).
LAB_API_KEY = "llmfleet-lab-key"
LAB_MODEL = "llmfleet-tiny"
API_PORT = 8000
PROBE = "/usr/local/sbin/llmfleet-vllm-probe"
PROBE_CONFIG = "/etc/llmfleet/vllm/probe.json"
PROBE_STATE = "/var/lib/llmfleet/vllm-probe.json"


@dataclass
class Sample:
    """One request of the stream: when it was sent and answered (epoch), and its outcome
    (an HTTP status, or 0 for no answer: refused, reset, timed out)."""

    sent: float
    done: float
    status: int


@dataclass
class CaseResult:
    name: str
    what: str
    bound_s: float
    fault_at: float
    back_at: float
    serving_at: float | None
    serving_after_back_s: float | None
    requests: int
    failed: int
    http_500_after_heal: int
    heal_began_at: float | None
    heals: list[dict[str, Any]] = field(default_factory=list)
    within_bound: bool = False


class Stream:
    """A client of the group's API: one chat request a second, in a thread of its own."""

    def __init__(self, url: Callable[[], str], key: str = LAB_API_KEY, timeout: float = 30.0):
        self.url = url
        self.key = key
        self.timeout = timeout
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Stream:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self.timeout + 5)

    def ask(self) -> Sample:
        body = {
            "model": LAB_MODEL,
            "max_tokens": 4,
            "messages": [{"role": "user", "content": "Write a Python function."}],
        }
        # http:// of the lab's own node (api_url), never a scheme from elsewhere.
        request = urllib.request.Request(  # noqa: S310
            self.url() + "/v1/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.key}"},
            method="POST",
        )
        sent = time.time()
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                response.read()
                status = response.status
        except urllib.error.HTTPError as error:
            status = error.code
        except (OSError, ValueError):
            status = 0
        return Sample(sent, time.time(), status)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(self.ask())
            self._stop.wait(1.0)


class Lab:
    """The served lab the cases run on (its first two nodes serve, spark-1 is rank 0)."""

    def __init__(self, name: str, console: Console):
        self.name = name
        self.console = console
        self._serving_path = ""

    @property
    def on_ray_containers(self) -> bool:
        """Whether the lab serves on the Spark sample's path (`llmfleet lab up --path`): the
        ranks and Ray's head are then reached in the nodes' Ray containers."""
        if not self._serving_path:
            self._serving_path = lab_path(lab_nodes(self.name))
        return self._serving_path == RAY_CONTAINER_PATH

    def container(self, node: str) -> str:
        return f"{self.name}-{node}"

    def sh(self, node: str, script: str, *, check: bool = True, timeout: float = 120) -> str:
        proc = podman.exec_in(
            self.container(node), "bash", "-c", script, check=False, timeout=timeout
        )
        if check and proc.returncode != 0:
            raise LabError(f"{node}: {script} failed", detail=proc.stdout + proc.stderr)
        return proc.stdout

    def api_url(self) -> str:
        data = podman.inspect(self.container("spark-1"))
        address = data["NetworkSettings"]["Networks"][self.name]["IPAddress"]
        return f"http://{address}:{API_PORT}"

    def recable(self) -> None:
        """What `llmfleet lab up` does after a node restarted: its links died with its
        network namespace."""
        cluster.up(self.console, nodes=len(lab_nodes(self.name)), lab=self.name)

    def ready(self) -> bool:
        proc = podman.exec_in(
            self.container("spark-1"), PROBE, "--ready", PROBE_CONFIG, check=False, timeout=60
        )
        return proc.returncode == 0

    def wait_ready(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.ready():
                return
            time.sleep(3)
        raise LabError(
            f"the lab's group is not ready {seconds:.0f} s after the last case",
            detail=self.sh(
                "spark-1", "journalctl -u llmfleet-vllm-probe -n 20 -o cat", check=False
            ),
        )

    def heals(self) -> list[dict[str, Any]]:
        text = self.sh("spark-1", f"cat {PROBE_STATE}", check=False)
        try:
            return list(json.loads(text).get("heals") or [])
        except ValueError:
            return []


def serving_again(samples: Sequence[Sample], back_at: float) -> float | None:
    """When the group served again: the first request sent after the last failed one (and not
    before the node was back) that answered; None when none did."""
    last_failed = max((s.sent for s in samples if s.status != 200), default=back_at)
    answered = [s.sent for s in samples if s.status == 200 and s.sent >= max(back_at, last_failed)]
    return answered[0] if answered else None


def settled(samples: Sequence[Sample], back_at: float, observe_s: float, answers: int) -> bool:
    """Observed long enough after the node was back, and the last ``answers`` requests
    answered (a fault can take effect late: a rank killed fails the next collective)."""
    after = [s for s in samples if s.sent >= back_at]
    if not after or after[-1].done - back_at < observe_s or len(after) < answers:
        return False
    return all(s.status == 200 for s in after[-answers:])


def healed(case: Case, heals: Sequence[dict[str, Any]]) -> bool:
    """Whether the heal the case waits for (``healed_by``, when it names one) is among
    ``heals``: a runaway allocation leaves vLLM answering until its memory guard acts."""
    return case.healed_by is None or any(heal.get("by") == case.healed_by for heal in heals)


def measure(lab: Lab, case: Case, observe_s: float = 45.0) -> CaseResult:
    """Inject one fault during a stream of requests; stop once the group has answered a few
    requests in a row, at least ``observe_s`` after the node was back (or its bound and a
    margin passed)."""
    known = {heal.get("epoch") for heal in lab.heals()}

    def new_heals() -> list[dict[str, Any]]:
        return [heal for heal in lab.heals() if heal.get("epoch") not in known]

    url = lab.api_url()
    with Stream(lambda: url) as stream:
        time.sleep(5)
        fault_at = time.time()
        back_at = case.inject(lab)
        url = lab.api_url()
        deadline = back_at + case.bound_s + 120
        while time.time() < deadline and not (
            settled(stream.samples, back_at, observe_s, 5) and healed(case, new_heals())
        ):
            time.sleep(2)
    samples = [s for s in stream.samples if s.sent >= fault_at - 5]
    serving_at = serving_again(samples, back_at)
    heals = new_heals()
    # When the probe (or its memory guard) acted, or saw vLLM started again: from then on the
    # group is restarting, and a request meets a refused connection, not a half-dead engine.
    noticed = min((float(h["epoch"]) for h in heals), default=None)
    after_noticed = [s for s in samples if noticed is not None and s.sent >= noticed]
    serving_after = None if serving_at is None else round(max(serving_at - back_at, 0.0), 1)
    return CaseResult(
        name=case.name,
        what=case.what,
        bound_s=case.bound_s,
        fault_at=round(fault_at, 3),
        back_at=round(back_at, 3),
        serving_at=None if serving_at is None else round(serving_at, 3),
        serving_after_back_s=serving_after,
        requests=len(samples),
        failed=sum(1 for s in samples if s.status != 200),
        http_500_after_heal=sum(1 for s in after_noticed if s.status >= 500),
        heal_began_at=noticed,
        heals=heals,
        within_bound=serving_after is not None and serving_after <= case.bound_s,
    )


def first_request_after_a_start(lab: Lab) -> dict[str, float]:
    """Restart the group (rank 0; rank 1 follows it), wait until the probe says ready, then
    time the first request and the next ones: ready means warmed up."""
    lab.sh("spark-1", "systemctl restart llmfleet-vllm")
    time.sleep(5)
    lab.wait_ready(BOUND_S + 180)
    stream = Stream(lab.api_url)
    timings = [stream.ask() for _ in range(6)]
    if any(sample.status != 200 for sample in timings):
        raise LabError(f"requests after the start failed: {[s.status for s in timings]}")
    first, *rest = [round(s.done - s.sent, 3) for s in timings]
    return {"first_s": first, "next_median_s": statistics.median(rest), "next_max_s": max(rest)}


def render_markdown(document: dict[str, Any]) -> str:
    lines = [
        f"# Fault matrix on the lab ({document['timestamp']})",
        "",
        "One chat request a second during each fault; `serving again` counts from the node (or"
        " link) being back to the first request sent then that answered.",
        "",
        "| case | what | serving again | bound | requests | failed | 500 after the heal began |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for case in document["cases"]:
        again = case["serving_after_back_s"]
        lines.append(
            "| {} | {} | {} | {:.0f} s | {} | {} | {} |".format(
                case["name"],
                case["what"],
                "never" if again is None else f"{again:.1f} s",
                case["bound_s"],
                case["requests"],
                case["failed"],
                case["http_500_after_heal"],
            )
        )
    first = document.get("first_request")
    if first:
        lines += [
            "",
            "First request after a start (once the probe said ready): {first_s:.3f} s;"
            " the next ones {next_median_s:.3f} s (median), {next_max_s:.3f} s (max).".format(
                **first
            ),
        ]
    lines += ["", "Heals the probe recorded:", ""]
    for case in document["cases"]:
        for heal in case["heals"]:
            lines.append(
                f"- {case['name']}: {heal.get('time')} ({heal.get('by')}): {heal.get('reason')}"
            )
    return "\n".join(lines) + "\n"


def run(
    console: Console,
    *,
    lab: str = DEFAULT_LAB,
    output_dir: Path,
    cases: Sequence[str] = (),
) -> tuple[Path, dict[str, Any]]:
    """Run the cases (all by default) in order on the served lab ``lab``; write the results."""
    unknown = sorted(set(cases) - {case.name for case in CASES})
    if unknown:
        raise LabError(
            f"unknown fault case(s): {', '.join(unknown)}", hint=", ".join(c.name for c in CASES)
        )
    chosen = [case for case in CASES if not cases or case.name in cases]
    target = Lab(lab, console)
    target.wait_ready(BOUND_S)
    results = []
    for case in chosen:
        console.print(f"fault {case.name}: {case.what}")
        result = measure(target, case)
        console.print(
            "  serving again {} after it was back (bound {:.0f} s), {} of {} requests failed,"
            " {} HTTP 500 after the heal began".format(
                "never"
                if result.serving_after_back_s is None
                else f"{result.serving_after_back_s} s",
                case.bound_s,
                result.failed,
                result.requests,
                result.http_500_after_heal,
            )
        )
        results.append(result)
        target.wait_ready(BOUND_S + 180)
    console.print("first request after a start")
    first = first_request_after_a_start(target)
    console.print(f"  first {first['first_s']} s, next {first['next_median_s']} s (median)")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    document = {
        "timestamp": stamp,
        "lab": lab,
        "cases": [asdict(result) for result in results],
        "first_request": first,
    }
    output_dir.mkdir(parents=True, exist_ok=True)
    path = output_dir / f"faults-{stamp}.json"
    path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    path.with_suffix(".md").write_text(render_markdown(document), encoding="utf-8")
    return path, document
