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

from llmfleet.lab import cluster, podman
from llmfleet.lab.errors import LabError
from llmfleet.lab.nodes import DEFAULT_LAB, RAY_CONTAINER_PATH

# inventory/lab/group_vars/all/serving.yml: the lab's own key (not a secret).
LAB_API_KEY = "llmfleet-lab-key"
LAB_MODEL = "llmfleet-tiny"
API_PORT = 8000
PROBE = "/usr/local/sbin/llmfleet-vllm-probe"
PROBE_CONFIG = "/etc/llmfleet/vllm/probe.json"
PROBE_STATE = "/var/lib/llmfleet/vllm-probe.json"
# On the ray-container path (the Spark sample's): each node's Ray container (role ray_node's
# default name); vLLM runs inside the head's, rank 1 is a Ray worker in spark-2's.
RAY_CONTAINER = "llmfleet-ray"
# The lab's vLLM starts in about 40-60 s and warms up in 10-15 s on two shared cores; a node
# that boots adds its units' start. Serving again within 2 minutes of the node being back is
# the target for the reboots, a killed rank and a link that comes back.
BOUND_S = 120.0
# A wedged engine keeps /health at 200: the probe needs `failures` probes without an answer,
# each up to `timeout` plus the `interval` (3 x (20 + 10) s with the role's defaults), then
# the restart (the bound above).
WEDGED_BOUND_S = 3 * (20 + 10) + BOUND_S


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
            self._serving_path = cluster.status(self.name).serving_path
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
        cluster.up(self.console, nodes=len(cluster.status(self.name).nodes), lab=self.name)

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


def reboot(*nodes: str) -> Callable[[Lab], float]:
    def inject(lab: Lab) -> float:
        for node in nodes:
            podman.run("restart", "--time", "10", lab.container(node), timeout=180)
        lab.recable()
        return time.time()

    return inject


def _sigkill_rank_1(lab: Lab) -> float:
    if lab.on_ray_containers:
        # Rank 1 is Ray's worker in spark-2's Ray container (the node sees its processes).
        lab.sh("spark-2", "pkill --signal KILL -f RayWorkerProc")
    else:
        lab.sh("spark-2", "kill -9 $(systemctl show -p MainPID --value llmfleet-vllm)")
    return time.time()


def _wedge_rank_0(lab: Lab) -> float:
    # SIGSTOP of the engine core: the API server keeps answering /health with 200.
    lab.sh("spark-1", "kill -STOP $(pgrep -f '^VLLM::EngineCore')")
    return time.time()


def _link_flap(lab: Lab) -> float:
    lab.sh("spark-2", "ip link set enp1s0f1np1 down")
    time.sleep(30)
    lab.sh("spark-2", "ip link set enp1s0f1np1 up")
    return time.time()


def _kill_ray_head(lab: Lab) -> float:
    if lab.on_ray_containers:
        # The head's container, and vLLM with it: Docker starts it again (restart always).
        lab.sh("spark-1", f"docker kill --signal KILL {RAY_CONTAINER}")
    else:
        lab.sh("spark-1", "systemctl kill --signal=KILL llmfleet-ray")
    return time.time()


# A runaway allocation of rank 0's vLLM: a process that takes the node's emulated unified
# memory (the lab's GB10 pool, driven by the node's real cgroup usage) down to 1% of the pool,
# under the probe's floor (3%), and lives as long as vLLM's main process does (the lab cannot
# place it inside vLLM's own process, and systemd's kill does not reach a process put into
# the unit's cgroup from outside it here). The memory guard kills vLLM, and the allocation
# goes with it; it ends by itself after two minutes whatever happens.
MEMORY_HOG = r"""
meminfo={meminfo}
vllm=$({vllm_pid})
available=$(awk '/^MemAvailable:/ {{print $2}}' "$meminfo")
total=$(awk '/^MemTotal:/ {{print $2}}' "$meminfo")
bytes=$(( (available - total / 100) * 1024 ))
nohup timeout 120 python3 -c '
import os, sys, time
hog = b"\x01" * int(sys.argv[1])
while True:
    try:
        os.kill(int(sys.argv[2]), 0)
    except OSError:
        break
    time.sleep(0.2)
' "$bytes" "$vllm" >/dev/null 2>&1 &
"""
LAB_MEMINFO = "/run/llmfleet-lab/meminfo"


# rank 0's `vllm serve`: the unit's main process, or (the ray-container path) the process in
# the Ray head container as the node sees it (the unit's main process is `docker exec`'s
# client there, whose command line names `vllm`, not `bin/vllm`).
VLLM_PID = {
    False: "systemctl show -p MainPID --value llmfleet-vllm",
    True: "pgrep -of 'bin/vllm serve --config'",
}


def _memory_hog(lab: Lab) -> float:
    script = MEMORY_HOG.format(meminfo=LAB_MEMINFO, vllm_pid=VLLM_PID[lab.on_ray_containers])
    lab.sh("spark-1", script)
    return time.time()


@dataclass(frozen=True)
class Case:
    name: str
    what: str
    inject: Callable[[Lab], float]
    bound_s: float = BOUND_S


CASES: tuple[Case, ...] = (
    Case("reboot_rank_1", "spark-2 (rank 1) rebooted, its links cabled again", reboot("spark-2")),
    Case("reboot_rank_0", "spark-1 (rank 0) rebooted, its links cabled again", reboot("spark-1")),
    Case("reboot_all", "both nodes rebooted at once", reboot("spark-1", "spark-2")),
    Case("sigkill_rank_1", "rank 1's vLLM killed (SIGKILL)", _sigkill_rank_1),
    Case(
        "wedged_rank_0",
        "rank 0's engine core stopped (SIGSTOP): /health stays 200",
        _wedge_rank_0,
        WEDGED_BOUND_S,
    ),
    # A collective stalled on a pulled link looks like a wedged engine (/health 200, nothing
    # moves) and is found the same way; the count starts while the link is still down.
    Case(
        "link_down_30s",
        "spark-2's fabric link down for 30 s, then up",
        _link_flap,
        WEDGED_BOUND_S,
    ),
    Case(
        "ray_head_killed",
        "the Ray head killed (SIGKILL: its unit, or on the ray-container path its container,"
        " vLLM inside)",
        _kill_ray_head,
    ),
    Case(
        "memory_hog_rank_0",
        "a runaway allocation of rank 0's vLLM takes the node's memory to 1%",
        _memory_hog,
    ),
)


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


def measure(lab: Lab, case: Case, observe_s: float = 45.0) -> CaseResult:
    """Inject one fault during a stream of requests; stop once the group has answered a few
    requests in a row, at least ``observe_s`` after the node was back (or its bound and a
    margin passed)."""
    known = {heal.get("epoch") for heal in lab.heals()}
    url = lab.api_url()
    with Stream(lambda: url) as stream:
        time.sleep(5)
        fault_at = time.time()
        back_at = case.inject(lab)
        url = lab.api_url()
        deadline = back_at + case.bound_s + 120
        while time.time() < deadline and not settled(stream.samples, back_at, observe_s, 5):
            time.sleep(2)
    samples = [s for s in stream.samples if s.sent >= fault_at - 5]
    serving_at = serving_again(samples, back_at)
    heals = [heal for heal in lab.heals() if heal.get("epoch") not in known]
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
