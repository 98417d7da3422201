"""Ray and vLLM start through the wrapper that reads the RoCE v2 GID index at every start
(role nccl_env's llmfleet-nccl-gid-env): the units' command lines and the containers' entry
points and mounts, rendered from the roles, and the unit's environment file with its
ExecStart run against a GID table that moves between two starts."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.plugins.conftest import (
    LL_P1S0F1,
    V1,
    V2,
    V4_100_10,
    build_spark,
)
from tests.unit.roles.localhost_play import play_on_localhost
from tests.unit.roles.test_nccl_gid_env import write_table

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
WRAPPER = "/usr/local/libexec/llmfleet/nccl-gid-env"
LAB_SYSFS = "/run/llmfleet-lab/sysfs"


def container_args(role: str) -> dict[str, str]:
    """The entry point and command the role's tasks/main.yml gives gpu_container (ray_node
    includes it twice, heads then workers, with the same settings)."""
    tasks = yaml.safe_load((ROOT / "roles" / role / "tasks" / "main.yml").read_text())
    include, *_ = [
        task
        for task in tasks
        if task.get("ansible.builtin.include_role", {}).get("name")
        == "llmfleet.cluster.gpu_container"
    ]
    return {
        "entrypoint": include["vars"]["gpu_container_entrypoint"],
        "command": include["vars"]["gpu_container_command"],
    }


def render(out: Path, deployment: str, executor: str, **settings: Any) -> dict[str, Any]:
    ray, vllm = container_args("ray_node"), container_args("vllm_server")
    extra = {
        "out_dir": str(out),
        "ray_entrypoint": ray["entrypoint"],
        "ray_command": ray["command"],
        "vllm_entrypoint": vllm["entrypoint"],
        "vllm_command": vllm["command"],
        "nccl_env_mode": "ib",
        "nccl_env_interface": "lo",
        "nccl_env_file": str(out / "nccl.env"),
        "ray_node_interface": "lo",
        "ray_node_nodes": ["localhost"],
        "ray_node_deployment": deployment,
        "vllm_server_deployment": deployment,
        "vllm_server_topology": "multi_node",
        "vllm_server_nodes": ["localhost", "spark-2"],
        "vllm_server_executor": executor,
        "__vllm_server_profile": {"model": "org/model"},
        "__vllm_server_launch": {"master_addr": "127.0.0.1"},
        **settings,
    }
    proc = play_on_localhost(HERE / "render_nccl_launch.yml", extra)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    launch: dict[str, Any] = json.loads((out / "launch.json").read_text(encoding="utf-8"))
    return launch


def exec_start(unit: Path) -> list[str]:
    (line,) = [line for line in unit.read_text().splitlines() if line.startswith("ExecStart=")]
    return shlex.split(line.removeprefix("ExecStart="))


@pytest.fixture(scope="module")
def native(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("native")
    render(out, "native", "mp", nccl_env_sysfs_root=LAB_SYSFS)
    return out


@pytest.fixture(scope="module")
def containers(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("containers")
    return out, render(out, "container", "ray", nccl_env_sysfs_root=LAB_SYSFS)


def test_native_units_start_ray_and_vllm_through_the_wrapper(native: Path) -> None:
    assert exec_start(native / "llmfleet-ray.service")[:3] == [
        WRAPPER,
        "/opt/vllm/bin/ray",
        "start",
    ]
    assert exec_start(native / "llmfleet-vllm.service")[:3] == [
        WRAPPER,
        "/opt/vllm/bin/vllm",
        "serve",
    ]


def test_the_environment_file_carries_no_index_only_where_to_read_it(native: Path) -> None:
    env = dict(
        line.split("=", 1)
        for line in (native / "nccl.env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert "NCCL_IB_GID_INDEX" not in env
    assert env["NCCL_IB_HCA"] == "=rocep1s0f1:1"
    assert env["LLMFLEET_SYSFS_ROOT"] == LAB_SYSFS


def test_containers_start_through_the_wrapper_mounted_read_only(
    containers: tuple[Path, dict[str, Any]],
) -> None:
    out, launch = containers
    assert launch["nccl_env_launcher"] == {
        "command": WRAPPER,
        "volumes": [
            f"{Path(WRAPPER).parent}:{Path(WRAPPER).parent}:ro",
            f"{LAB_SYSFS}:{LAB_SYSFS}:ro",
        ],
    }
    assert launch["ray"]["entrypoint"] == WRAPPER
    assert launch["ray"]["command"][:2] == ["ray", "start"]
    assert launch["vllm"]["entrypoint"] == WRAPPER
    assert launch["vllm"]["command"][:2] == ["vllm", "serve"]
    for name in ("ray", "vllm"):
        assert set(launch["nccl_env_launcher"]["volumes"]) <= set(launch[name]["volumes"]), name
    assert "NCCL_IB_GID_INDEX" not in launch["nccl_env_vars"]
    # The Ray executor in containers: vllm serve runs in the Ray head's container, through
    # the wrapper that container has mounted.
    command = exec_start(out / "llmfleet-vllm.service")
    assert command[command.index("llmfleet-ray") + 1 :][:3] == [WRAPPER, "vllm", "serve"]


def test_a_pinned_index_stays_in_the_environment_and_on_real_sysfs_nothing_more_is_mounted(
    tmp_path: Path,
) -> None:
    launch = render(tmp_path, "container", "mp", nccl_env_gid_index="4")
    assert launch["nccl_env_vars"]["NCCL_IB_GID_INDEX"] == "4"
    assert "LLMFLEET_SYSFS_ROOT" not in launch["nccl_env_vars"]
    assert launch["nccl_env_launcher"]["volumes"] == [
        f"{Path(WRAPPER).parent}:{Path(WRAPPER).parent}:ro"
    ]


def test_the_units_environment_follows_the_gid_table_from_one_boot_to_the_next(
    native: Path, tmp_path: Path
) -> None:
    """The unit's EnvironmentFile and ExecStart (the wrapper replaced by the repository's and
    the program by a probe of its environment), against a table that moves between starts."""
    spark = build_spark(tmp_path / "sys")
    env = {"PATH": os.environ["PATH"], "LLMFLEET_NCCL_GID_WAIT": "0"}
    for line in (native / "nccl.env").read_text().splitlines():
        if line and not line.startswith("#"):
            key, value = line.split("=", 1)
            env[key] = value
    env["LLMFLEET_SYSFS_ROOT"] = str(spark.root)
    command = exec_start(native / "llmfleet-ray.service")
    assert command[0] == WRAPPER
    script = ROOT / "roles/nccl_env/files/llmfleet-nccl-gid-env"
    probe = ["sh", "-c", 'echo "$NCCL_IB_GID_INDEX"']

    def start() -> str:
        proc = subprocess.run(
            [shutil.which("sh") or "/bin/sh", str(script), *probe],
            env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    assert start() == "3"
    table = {
        0: (LL_P1S0F1, V1, "enp1s0f1np1"),
        1: (LL_P1S0F1, V2, "enp1s0f1np1"),
        6: (V4_100_10, V1, "enp1s0f1np1"),
        7: (V4_100_10, V2, "enp1s0f1np1"),
    }
    write_table(spark, "rocep1s0f1", table)
    assert start() == "7"


def test_the_wrapper_is_published_whatever_the_tags() -> None:
    # A run limited to `--tags preflight,vllm_server` rendered vLLM's unit without the wrapper
    # (nccl_env's tasks skipped), and the next full run changed it back (full make test).
    # The facts live in tasks/publish.yml, which configure.yml imports and the upgrade runs.
    configure = yaml.safe_load((ROOT / "roles/nccl_env/tasks/configure.yml").read_text())
    assert {"ansible.builtin.import_tasks": "publish.yml"}.items() <= configure[0].items()
    tasks = yaml.safe_load((ROOT / "roles/nccl_env/tasks/publish.yml").read_text())
    [publish] = [
        task for task in tasks if "nccl_env_launcher" in task.get("ansible.builtin.set_fact", {})
    ]
    assert "always" in publish["tags"], publish
