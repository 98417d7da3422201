"""llmfleet.roledocs: role READMEs made from the role's metadata, and their drift check."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from llmfleet import roledocs

EXAMPLE = "- name: Greet\n  hosts: all\n  roles:\n    - role: llmfleet.cluster.demo\n"
SPEC = {
    "argument_specs": {
        "main": {
            "short_description": "Say C(hello)",
            "description": ["Writes O(demo_greeting) to a file.", "Changes nothing else."],
            "version_added": "0.1.0",
            "examples": EXAMPLE,
            "options": {
                "demo_greeting": {
                    "description": "What to say; a | is escaped.",
                    "type": "str",
                    "default": "",
                },
                "demo_mode": {
                    "description": "How.",
                    "type": "str",
                    "choices": ["loud", "quiet"],
                    "default": "quiet",
                },
                "demo_hosts": {
                    "description": "Who.",
                    "type": "list",
                    "elements": "str",
                    "required": True,
                },
            },
        },
    }
}
SPEC["argument_specs"]["validate"] = SPEC["argument_specs"]["main"]
META = {
    "galaxy_info": {
        "min_ansible_version": "2.17",
        "license": "Apache-2.0",
        "platforms": [{"name": "Debian", "versions": ["bookworm"]}, {"name": "macOS"}],
    },
    "dependencies": [],
}
COMMON = {
    "argument_specs": {
        "variables": {
            "short_description": "Internal - the collection-wide variables",
            "options": {
                "llmfleet_greeting_mode": {
                    "type": "str",
                    "default": "loud",
                    "description": "How every role greets; a | is escaped.",
                    "choices": ["loud", "quiet"],
                },
                "llmfleet_greeting_dir": {
                    "type": "path",
                    "description": "Where C(llmfleet greet) writes. Set by C(llmfleet greet).",
                },
                "llmfleet_lab_greeting": {"type": "bool", "description": "The lab's own."},
            },
        }
    }
}
# Who uses them: a role's defaults, a playbook, the lab's inventory (the table leaves the
# lab's own out).
USERS = {
    "roles/demo/defaults/main.yml": "demo_greeting: '{{ llmfleet_greeting_mode }}'\n",
    "playbooks/greet.yml": "# {{ llmfleet_greeting_mode }} into {{ llmfleet_greeting_dir }}\n",
    "inventory/lab/hosts.yml": "# llmfleet_lab_greeting: true\n",
}
TASKS = [
    {
        "name": "Check",
        "ansible.builtin.import_tasks": "validate.yml",
        "tags": ["demo", "demo_validate"],
    },
    {
        "name": "Run",
        "community.docker.docker_container": {"name": "x"},
        "tags": ["demo", "demo_run"],
    },
]


@pytest.fixture
def collection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for marker in ("galaxy.yml", "site.yml"):
        (tmp_path / marker).write_text("---\n")
    role = tmp_path / "roles" / "demo"
    (role / "meta").mkdir(parents=True)
    (role / "tasks").mkdir()
    (role / "meta" / "argument_specs.yml").write_text(yaml.safe_dump(SPEC))
    (role / "meta" / "main.yml").write_text(yaml.safe_dump(META))
    (role / "tasks" / "main.yml").write_text(yaml.safe_dump(TASKS))
    (tmp_path / "roles" / "_common" / "meta").mkdir(parents=True)
    (tmp_path / "roles" / "_common" / "meta" / "argument_specs.yml").write_text(
        yaml.safe_dump(COMMON)
    )
    for name, text in USERS.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "README.md").write_text(
        f"# Demo\n\n{roledocs.TABLE_BEGIN}\nold\n{roledocs.TABLE_END}\n\n"
        f"{roledocs.VARIABLES_BEGIN}\nold\n{roledocs.VARIABLES_END}\n\nThe end.\n"
    )
    monkeypatch.setenv("LLMFLEET_HOME", str(tmp_path))
    return tmp_path


def test_readme_holds_what_the_metadata_says(collection: Path) -> None:
    text = roledocs.role_readme(collection / "roles" / "demo")
    assert "# `llmfleet.cluster.demo`" in text
    assert "Say `hello`" in text
    assert "Writes `demo_greeting` to a file." in text
    assert '| `demo_greeting` | str | `""` |  | no | What to say; a \\| is escaped. |' in text
    assert "| `demo_mode` | str | `quiet` | `loud`, `quiet` | no | How. |" in text
    assert "| `demo_hosts` | list of str |  |  | yes | Who. |" in text
    assert "- ansible-core 2.17 or later." in text
    assert "- Hosts: Debian (bookworm), macOS." in text
    assert "`community.docker`" in text
    assert "- `validate` (`tasks_from: validate`)" in text
    assert (
        "`--tags demo` runs the whole role; one phase alone: `demo_validate`, `demo_run`." in text
    )
    assert "```yaml\n- name: Greet\n" in text


def test_check_fails_until_the_files_are_written(
    collection: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert roledocs.main(["--check"]) == 1
    assert "roles/demo/README.md is out of date" in capsys.readouterr().out
    assert roledocs.main([]) == 0
    assert roledocs.main(["--check"]) == 0
    readme = (collection / "README.md").read_text()
    assert "| [`demo`](roles/demo/README.md) | Say `hello` |" in readme
    assert readme.endswith("The end.\n")
    assert "old" not in readme


def test_the_variable_table_is_role_commons_less_the_labs_own(collection: Path) -> None:
    table = roledocs.variable_table(collection)
    assert table.splitlines()[2:] == [
        "| variable | type | default | choices | read by | meaning |",
        "| --- | --- | --- | --- | --- | --- |",
        "| `llmfleet_greeting_dir` | path |  |  | `playbooks/greet.yml` | Where `llmfleet greet`"
        " writes. Set by `llmfleet greet`. |",
        "| `llmfleet_greeting_mode` | str | `loud` | `loud`, `quiet` | `demo`,"
        " `playbooks/greet.yml` | How every role greets; a \\| is escaped. |",
        "",
        roledocs.VARIABLES_END,
    ]


def test_role_commons_task_files_are_listed_after_its_variables(collection: Path) -> None:
    """Role _common's primary entry point declares the collection-wide variables and runs
    nothing (no main); a task file the roles include is an entry point of its own."""
    spec = collection / "roles" / "_common" / "meta" / "argument_specs.yml"
    common = yaml.safe_load(spec.read_text())
    common["argument_specs"]["greet_packages"] = {
        "short_description": "Internal - install what a greeting needs",
        "options": {"_common_greet_packages": {"type": "list", "elements": "str"}},
    }
    spec.write_text(yaml.safe_dump(common))
    (collection / "roles" / "_common" / "meta" / "main.yml").write_text(yaml.safe_dump(META))
    text = roledocs.role_readme(collection / "roles" / "_common")
    assert "- `variables`: the collection-wide variables." in text
    assert "`main`" not in text
    assert (
        "- `greet_packages` (`tasks_from: greet_packages`): internal - install what a greeting"
        " needs, with variables of its own." in text
    )


def test_check_sees_a_readme_edited_by_hand(collection: Path) -> None:
    roledocs.main([])
    path = collection / "roles" / "demo" / "README.md"
    path.write_text(path.read_text() + "hand-written line\n")
    assert roledocs.main(["--check"]) == 1


def test_readme_without_the_table_markers_is_refused(collection: Path) -> None:
    (collection / "README.md").write_text("# Demo\n")
    with pytest.raises(ValueError, match="role table markers"):
        roledocs.main(["--check"])
    (collection / "README.md").write_text(f"{roledocs.TABLE_BEGIN}\n{roledocs.TABLE_END}\n")
    with pytest.raises(ValueError, match="collection variables table markers"):
        roledocs.main(["--check"])


def test_an_internal_role_is_marked_and_its_callers_need_its_collections(
    collection: Path,
) -> None:
    inner = collection / "roles" / "launch"
    (inner / "meta").mkdir(parents=True)
    (inner / "tasks").mkdir()
    spec = {"argument_specs": {"main": {"short_description": "Internal - start it", "options": {}}}}
    (inner / "meta" / "argument_specs.yml").write_text(yaml.safe_dump(spec))
    (inner / "meta" / "main.yml").write_text(yaml.safe_dump(META))
    podman = [{"name": "Run", "containers.podman.podman_container": {"name": "x"}}]
    (inner / "tasks" / "main.yml").write_text(yaml.safe_dump(podman))
    caller = [
        {"name": "Launch", "ansible.builtin.include_role": {"name": "llmfleet.cluster.launch"}}
    ]
    (collection / "roles" / "demo" / "tasks" / "more.yml").write_text(yaml.safe_dump(caller))

    assert roledocs.is_internal(inner)
    assert not roledocs.is_internal(collection / "roles" / "demo")
    assert roledocs.collections_used(collection / "roles" / "demo") == [
        "community.docker",
        "containers.podman",
    ]
    assert "An internal role of the collection" in roledocs.role_readme(inner)
    assert "roles/launch/README.md" not in roledocs.role_table(collection)
