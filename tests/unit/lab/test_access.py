"""The lab's SSH material and how the lab inventory connects with it."""

from __future__ import annotations

import stat
from pathlib import Path
from types import ModuleType

import pytest
from llmfleet_lab import access
from llmfleet_lab import nodes as lab_nodes

from .file_modules import load_file

ROOT = Path(__file__).resolve().parents[3]


def lab_inventory() -> ModuleType:
    return load_file("lab_nodes", ROOT / "inventory/lab/nodes.py")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_key_pair_is_made_once_private_and_outside_the_checkout(cache: Path) -> None:
    first = access.ensure_key("lab-a")
    assert first.folder == cache / "llmfleet" / "labs" / "lab-a" / "ssh"
    assert mode(first.folder) == 0o700 and mode(first.private_key) == 0o600
    assert first.public_key.read_text().startswith("ssh-ed25519 ")
    assert "llmfleet lab lab-a" in first.public_key.read_text()
    key = first.private_key.read_bytes()
    assert access.ensure_key("lab-a").private_key.read_bytes() == key  # kept, not remade
    assert access.ensure_key("lab-b").private_key.read_bytes() != key  # one pair per lab


def test_a_half_written_pair_is_made_again(cache: Path) -> None:
    made = access.ensure_key("lab-a")
    made.public_key.unlink()
    again = access.ensure_key("lab-a")
    assert again.public_key.is_file() and mode(again.private_key) == 0o600


def test_forget_removes_the_lab_folder_only(cache: Path) -> None:
    access.ensure_key("lab-a")
    kept = access.ensure_key("lab-b")
    assert access.forget("lab-a") is True
    assert not (cache / "llmfleet" / "labs" / "lab-a").exists()
    assert kept.private_key.is_file()
    assert access.forget("lab-a") is False


def test_the_proxy_reaches_ssh_sessions() -> None:
    environ = {"https_proxy": "http://proxy:3128", "NO_PROXY": "localhost", "HOME": "/root"}
    assert access.session_environment(environ) == [
        "HTTPS_PROXY=http://proxy:3128",
        "NO_PROXY=localhost",
    ]
    assert access.session_environment({}) == []


def test_a_node_with_ssh_material_is_reached_over_ssh() -> None:
    conn = lab_inventory().connection("lab-spark-1", "10.89.0.5", "/cache/labs/lab/ssh")
    assert conn["ansible_connection"] == "ssh"
    assert conn["ansible_host"] == "10.89.0.5"
    assert conn["ansible_user"] == "root"
    assert conn["ansible_ssh_private_key_file"] == "/cache/labs/lab/ssh/id_ed25519"
    assert "UserKnownHostsFile=/cache/labs/lab/ssh/known_hosts" in conn["ansible_ssh_common_args"]
    assert "StrictHostKeyChecking=yes" in conn["ansible_ssh_common_args"]
    assert conn["ansible_control_path_dir"] == "/cache/labs/lab/ssh/cp"


def test_a_stopped_node_is_named_and_an_old_node_is_reached_through_podman() -> None:
    nodes = lab_inventory()
    assert nodes.connection("lab-spark-2", "", "/cache/ssh")["ansible_host"] == "lab-spark-2"
    assert nodes.connection("lab-spark-2", "10.89.0.6", "") == {
        "ansible_connection": "containers.podman.podman",
        "ansible_host": "lab-spark-2",
    }


def inventory_of(
    count: int, monkeypatch: pytest.MonkeyPatch, path_labels: dict[str, str] | None = None
) -> dict:
    nodes = lab_inventory()
    containers = [
        {
            "Names": [f"lab-spark-{index}"],
            "Labels": {
                "llmfleet.lab.node": f"spark-{index}",
                "llmfleet.lab.index": str(index),
                "llmfleet.lab.ssh": "/cache/ssh",
                **(path_labels or {}),
            },
        }
        for index in range(1, count + 1)
    ]
    monkeypatch.setattr(nodes, "lab_containers", lambda: containers)
    monkeypatch.setattr(
        nodes, "management_ips", lambda names: {n: f"10.89.0.{i}" for i, n in enumerate(names)}
    )
    monkeypatch.setattr(nodes, "hub_endpoint", lambda: "")
    return nodes.inventory()


@pytest.mark.parametrize("count", [2, 3])
def test_two_or_three_nodes_serve_as_one_group_without_a_gateway(
    count: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    inventory = inventory_of(count, monkeypatch)
    assert inventory["sparks"]["vars"] == {}
    assert inventory["gateways"]["hosts"] == []


@pytest.mark.parametrize("count", [2, 3])
def test_a_small_lab_made_with_a_gateway_runs_it_on_its_first_node(
    count: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`llmfleet lab up --gateway`: one group (unless llmfleet_group_size cuts more) behind the
    gateway on spark-1, so that tune measures every layout through the same endpoint."""
    inventory = inventory_of(count, monkeypatch, {"llmfleet.lab.gateway": "yes"})
    assert inventory["sparks"]["vars"] == {}
    assert inventory["gateways"]["hosts"] == ["spark-1"]
    assert inventory_of(count, monkeypatch, {"llmfleet.lab.gateway": "no"})["gateways"] == {
        "hosts": []
    }


@pytest.mark.parametrize("count", [4, 6])
def test_an_even_lab_of_four_or_more_serves_in_pairs_behind_the_first_node(
    count: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    inventory = inventory_of(count, monkeypatch)
    assert inventory["sparks"]["vars"] == {"llmfleet_group_size": 2}
    assert inventory["gateways"]["hosts"] == ["spark-1"]
    assert "gateways" in inventory["all"]["children"]


@pytest.mark.parametrize(
    ("labels", "path"),
    [
        ({"llmfleet.lab.path": "ray-container"}, "ray-container"),
        ({"llmfleet.lab.path": "native"}, "native"),
        ({}, "native"),  # nodes made before labs had a path
    ],
)
def test_the_inventory_serves_on_the_labs_path(
    labels: dict[str, str], path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    inventory = inventory_of(2, monkeypatch, labels)
    assert inventory["all"]["vars"]["llmfleet_lab_path"] == path
    assert inventory["all"]["vars"]["llmfleet_lab_ray_container"] is (path == "ray-container")


def test_the_inventory_script_and_the_lab_read_the_path_label_alike() -> None:
    # inventory/lab/nodes.py is standard library only (any Python runs it) and repeats the
    # label's name and default: both must stay those of llmfleet_lab.nodes.
    script = (ROOT / "inventory/lab/nodes.py").read_text()
    assert f'"{lab_nodes.PATH_LABEL}", "{lab_nodes.NATIVE_PATH}"' in script
    assert f'get("{lab_nodes.GATEWAY_LABEL}") == "yes"' in script
