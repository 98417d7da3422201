"""The serve plays of spark_cluster.yml and single_node.yml pull first, on each host, the
images it will run: the serve play itself is run with its roles switched off and its pull
task replaced by one that writes what it would pull (the sample inventories, connected
locally)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
PINNED = f"vllm/vllm-openai:v0.11.0@sha256:{'0123456789abcdef' * 4}"
SPARK_SAMPLE = "nvcr.io/nvidia/vllm:26.05-py3@sha256:<fill-in-the-digest>"
RAY_IMAGE = f"rayproject/ray:2.52.0@sha256:{'fedcba9876543210' * 4}"


def serve_play(playbook: str) -> dict[str, Any]:
    plays = yaml.safe_load((ROOT / "playbooks" / playbook).read_text())
    [play] = [p for p in plays if "pre_tasks" in p]
    return dict(play)


def test_the_pull_is_the_first_thing_of_each_serve_play() -> None:
    for playbook in ("spark_cluster.yml", "single_node.yml"):
        play = serve_play(playbook)
        first = play["pre_tasks"][0]
        assert first["ansible.builtin.include_role"]["name"] == "llmfleet.cluster.gpu_container"
        assert first["ansible.builtin.include_role"]["tasks_from"] == "pull"
        assert play["roles"][0]["role"] == "llmfleet.cluster.model_weights"


def CHECKS_OF(expression: str) -> str:
    """The play's check list, to write: the same expression over the loop's item."""
    inner = expression.strip().removeprefix("{{").removesuffix("}}")
    return "{{ " + inner.replace("__llmfleet_pull.key", "item.key") + " | to_json }}"


def run_serve_play(
    tmp_path: Path, playbook: str, inventory: str, pre_tasks: list[Any], **extra: Any
) -> None:
    """Run the serve play of ``playbook`` on ``inventory``, connected locally: its vars and
    roles (their defaults and variables are read, none of their tasks run), no post-tasks
    (the history of what serves, written on the node), ``pre_tasks`` instead of its own."""
    play = serve_play(playbook)
    play["vars_files"] = [str(ROOT / "playbooks" / name) for name in play.get("vars_files", [])]
    play["roles"] = [{**role, "when": False} for role in play["roles"]]
    play.pop("post_tasks", None)
    play["pre_tasks"] = pre_tasks
    probe = tmp_path / "probe.yml"
    probe.write_text(yaml.safe_dump([play], sort_keys=False))
    proc = subprocess.run(
        [
            "ansible-playbook",
            str(probe),
            "-i",
            inventory,
            "-e",
            json.dumps(
                {
                    "ansible_connection": "local",
                    "ansible_python_interpreter": sys.executable,
                    "vault_llmfleet_api_key": "unit-test-key-0123456789abcdef",
                    **extra,
                }
            ),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]


def pulls(tmp_path: Path, playbook: str, inventory: str, **extra: Any) -> dict[str, Any]:
    # The pull is the first pre-task; what follows it (the profile's Python) is not probed here.
    pull = serve_play(playbook)["pre_tasks"][0]
    out = tmp_path / "pulls"
    out.mkdir(exist_ok=True)
    # The same loop, vars and roles, nothing run.
    pre_tasks = [
        {
            "name": "Write what would be pulled",
            "ansible.builtin.copy": {
                "content": "{{ {'engine': item.key, 'images': item.value} | to_json }}",
                "dest": f"{out}/{{{{ inventory_hostname }}}}-{{{{ item.key }}}}.json",
                "mode": "0600",
            },
            "delegate_to": "localhost",
            "loop": pull["loop"],
        },
        {
            "name": "Write what would be checked in the images",
            "ansible.builtin.copy": {
                "content": CHECKS_OF(pull["vars"]["gpu_container_check_images"]),
                "dest": f"{out}/{{{{ inventory_hostname }}}}-{{{{ item.key }}}}.checks",
                "mode": "0600",
            },
            "delegate_to": "localhost",
            "loop": pull["loop"],
        },
    ]
    run_serve_play(tmp_path, playbook, inventory, pre_tasks, **extra)
    found: dict[str, Any] = {}
    for path in sorted(out.glob("*.json")):
        host, engine = path.stem.rsplit("-", 1)
        found.setdefault(host, {})[engine] = json.loads(path.read_text())["images"]
    CHECKS.clear()
    for path in sorted(out.glob("*.checks")):
        host, engine = path.stem.rsplit("-", 1)
        CHECKS.setdefault(host, {})[engine] = json.loads(path.read_text())
    return found


# What the last call of pulls() would check in each image: host -> engine -> [{image, needs}].
CHECKS: dict[str, Any] = {}


def test_sparks_with_ray_in_containers_pull_the_ray_image_on_every_spark(tmp_path: Path) -> None:
    assert pulls(tmp_path, "spark_cluster.yml", "inventory/sparks") == {
        "spark-1": {"docker": [SPARK_SAMPLE]},
        "spark-2": {"docker": [SPARK_SAMPLE]},
    }


def test_sparks_with_the_mp_executor_pull_vllms_image_on_the_vllm_hosts(tmp_path: Path) -> None:
    found = pulls(
        tmp_path,
        "spark_cluster.yml",
        "inventory/sparks",
        llmfleet_vllm_image=PINNED,
        llmfleet_vllm_executor="mp",
        llmfleet_ray_cluster=True,
        ray_node_image=RAY_IMAGE,
        ray_node_container_engine="podman",
    )
    assert found == {
        "spark-1": {"docker": [PINNED], "podman": [RAY_IMAGE]},
        "spark-2": {"docker": [PINNED], "podman": [RAY_IMAGE]},
    }


@pytest.mark.parametrize("playbook", ["spark_cluster.yml", "single_node.yml"])
def test_a_native_deployment_pulls_nothing(tmp_path: Path, playbook: str) -> None:
    inventory = "inventory/sparks" if playbook == "spark_cluster.yml" else "inventory/gh200"
    assert pulls(tmp_path, playbook, inventory, llmfleet_deployment="native") == {}


def test_the_gh200_host_pulls_vllms_image(tmp_path: Path) -> None:
    assert pulls(tmp_path, "single_node.yml", "inventory/gh200", llmfleet_vllm_image=PINNED) == {
        "gh200-1": {"docker": [PINNED]}
    }


MINIMAX_OPTIONS = {
    "tool-call-parser": "minimax_m2",
    "reasoning-parser": "minimax_m2_append_think",
    "load-format": "fastsafetensors",
}


def test_the_ray_image_is_checked_for_ray_and_for_the_vllm_that_runs_in_it(tmp_path: Path) -> None:
    pulls(tmp_path, "spark_cluster.yml", "inventory/sparks", llmfleet_vllm_image=PINNED)
    for host in ("spark-1", "spark-2"):
        [check] = CHECKS[host]["docker"]
        assert check["image"] == PINNED
        needs = check["needs"]
        assert (needs["ray"], needs["commands"]) == (True, ["ray", "vllm", "pkill"])
        assert needs["vllm_options"].items() >= MINIMAX_OPTIONS.items()
        hub = "/root/.cache/huggingface"
        assert needs["mounts"] == ["/models", f"{hub}:{hub}:rw"]


def test_with_the_mp_executor_the_ray_image_is_checked_for_ray_alone(tmp_path: Path) -> None:
    pulls(
        tmp_path,
        "spark_cluster.yml",
        "inventory/sparks",
        llmfleet_vllm_image=PINNED,
        llmfleet_vllm_executor="mp",
        llmfleet_ray_cluster=True,
        ray_node_image=RAY_IMAGE,
        ray_node_container_engine="podman",
    )
    [ray] = CHECKS["spark-1"]["podman"]
    assert ray["image"] == RAY_IMAGE
    assert (ray["needs"]["commands"], ray["needs"]["vllm_options"]) == (["ray"], None)
    [vllm] = CHECKS["spark-1"]["docker"]
    assert vllm["image"] == PINNED
    assert ("ray" not in vllm["needs"], vllm["needs"]["commands"]) == (True, ["vllm"])
    assert vllm["needs"]["vllm_options"].items() >= MINIMAX_OPTIONS.items()


def test_the_gh200_image_is_checked_for_vllm_and_its_options(tmp_path: Path) -> None:
    pulls(tmp_path, "single_node.yml", "inventory/gh200", llmfleet_vllm_image=PINNED)
    [check] = CHECKS["gh200-1"]["docker"]
    assert check["needs"]["commands"] == ["vllm"]
    assert check["needs"]["vllm_options"]["tool-call-parser"] == "minimax_m2"
