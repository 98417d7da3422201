"""The lab under test: a lab of its own name, up for the tests of this package, down after them."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..conftest import worker_group

ROOT = Path(__file__).resolve().parents[2]
TEST_LAB = os.environ.get("LLMFLEET_TEST_LAB", "llmfleet-test")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.lab)
    # The tests of the bare lab (links, counters, the fabric roles, which pull cables and
    # reset MTUs, the validation play) have a lab of their own (tests/lab/bare). Here a test
    # without `site` would run before the tests of the served lab, whatever its file name;
    # the upgrade tests, which leave vLLM in containers, after all of them; `llmfleet down`
    # (which serves again with `llmfleet up` at its end) between the two, then the faults
    # (nodes rebooted, ranks killed: the lab serves again after each, but what a test wrote on
    # a node outside the roles' files may be gone).
    # The test lab's tests come last, together (its `lab` is the package's, removed when the
    # run leaves the package): so also in one process (TEST_WORKERS=), where the other
    # groups' tests run first.
    items.sort(
        key=lambda item: (
            worker_group(item.nodeid) == "test-lab",
            "site" in getattr(item, "fixturenames", ()),
            Path(str(item.fspath)).name == "test_lab_upgrade.py",
            Path(str(item.fspath)).name == "test_lab_heal.py",
            "down_then_up" in item.name,
        )
    )


def llmfleet(*args: str, env: dict[str, str] | None = None, timeout: int = 1800) -> str:
    proc = subprocess.run(
        ["llmfleet", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    assert proc.returncode == 0, f"llmfleet {' '.join(args)}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@dataclass(frozen=True)
class Lab:
    name: str

    def container(self, node: str) -> str:
        return f"{self.name}-{node}"

    def sh(
        self, node: str, script: str, *, check: bool = True, timeout: int = 120
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            ["podman", "exec", self.container(node), "bash", "-c", script],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check:
            assert proc.returncode == 0, f"{node}: {script}\n{proc.stdout}\n{proc.stderr}"
        return proc

    def out(self, node: str, script: str, timeout: int = 120) -> str:
        return self.sh(node, script, timeout=timeout).stdout

    def management_ip(self, node: str) -> str:
        """The node's address on the lab network, as this machine reaches it."""
        out = subprocess.run(
            ["podman", "inspect", "--format", "json", self.container(node)],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
        return str(json.loads(out)[0]["NetworkSettings"]["Networks"][self.name]["IPAddress"])

    def cli(self, *args: str) -> str:
        """``llmfleet lab ARGS --name <this lab>``."""
        return llmfleet("lab", *args, "--name", self.name)

    def env(self) -> dict[str, str]:
        """Environment that points inventory/lab at this lab."""
        return {"LLMFLEET_LAB": self.name}

    def run(
        self, *cmd: str, env: dict[str, str] | None = None, timeout: int = 900
    ) -> subprocess.CompletedProcess[str]:
        """A controller command (ansible, llmfleet up...) in the checkout, aimed at this lab."""
        return subprocess.run(
            list(cmd),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**os.environ, **self.env(), **(env or {})},
        )


# What a run may change on a node: files under /etc that roles write, units, links,
# addresses, containers. Two equal snapshots mean the node was left as it was. Not swap:
# /proc/swaps is the kernel's, shared by every lab on this machine, so another lab's test (the
# doctor's swap case) shows in it; preflight's swap task is covered by its molecule scenario.
SNAPSHOT = r"""
sha256sum /etc/fstab /etc/netplan/* 2>/dev/null | sort
find /etc/llmfleet /etc/sysctl.d /etc/default /etc/systemd/system /usr/local/sbin -xdev \
    -type f -exec sha256sum {} + 2>/dev/null | sort
systemctl list-unit-files --no-legend 'llmfleet*' | sort
systemctl list-units --all --plain --no-legend 'llmfleet*' | awk '{print $1, $3}' | sort
ip -o link show | awk '{print $2, $4, $5}'
ip -o addr show | awk '{print $2, $3, $4}'
(docker ps -a --format '{{.Names}} {{.ID}}' 2>/dev/null
 podman ps -a --format '{{.Names}} {{.ID}}') | sort
"""


def snapshot(lab: Lab, nodes: tuple[str, ...] = ("spark-1", "spark-2")) -> dict[str, str]:
    """Each node's state as far as our roles could change it (see SNAPSHOT)."""
    return {node: lab.out(node, SNAPSHOT) for node in nodes}


def changed_counts(output: str) -> dict[str, int]:
    """changed= per lab host (nodes, and this machine as the Claude Code client) from a
    play recap."""
    return {
        m[0]: int(m[1])
        for m in re.findall(r"^(spark-\d+|localhost)\s+: ok=\d+\s+changed=(\d+)", output, re.M)
    }


def session_lab(name: str, path: str) -> Iterator[Lab]:
    """A lab up for its fixture's scope (the package of its tests: tests/lab, or the bare
    lab's), down at its end, serving on ``path`` (`llmfleet lab up --path`)."""
    # What an interrupted earlier session left (a half-removed lab) must not decide this one.
    llmfleet("lab", "down", "--name", name)
    llmfleet("lab", "up", "--name", name, "--path", path)
    yield Lab(name)
    llmfleet("lab", "down", "--name", name)


@pytest.fixture(scope="package")
def lab() -> Iterator[Lab]:
    # The test lab serves natively with the mp executor (the GH200 box's path, which stays
    # tested here); the Spark sample's path, the lab's default, is test_lab_ray_path.py's.
    # Removed as soon as the last of its tests has run (package scope): a served lab keeps
    # a third of a core busy (vLLM's and Ray's idle loops), which the tests that follow in
    # the same worker and the other worker's labs need.
    yield from session_lab(TEST_LAB, "native")


def run_up(lab: Lab, *args: str) -> subprocess.CompletedProcess[str]:
    """`llmfleet up` (site.yml) on the lab."""
    return lab.run("llmfleet", "up", "-i", "inventory/lab", "--plain", *args, timeout=1800)


def vllm_started(lab: Lab, node: str) -> str:
    """When the node's vLLM unit last started (monotonic): a restart changes it."""
    return lab.out(node, "systemctl show -p ExecMainStartTimestampMonotonic --value llmfleet-vllm")


@pytest.fixture(scope="package")
def site_artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the first `llmfleet up` keeps ansible-runner's record of the run."""
    return tmp_path_factory.mktemp("site") / "artifacts"


@pytest.fixture(scope="package")
def site(lab: Lab, site_artifacts: Path) -> subprocess.CompletedProcess[str]:
    """The lab after one `llmfleet up`: fabric, Ray, vLLM, claude-code-router, Claude Code.
    Run with -vvv and its artifacts kept, so that the secrets test can search all of it."""
    return run_up(lab, "-vvv", "--artifacts", str(site_artifacts))


FABRIC_TEST_ADDRESSES = {
    "spark-1": {"enp1s0f1np1": "192.168.250.1/24", "enP2p1s0f1np1": "192.168.251.1/24"},
    "spark-2": {"enp1s0f1np1": "192.168.250.2/24", "enP2p1s0f1np1": "192.168.251.2/24"},
}


@pytest.fixture
def fabric_addresses(lab: Lab) -> Iterator[dict[str, dict[str, str]]]:
    """Temporary addresses on both halves (the fabric role does this for real later)."""
    for node, links in FABRIC_TEST_ADDRESSES.items():
        for ifname, address in links.items():
            lab.sh(node, f"ip addr replace {address} dev {ifname}")
    yield FABRIC_TEST_ADDRESSES
    for node, links in FABRIC_TEST_ADDRESSES.items():
        for ifname, address in links.items():
            lab.sh(node, f"ip addr del {address} dev {ifname}", check=False)
