"""The fabric roles install the tools they run (fabric_verify: ethtool, ping; rdma_verify:
perftest, rdma-core, iproute2) with apt, only where dpkg does not show them installed, and
refuse a host of another OS family before any change unless they are told to install
nothing."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.roles.localhost_play import play_on_localhost

ROLES = ("fabric_verify", "rdma_verify")
FEDORA = {"ansible_facts": {"os_family": "RedHat", "distribution": "Fedora"}}


def run_tasks(
    tmp_path: Path, role: str, tasks_from: str, extra: dict[str, Any], *options: str
) -> subprocess.CompletedProcess[str]:
    playbook = tmp_path / f"{role}_{tasks_from}.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "name": f"{role}'s {tasks_from} tasks alone",
                    "hosts": "localhost",
                    "connection": "local",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "name": f"Run {role}'s {tasks_from} tasks",
                            "ansible.builtin.import_role": {
                                "name": f"llmfleet.cluster.{role}",
                                "tasks_from": tasks_from,
                            },
                        }
                    ],
                }
            ]
        )
    )
    return play_on_localhost(playbook, extra, *options)


@pytest.mark.parametrize("role", ROLES)
def test_a_host_of_another_os_family_is_refused(tmp_path: Path, role: str) -> None:
    proc = run_tasks(tmp_path, role, "validate", FEDORA)
    output = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == 2, output[-3000:]
    assert f"localhost: {role} installs" in output
    assert "with apt (Debian, Ubuntu, DGX OS), but this host runs Fedora (RedHat family)" in output
    assert f"set {role}_packages: []" in output


@pytest.mark.parametrize("role", ROLES)
def test_installing_nothing_passes_on_any_os(tmp_path: Path, role: str) -> None:
    proc = run_tasks(tmp_path, role, "validate", {**FEDORA, f"{role}_packages": []})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="needs a Debian-family machine")
@pytest.mark.parametrize("role", ROLES)
def test_installed_packages_are_not_asked_of_apt(tmp_path: Path, role: str) -> None:
    # dpkg and coreutils are on every Debian-family host: apt is not called, nothing changes
    proc = run_tasks(
        tmp_path, role, "install", {f"{role}_packages": ["dpkg", "coreutils"]}, "--check", "-v"
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    assert re.search(
        r"localhost\s+: ok=1\s+changed=0\s+unreachable=0\s+failed=0\s+skipped=1", output
    )


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="needs a Debian-family machine")
@pytest.mark.parametrize("role", ROLES)
def test_only_the_missing_package_is_asked_of_apt(tmp_path: Path, role: str) -> None:
    missing = "llmfleet-no-such-package"
    proc = run_tasks(
        tmp_path, role, "install", {f"{role}_packages": ["dpkg", missing]}, "--check", "-v"
    )
    output = proc.stdout + proc.stderr
    # apt was asked for that one alone, and knows no such package
    assert proc.returncode == 2, output[-3000:]
    assert f"No package matching '{missing}' is available" in output
