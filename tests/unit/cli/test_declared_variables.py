"""llmfleet.declared_variables: what the collection declares, ``-e`` values given their declared
type as ansible's argument spec converts them, and names nothing declares with the closest one."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from llmfleet.declared_variables import (
    Declaration,
    DeclaredVariables,
    collection_variables,
    declarations,
)

OPTIONS = {
    "demo_port": {"type": "int", "description": "Port."},
    "demo_share": {"type": "float", "description": "Share."},
    "demo_enabled": {"type": "bool", "description": "On."},
    "demo_name": {"type": "str", "description": "Name."},
    "demo_dir": {"type": "path", "description": "Folder."},
    "demo_hosts": {"type": "list", "elements": "str", "description": "Hosts."},
    "demo_ports": {"type": "list", "elements": "int", "description": "Ports."},
    "demo_labels": {"type": "dict", "description": "Labels."},
    "demo_untyped": {"description": "A str by default."},
}
SPEC = {
    "argument_specs": {
        "main": {"short_description": "Demo", "options": OPTIONS},
        "check": {"short_description": "Its checks", "options": {"demo_check_only": {}}},
    }
}
COMMON = {
    "argument_specs": {
        "variables": {
            "short_description": "Internal - the collection-wide variables",
            "options": {
                "llmfleet_fabric_mtu": {"type": "int", "default": 9000, "description": "MTU."},
                "llmfleet_gpu_memory_utilization": {"type": "float", "description": "Memory."},
            },
        }
    }
}


@pytest.fixture
def collection(tmp_path: Path) -> Path:
    (tmp_path / "roles" / "demo" / "meta").mkdir(parents=True)
    (tmp_path / "roles" / "demo" / "meta" / "argument_specs.yml").write_text(yaml.safe_dump(SPEC))
    (tmp_path / "roles" / "_common" / "meta").mkdir(parents=True)
    (tmp_path / "roles" / "_common" / "meta" / "argument_specs.yml").write_text(
        yaml.safe_dump(COMMON)
    )
    return tmp_path


@pytest.fixture
def declared(collection: Path) -> DeclaredVariables:
    return DeclaredVariables.load(collection)


def test_every_entry_point_and_role_common_declare(collection: Path) -> None:
    found = declarations(collection)
    spec = "roles/demo/meta/argument_specs.yml"
    assert Declaration("demo_port", "int", spec) in found
    assert Declaration("demo_check_only", "str", spec) in found
    assert Declaration("demo_untyped", "str", spec) in found
    assert Declaration("demo_ports", "list", spec, "int") in found
    common = "roles/_common/meta/argument_specs.yml"
    assert Declaration("llmfleet_fabric_mtu", "int", common) in found
    assert collection_variables(collection)["llmfleet_fabric_mtu"]["default"] == 9000


def test_the_prefixes_are_the_collections_and_each_roles(declared: DeclaredVariables) -> None:
    assert declared.prefixes == ("llmfleet_", "demo_")


def test_a_collection_without_role_common_declares_only_its_roles_options(
    collection: Path,
) -> None:
    (collection / "roles" / "_common" / "meta" / "argument_specs.yml").unlink()
    declared = DeclaredVariables.load(collection)
    assert "demo_port" in declared
    assert "llmfleet_fabric_mtu" not in declared


@pytest.mark.parametrize(
    ("name", "value", "typed"),
    [
        ("demo_port", "8001", 8001),
        ("demo_port", " 8001", 8001),
        ("demo_port", "8001.0", 8001),
        ("demo_share", "0.70", 0.7),
        # a whole number stays one where a float is declared (messages show what was typed)
        ("demo_share", "1", 1),
        ("demo_share", "250", 250),
        ("demo_share", "1e3", 1000.0),
        ("llmfleet_gpu_memory_utilization", "0.70", 0.7),
        ("llmfleet_fabric_mtu", "9000", 9000),
        *[("demo_enabled", word, True) for word in ("yes", "Yes", "TRUE", "on", "1", "y", "t")],
        *[("demo_enabled", word, False) for word in ("no", "False", "OFF", "0", "n", "f")],
        # Any other type, or no type declared, or no declaration: the string as given.
        ("demo_name", "0.70", "0.70"),
        ("demo_untyped", "1", "1"),
        ("demo_dir", "~/x", "~/x"),
        # A list as ansible's argument spec splits it, or as YAML/JSON; its elements typed.
        ("demo_hosts", "a,b", ["a", "b"]),
        ("demo_hosts", "spark-1, spark-2", ["spark-1", "spark-2"]),
        ("demo_hosts", '["nohost"]', ["nohost"]),
        ("demo_hosts", "[spark-1, spark-2]", ["spark-1", "spark-2"]),
        ("demo_hosts", "", []),
        ("demo_hosts", "[]", []),
        ("demo_ports", "8000,8001", [8000, 8001]),
        ("demo_ports", "[8000, '8001']", [8000, 8001]),
        # A dict as key=value pairs or as YAML/JSON.
        ("demo_labels", "team=infra site=lab", {"team": "infra", "site": "lab"}),
        ("demo_labels", '{"team": "infra"}', {"team": "infra"}),
        ("demo_labels", "{team: infra, port: 1}", {"team": "infra", "port": 1}),
        ("ansible_user", "1", "1"),
        ("llmfleet_not_declared", "yes", "yes"),
    ],
)
def test_a_value_gets_its_declared_type(
    declared: DeclaredVariables, name: str, value: str, typed: Any
) -> None:
    result = declared.typed(name, value)
    assert result == typed
    assert type(result) is type(typed)


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        (
            "demo_port",
            "80x",
            "demo_port is '80x'; expected an int (declared in roles/demo/meta/argument_specs.yml)",
        ),
        ("demo_port", "0.5", "demo_port is '0.5'; expected an int"),
        ("demo_port", "", "demo_port is ''; expected an int"),
        (
            "llmfleet_gpu_memory_utilization",
            "most",
            "llmfleet_gpu_memory_utilization is 'most'; expected a float"
            " (declared in roles/_common/meta/argument_specs.yml)",
        ),
        (
            "demo_ports",
            "8000,http",
            "demo_ports is '8000,http'; expected a list of ints (a,b or [a, b])",
        ),
        ("demo_hosts", "[a, b", "demo_hosts is '[a, b'; expected a list"),
        ("demo_hosts", "[a]x", "demo_hosts is '[a]x'; expected a list"),
        ("demo_labels", "{a: 1", "demo_labels is '{a: 1'; expected a dict (k=v k2=v2 or {k: v})"),
        ("demo_labels", "just words", "demo_labels is 'just words'; expected a dict"),
        (
            "demo_enabled",
            "maybe",
            "demo_enabled is 'maybe'; expected a bool (yes/no, true/false, on/off, 1/0)",
        ),
    ],
)
def test_a_value_that_does_not_convert_is_named_with_its_type(
    declared: DeclaredVariables, name: str, value: str, says: str
) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(says)):
        declared.typed(name, value)


@pytest.mark.parametrize("kind", ["int", "float", "bool"])
@pytest.mark.parametrize(
    "value", ["8001", "8001.0", "0.70", "-3", "1e3", "yes", "No", "on", "1", "0", "80x", ""]
)
def test_the_conversion_is_ansibles_argument_specs(kind: str, value: str) -> None:
    """The same value or the same refusal as a module's argument spec of that type."""
    spec = {"value": {"type": kind}}
    checked = ArgumentSpecValidator(spec).validate({"value": value})
    declared = DeclaredVariables([Declaration("value", kind, "spec")], [])
    if checked.error_messages:
        with pytest.raises(ValueError):
            declared.typed("value", value)
    else:
        assert declared.typed("value", value) == checked.validated_parameters["value"]


def test_a_name_nothing_declares_is_named_with_the_closest_declared_one(
    declared: DeclaredVariables,
) -> None:
    found = declared.undeclared(
        [
            "llmfleet_fabric_mut",
            "demo_prot",
            "llmfleet_fabric_mut",  # once
            "llmfleet_fabric_mtu",  # declared
            "demo_port",  # declared
            "__demo_internal",  # internal: never
            "__llmfleet_internal",
            "ansible_host",  # no declared prefix
            "other_role_port",
            "llmfleet_zzzzzzzzzzzz",
        ]
    )
    assert [(typo.name, typo.closest) for typo in found] == [
        ("llmfleet_fabric_mut", "llmfleet_fabric_mtu"),
        ("demo_prot", "demo_port"),
        ("llmfleet_zzzzzzzzzzzz", None),
    ]
    assert found[0].message() == (
        "llmfleet_fabric_mut: did you mean llmfleet_fabric_mtu?"
        " (no role or collection variable has this name)"
    )
    assert found[2].message().startswith("llmfleet_zzzzzzzzzzzz: no name is close to it")
