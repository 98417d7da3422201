"""Role vllm_server's entry point python (playbooks/spark_cluster.yml runs it before Ray) on
this machine: a container deployment writes the profile's files under their digest and
publishes their read-only mounts and the profile's Ray variables for role ray_node; an image
without the profile's packages stops the run with what is missing and how to get it. The
container engine is a stand-in that answers the package question as an image would."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.unit.roles.localhost_play import play_on_localhost

HERE = Path(__file__).parent
IMAGE = "registry.invalid/vllm:1"
HOOK = HERE.parents[2] / "roles" / "vllm_server" / "files" / "python" / "gb10_cudnn_conv3d.py"


def engine(folder: Path, report: str) -> dict[str, str]:
    """A `docker` on PATH that records its arguments and prints ``report``."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    script = bin_dir / "docker"
    script.write_text(f"#!/bin/sh\necho \"$@\" > {folder / 'args'}\necho '{report}'\n")
    script.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def run(folder: Path, report: str, **extra: object):
    variables = {
        "vllm_server_profile": "qwen3_vl_two_sparks",
        "vllm_server_config_dir": str(folder / "cfg"),
        "vllm_server_topology": "multi_node",
        "vllm_server_executor": "ray",
        "vllm_server_image": IMAGE,
        "out_file": str(folder / "needs.json"),
        **extra,
    }
    return play_on_localhost(HERE / "vllm_python.yml", variables, env=engine(folder, report))


def test_the_files_are_written_and_their_mounts_published(tmp_path: Path) -> None:
    proc = run(tmp_path, '{"qwen-vl-utils": "0.0.14"}')
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    needs = json.loads((tmp_path / "needs.json").read_text())
    assert needs["env"] == {"RAY_memory_monitor_refresh_ms": "0"}
    [mount] = needs["mounts"]
    host, target, mode = mount.split(":")
    assert (target, mode) == ("/usr/lib/python3.12/sitecustomize.py", "ro")
    assert Path(host).parent == tmp_path / "cfg" / "python"
    assert Path(host).read_text() == HOOK.read_text()
    args = (tmp_path / "args").read_text()
    assert args.startswith(
        "run --rm --network none --entrypoint python3 registry.invalid/vllm:1 -c"
    )
    assert args.rstrip().endswith(" qwen-vl-utils")


@pytest.mark.parametrize(
    ("report", "said"),
    [
        ('{"qwen-vl-utils": null}', "lacks qwen-vl-utils"),
        ('{"qwen-vl-utils": "0.0.11"}', "has qwen-vl-utils 0.0.11"),
    ],
)
def test_an_image_without_the_packages_is_refused(tmp_path: Path, report: str, said: str) -> None:
    proc = run(tmp_path, report)
    assert proc.returncode != 0
    assert said in proc.stdout, proc.stdout[-3000:]
    assert "RUN pip install qwen-vl-utils==0.0.14" in proc.stdout
    assert not (tmp_path / "needs.json").exists()


def test_a_profile_without_python_needs_writes_and_asks_nothing(tmp_path: Path) -> None:
    proc = run(tmp_path, "{}", vllm_server_profile="minimax_m21_gh200")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert json.loads((tmp_path / "needs.json").read_text()) == {"mounts": [], "env": {}}
    assert not (tmp_path / "args").exists() and not (tmp_path / "cfg").exists()
