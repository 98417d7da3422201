"""gpu_container is internal: a play that lists it alone is refused before any task runs
on the host, with the reason; ray_node and vllm_server include it with their settings."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
import yaml

from tests.unit.roles.localhost_play import play_on_localhost

ROOT = Path(__file__).resolve().parents[3]


def test_a_play_listing_it_alone_is_refused(tmp_path: Path) -> None:
    playbook = tmp_path / "alone.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "The internal role on its own",
                    "hosts": "localhost",
                    "connection": "local",
                    "gather_facts": False,
                    "roles": ["llmfleet.cluster.gpu_container"],
                }
            ]
        )
    )
    proc = play_on_localhost(playbook, {})
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output[-3000:]
    assert "llmfleet.cluster.gpu_container is internal" in output
    # Only the argument spec check ran before the refusal.
    recap = r"localhost\s+: ok=1\s+changed=0\s+unreachable=0\s+failed=1"
    assert re.search(recap, output), output[-3000:]


def test_both_container_roles_include_it_as_themselves() -> None:
    # ray_node: once for the heads, then once for the workers, with the same settings.
    for role, count in (("ray_node", 2), ("vllm_server", 1)):
        tasks = yaml.safe_load((ROOT / "roles" / role / "tasks" / "main.yml").read_text())
        includes = [
            task
            for task in tasks
            if task.get("ansible.builtin.include_role", {}).get("name")
            == "llmfleet.cluster.gpu_container"
        ]
        assert len(includes) == count, role
        assert all(include["vars"] == includes[0]["vars"] for include in includes), role
        assert includes[0]["vars"]["gpu_container_caller"] == role
        assert not list((ROOT / "roles" / role / "tasks").glob("container_*.yml")), role


# `docker info` of a Docker without the NVIDIA Container Toolkit (runc only).
FAKE_DOCKER = """#!/bin/sh
[ "$1" = info ] || exit 1
echo '{"Runtimes": {"runc": {"path": "runc"}}, "DefaultRuntime": "runc"}'
"""


def test_an_engine_without_the_gpus_is_refused_in_the_callers_check(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(FAKE_DOCKER)
    (bin_dir / "docker").chmod(0o755)
    playbook = tmp_path / "check.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "vllm_server's check of its engine",
                    "hosts": "localhost",
                    "connection": "local",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "name": "Check the engine",
                            "ansible.builtin.include_role": {
                                "name": "llmfleet.cluster.gpu_container",
                                "tasks_from": "check",
                            },
                            "vars": {
                                "gpu_container_caller": "vllm_server",
                                "gpu_container_engine": "docker",
                            },
                        }
                    ],
                }
            ]
        )
    )
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    if shutil.which("nvidia-container-runtime-hook", path=env["PATH"]):
        pytest.skip("this machine has the NVIDIA Container Toolkit's hook")
    proc = play_on_localhost(playbook, {}, env=env)
    output = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == 2, output[-3000:]
    assert (
        "localhost: vllm_server runs its container in docker with every GPU "
        "(vllm_server_container_gpus is true), which docker cannot give: "
        "Docker's runtimes (runc) lack nvidia" in output
    ), output[-3000:]
    assert "or set vllm_server_container_gpus: false" in output
