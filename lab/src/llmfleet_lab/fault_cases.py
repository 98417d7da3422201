"""The cases of `llmfleet lab faults` (llmfleet_lab.faults): what each breaks, the way it
breaks on Sparks, on the lab's serving path, and the bound within which the group must serve
again."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from llmfleet_lab import podman

# The lab's vLLM starts in about 40-60 s and warms up in 10-15 s on two shared cores; a node
# that boots adds its units' start. Serving again within 2 minutes of the node being back is
# the target for the reboots, a killed rank and a link that comes back.
BOUND_S = 120.0
# A wedged engine keeps /health at 200: the probe needs `failures` probes without an answer,
# each up to `timeout` plus the `interval` (3 x (20 + 10) s with the role's defaults), then
# the restart (the bound above). Plus one interval: on two cores loaded by a second lab the
# probe's third failure came 97 s after the fault, not 90 (CI, 2026-11-28).
WEDGED_BOUND_S = 3 * (20 + 10) + 10 + BOUND_S
# On the ray-container path (the Spark sample's): each node's Ray container (role ray_node's
# default name); vLLM runs inside the head's, rank 1 is a Ray worker in spark-2's.
RAY_CONTAINER = "llmfleet-ray"


class Lab(Protocol):
    """What a case needs of the served lab (llmfleet_lab.faults.Lab)."""

    @property
    def on_ray_containers(self) -> bool: ...

    def container(self, node: str) -> str: ...

    def sh(self, node: str, script: str, *, check: bool = True, timeout: float = 120) -> str: ...

    def recable(self) -> None: ...


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
        # The head's container, and vLLM with it, as a crash or the kernel's OOM kill ends
        # it: its main process killed, so that Docker starts it again (restart always).
        # `docker kill` would be a person's stop, which Docker's restart policy respects.
        lab.sh(
            "spark-1",
            f"kill -KILL $(docker inspect --format '{{{{.State.Pid}}}}' {RAY_CONTAINER})",
        )
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
    """``healed_by``: who must act for the case to heal (the probe's state names it), where
    requests may go on answering until then: the measurement waits for that heal too."""

    name: str
    what: str
    inject: Callable[[Lab], float]
    bound_s: float = BOUND_S
    healed_by: str | None = None


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
        healed_by="probe",
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
        # vLLM answers while the allocation grows: on two cores loaded by a second lab the
        # guard's kill came after the measurement had settled (CI, 2026-12-01).
        healed_by="memory guard",
    ),
)
