"""plugin_utils/_converged/inputs: the digest of the collection's files (what decides a run: its
roles, playbooks, plugins and metadata, not its tests nor Python's caches), which variables are
inputs, and one digest of a host's inputs that ignores order and sees any value or group that
changed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ansible.release import __version__ as ansible_core_version
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._converged import inputs


@pytest.fixture
def collection(tmp_path: Path) -> Path:
    root = tmp_path / "cluster"
    files = {
        "galaxy.yml": "namespace: llmfleet\nname: cluster\n",
        "ansible.cfg": "[defaults]\n",
        "site.yml": "- import_playbook: playbooks/a.yml\n",
        "meta/runtime.yml": "requires_ansible: '>=2.17'\n",
        "playbooks/a.yml": "- hosts: all\n",
        "roles/vllm_server/tasks/main.yml": "- name: x\n",
        "roles/vllm_server/defaults/main.yml": "vllm_server_port: 8000\n",
        "plugins/modules/m.py": "print(1)\n",
        "plugins/modules/__pycache__/m.cpython-311.pyc": "cache",
        "plugins/modules/stray.pyc": "cache",
        "tests/unit/test_x.py": "def test(): pass\n",
        "docs/operate.md": "# Operate\n",
        "src/llmfleet/cli.py": "print(2)\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize(
    ("name", "counts"),
    [
        ("roles/vllm_server/tasks/main.yml", True),
        ("roles/vllm_server/defaults/main.yml", True),
        ("playbooks/a.yml", True),
        ("plugins/modules/m.py", True),
        ("meta/runtime.yml", True),
        ("site.yml", True),
        ("galaxy.yml", True),
        ("ansible.cfg", True),
        ("tests/unit/test_x.py", False),
        ("docs/operate.md", False),
        ("src/llmfleet/cli.py", False),
        ("plugins/modules/__pycache__/m.cpython-311.pyc", False),
        ("plugins/modules/stray.pyc", False),
    ],
)
def test_files_digest_sees_what_decides_a_run(collection: Path, name: str, counts: bool) -> None:
    before = inputs.files_digest(str(collection))
    assert inputs.files_digest(str(collection)) == before  # stable
    with (collection / name).open("a") as handle:
        handle.write("# edited\n")
    assert (inputs.files_digest(str(collection)) != before) is counts


def test_files_digest_sees_a_file_added_or_renamed(collection: Path) -> None:
    before = inputs.files_digest(str(collection))
    tasks = collection / "roles" / "vllm_server" / "tasks"
    (tasks / "main.yml").rename(tasks / "other.yml")
    renamed = inputs.files_digest(str(collection))
    assert renamed != before
    (collection / "roles" / "vllm_server" / "handlers").mkdir()
    (collection / "roles" / "vllm_server" / "handlers" / "main.yml").write_text("")
    assert inputs.files_digest(str(collection)) != renamed
    # A new cache folder is not (Python writes them as it imports the plugins).
    added = inputs.files_digest(str(collection))
    (collection / "roles" / "__pycache__").mkdir()
    (collection / "roles" / "__pycache__" / "x.pyc").write_text("x")
    assert inputs.files_digest(str(collection)) == added


def test_files_digest_of_a_collection_without_some_parts(tmp_path: Path) -> None:
    (tmp_path / "roles").mkdir()
    assert len(inputs.files_digest(str(tmp_path))) == 64


def test_the_collection_root_is_this_collection() -> None:
    root = Path(inputs.collection_root())
    assert (root / "plugins" / "plugin_utils" / "_converged" / "inputs.py").is_file()
    assert "vllm_server_" in inputs.role_prefixes(str(root))


def test_role_prefixes_are_the_public_roles(tmp_path: Path) -> None:
    for name in ("vllm_server", "_common", "ray_node"):
        (tmp_path / "roles" / name).mkdir(parents=True)
    (tmp_path / "roles" / "README.md").write_text("roles\n")
    assert inputs.role_prefixes(str(tmp_path)) == ("ray_node_", "vllm_server_")


PREFIXES = ("vllm_server_", "ray_node_")


@pytest.mark.parametrize(
    ("name", "counts"),
    [
        ("llmfleet_vllm_profile", True),
        ("vllm_server_port", True),
        ("ray_node_port", True),
        ("ansible_host", True),
        ("ansible_user", True),
        ("ansible_python_interpreter", True),
        ("ansible_ssh_common_args", True),
        ("__vllm_server_plan", False),  # internal
        ("_llmfleet_anything", False),
        ("ansible_check_mode", False),  # how the run is run, not what it is given
        ("ansible_run_tags", False),
        ("ansible_facts", False),
        ("inventory_hostname", False),
        ("groups", False),
        ("playbook_dir", False),
        ("benchmark_sessions", False),  # a role not in the prefixes given
        ("custom_setting", False),
        ("vllm_server", False),  # the prefix is the role's name and an underscore
    ],
)
def test_is_input(name: str, counts: bool) -> None:
    assert inputs.is_input(name, PREFIXES) is counts


def digest(**overrides: Any) -> str:
    given: dict[str, Any] = {
        "values": {"llmfleet_a": 1, "vllm_server_port": 8000, "ansible_host": "10.0.0.1"},
        "groups": {"all": ["spark-1", "spark-2"], "sparks": ["spark-1", "spark-2"]},
        "group_names": ["sparks", "serving"],
        "files": "f" * 64,
        "versions": {"ansible-core": "2.19.0", "ansible": "12.0.0"},
    }
    return inputs.inputs_digest(**{**given, **overrides})


def test_inputs_digest_ignores_order() -> None:
    same = digest(
        values={"ansible_host": "10.0.0.1", "vllm_server_port": 8000, "llmfleet_a": 1},
        groups={"sparks": ["spark-2", "spark-1"], "all": ["spark-2", "spark-1"]},
        group_names=["serving", "sparks"],
    )
    assert same == digest()
    assert len(same) == 64


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param({"values": {"llmfleet_a": 2, "vllm_server_port": 8000,
                                 "ansible_host": "10.0.0.1"}}, id="a value"),
        pytest.param({"values": {"llmfleet_a": "1", "vllm_server_port": 8000,
                                 "ansible_host": "10.0.0.1"}}, id="a value's type"),
        pytest.param({"values": {"llmfleet_a": 1, "vllm_server_port": 8000}}, id="a value gone"),
        pytest.param({"groups": {"all": ["spark-1", "spark-2"], "sparks": ["spark-1"]}},
                     id="a group's hosts"),
        pytest.param({"groups": {"all": ["spark-1", "spark-2"], "sparks": ["spark-1", "spark-2"],
                                 "gateways": []}}, id="a new group"),
        pytest.param({"group_names": ["sparks"]}, id="the host's groups"),
        pytest.param({"files": "e" * 64}, id="the files"),
        pytest.param({"versions": {"ansible-core": "2.19.1", "ansible": "12.0.0"}},
                     id="ansible-core"),
    ],
)  # fmt: skip
def test_inputs_digest_sees_what_changed(overrides: dict[str, Any]) -> None:
    assert digest(**overrides) != digest()


def test_a_value_json_cannot_write_is_read_as_text() -> None:
    assert digest(values={"llmfleet_a": {1, 2}}) == digest(values={"llmfleet_a": str({1, 2})})


def test_ansible_versions() -> None:
    versions = inputs.ansible_versions()
    assert versions["ansible-core"] == ansible_core_version
    assert set(versions) == {"ansible-core", "ansible"}


def test_input_parts_name_each_variable_and_what_else_decides_a_run() -> None:
    given: dict[str, Any] = {
        "values": {"llmfleet_a": 1, "vllm_server_port": 8000},
        "groups": {"all": ["spark-1"]},
        "group_names": ["sparks"],
        "files": "f" * 64,
        "versions": {"ansible-core": "2.19.0", "ansible": "12.0.0"},
    }
    parts = inputs.input_parts(**given)
    assert set(parts) == {
        "var:llmfleet_a", "var:vllm_server_port", "groups", "group_names", "files", "versions"
    }  # fmt: skip
    assert all(len(value) == 64 for value in parts.values())
    assert inputs.parts_digest(parts) == inputs.inputs_digest(**given)
    # One value changed: its part alone differs, and no part holds the value itself.
    other = inputs.input_parts(**{**given, "values": {"llmfleet_a": 2, "vllm_server_port": 8000}})
    assert {name for name in parts if parts[name] != other[name]} == {"var:llmfleet_a"}
    assert "2" not in other.values() and 2 not in other.values()
