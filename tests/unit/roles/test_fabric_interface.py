"""One setting for the fabric interface: llmfleet_fabric_interface is what nccl_env,
ray_node, vllm_server and model_weights' copy bind to; unset, all four take the first half
of the first fabric port (filter cx7_fabric_interface); a role's own variable still wins for
that role alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.unit.roles.localhost_play import play_on_localhost

HERE = Path(__file__).parent
ROLES = ("nccl_env", "ray_node", "vllm_server", "model_weights")


def resolve(tmp_path: Path, **inventory: Any) -> dict[str, str]:
    out = tmp_path / "resolved.json"
    proc = play_on_localhost(
        HERE / "resolve_fabric_interface.yml", {**inventory, "out_file": str(out)}
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    resolved: dict[str, str] = json.loads(out.read_text(encoding="utf-8"))
    return resolved


def test_unset_every_role_takes_the_first_half_of_the_first_port(tmp_path: Path) -> None:
    assert resolve(tmp_path, llmfleet_fabric_ports=[1]) == dict.fromkeys(ROLES, "enp1s0f1np1")


def test_one_setting_moves_all_four(tmp_path: Path) -> None:
    resolved = resolve(
        tmp_path, llmfleet_fabric_ports=[1], llmfleet_fabric_interface="enP2p1s0f1np1"
    )
    assert resolved == dict.fromkeys(ROLES, "enP2p1s0f1np1")


@pytest.mark.parametrize(
    ("role", "variable"),
    [
        ("nccl_env", "nccl_env_interface"),
        ("ray_node", "ray_node_interface"),
        ("vllm_server", "vllm_server_fabric_interface"),
        ("model_weights", "model_weights_copy_interface"),
    ],
)
def test_a_role_variable_still_wins_for_its_role(tmp_path: Path, role: str, variable: str) -> None:
    resolved = resolve(
        tmp_path,
        llmfleet_fabric_ports=[1],
        llmfleet_fabric_interface="enP2p1s0f1np1",
        **{variable: "enp1s0f0np0"},
    )
    assert resolved.pop(role) == "enp1s0f0np0"
    assert set(resolved.values()) == {"enP2p1s0f1np1"}
