"""modules/container_gpu_support through `ansible`: a fake `docker` on the PATH answers
`docker info`, the CDI specs lie in a test folder; the answer, never a change, never a
failure."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.unit.plugins.conftest import ansible_adhoc

# `docker info --format '{{json .}}'` answers FAKE_DOCKER_INFO, or fails when it is unset.
FAKE_DOCKER = f"""#!{sys.executable}
import os, sys
if sys.argv[1:2] != ["info"] or "FAKE_DOCKER_INFO" not in os.environ:
    sys.stderr.write("Cannot connect to the Docker daemon. Is the docker daemon running?\\n")
    sys.exit(1)
sys.stdout.write(os.environ["FAKE_DOCKER_INFO"] + "\\n")
"""


def executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    executable(folder / "docker", FAKE_DOCKER)
    return folder


def ask(bin_dir: Path, cdi: Path, info: dict[str, Any] | None, engine: str = "docker") -> dict:
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    if info is not None:
        env["FAKE_DOCKER_INFO"] = json.dumps(info)
    status, result = ansible_adhoc(
        "llmfleet.cluster.container_gpu_support", f"engine={engine} cdi_spec_dirs={cdi}", env=env
    )
    assert status == "SUCCESS", result
    assert result["changed"] is False
    return result


def test_docker_without_the_toolkit(bin_dir: Path, tmp_path: Path) -> None:
    result = ask(bin_dir, tmp_path / "cdi", {"Runtimes": {"runc": {"path": "runc"}}})
    if result["nvidia_hook"]:
        pytest.skip("this machine has the NVIDIA Container Toolkit's hook")
    assert result["supported"] is False
    assert result["runtimes"] == ["runc"]
    assert "Docker's runtimes (runc) lack nvidia" in result["reason"]


def test_docker_with_the_nvidia_runtime(bin_dir: Path, tmp_path: Path) -> None:
    info = {"Runtimes": {"runc": {}, "nvidia": {"path": "nvidia-container-runtime"}}}
    result = ask(bin_dir, tmp_path / "cdi", info)
    assert result["supported"] is True
    assert result["reason"].startswith("the nvidia runtime")


def test_a_docker_daemon_that_does_not_answer(bin_dir: Path, tmp_path: Path) -> None:
    result = ask(bin_dir, tmp_path / "cdi", None)
    assert result["supported"] is False
    assert result["reason"].startswith("`docker info` failed: Cannot connect to the Docker daemon")


def test_podman_with_and_without_a_cdi_spec(bin_dir: Path, tmp_path: Path) -> None:
    executable(bin_dir / "podman", "#!/bin/sh\nexit 0\n")
    cdi = tmp_path / "cdi"
    cdi.mkdir()
    assert ask(bin_dir, cdi, None, "podman")["supported"] is False
    (cdi / "nvidia.yaml").write_text("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n")
    result = ask(bin_dir, cdi, None, "podman")
    assert result["supported"] is True
    assert result["cdi_specs"] == [str(cdi / "nvidia.yaml")]
