"""Every molecule scenario, on lab nodes over SSH: converge, idempotence, verify.

Scenarios that can follow one another on the same nodes share one lab, as roles share a
Spark: each later scenario converges on what the earlier ones left, which is a day-2 run
of its role, and its idempotence and verify steps hold all the same. A group's lab is
started by the first scenario's create step and removed after the group. The order
inside a group is deliberate: the fabric before what runs on it, the firewall last (it
closes the ports the others open), one vLLM deployment kind per group.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from .conftest import ROOT, llmfleet

GROUPS: dict[str, tuple[str, ...]] = {
    "fabric": (
        "default",
        "cx7_network",
        "fabric_verify",
        "rdma_verify",
        "model_weights",
        "nccl_env",
        "gpu_container",
        "cluster_firewall",
    ),
    # HAProxy in front of two plain HTTP upstreams, on a lab of its own: make test's only
    # walk of the gateway (the 4-node lab's real groups behind it are extended).
    "gateway": ("serving_gateway",),
    # Ray's head and worker in each node's Docker, the head started and registered first.
    "ray": ("ray_node",),
    "clients": ("claude_code", "claude_code_router", "mlx_server", "preflight"),
    # vLLM in Docker, then natively (the role retires the container), benchmarked, then
    # scraped by monitoring.
    "serving": ("vllm_server", "benchmark", "monitoring"),
    # Ray's containers in Podman, the engine a user may pick instead of Docker.
    "podman": ("ray_node_podman",),
}
# Groups whose scenarios make test leaves out (pytest -m extended runs them): the serving
# group's roles are served, benchmarked and scraped by the test lab's own tests too (site,
# bench, upgrade in containers, prometheus), and its 16 minutes did not fit CI's time; the
# clients group's (7 minutes) are converged by the test lab's site run and driven by
# test_lab_clients (Claude Code's agent loop, claude-code-router, preflight), mlx_server's
# files and commands by tests/unit/roles/test_macos_*.
# The fabric group's roles are converged, run a second time with nothing changed and in
# check mode by the lab tests: the fabric roles on the bare lab (tests/lab/bare), the others
# by the site runs of the test and Ray-path labs; its scenarios (9 of them, about half an
# hour on CI's machine, 2026-11-28) did not fit CI's time with those labs. The ray
# group's scenario (Ray in each node's Docker) is walked by the Ray-path lab, whose nodes
# run Ray's containers heads first and start them again after a reboot.
# The podman group's Ray cluster runs through gpu_container's Podman launch, which the fabric
# group's gpu_container scenario converges and verifies in make test; Ray's own settings in
# it (2 minutes: the runtime image imported in each node's Podman) run here.
EXTENDED_GROUPS = frozenset({"fabric", "ray", "serving", "clients", "podman"})
SCENARIOS = sorted(p.parent.name for p in (ROOT / "molecule").glob("*/molecule.yml"))
CASES = [(group, scenario) for group, members in GROUPS.items() for scenario in members]


def lab_of(group: str) -> str:
    return f"llmfleet-molecule-{group}"


def test_every_scenario_belongs_to_one_group() -> None:
    grouped = [scenario for _, scenario in CASES]
    assert sorted(grouped) == SCENARIOS


@pytest.fixture(scope="module")
def molecule_labs() -> Iterator[set[str]]:
    """The group labs started so far; each is removed once its last scenario has run (and
    all of them at the end, whatever failed)."""
    started: set[str] = set()
    yield started
    for lab in sorted(started):
        llmfleet("lab", "down", "--name", lab)


@pytest.mark.parametrize(
    ("group", "scenario"),
    [
        pytest.param(
            group,
            scenario,
            id=scenario,
            marks=[pytest.mark.extended] if group in EXTENDED_GROUPS else [],
        )
        for group, scenario in CASES
    ],
)
def test_molecule_scenario(group: str, scenario: str, molecule_labs: set[str]) -> None:
    lab = lab_of(group)
    if not molecule_labs:
        # What an interrupted session left must not decide this one.
        for name in GROUPS:
            llmfleet("lab", "down", "--name", lab_of(name))
    molecule_labs.add(lab)
    proc = subprocess.run(
        ["molecule", "test", "--scenario-name", scenario],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
        env={**os.environ, "LLMFLEET_MOLECULE_LAB": lab, "NO_COLOR": "1", "PY_COLORS": "0"},
    )
    if scenario == GROUPS[group][-1]:
        llmfleet("lab", "down", "--name", lab)
        molecule_labs.discard(lab)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-6000:]
    assert "idempotence: Executed: Successful" in output or "Idempotence completed" in output
    assert " passed" in output  # testinfra ran and passed
