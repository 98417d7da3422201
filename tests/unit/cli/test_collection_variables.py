"""Role _common declares every collection-wide variable the collection uses, once, and holds its
default; every role and play that reads one loads it; README.md's table is made from it."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from llmfleet import roledocs
from llmfleet.declared_variables import COMMON_SPEC, collection_variables, declarations

ROOT = Path(__file__).resolve().parents[3]
DECLARED = collection_variables(ROOT)
DEFAULTS = yaml.safe_load((ROOT / "roles" / "_common" / "defaults" / "main.yml").read_text())
USES = roledocs.variable_uses(ROOT)
# Where the collection's variables are read (the CLI, src/, may set or read them too).
USING = ("roles", "playbooks", "plugins", "inventory")
TYPES = {"str", "int", "float", "bool", "path", "list", "dict", "raw"}
FIELDS = {"type", "elements", "description", "choices", "default", "no_log"}
DEFAULT_OF = re.compile(r"\b(llmfleet_[a-z0-9_]+)\b\s*\|\s*default\(")
COMMON = "llmfleet.cluster._common"


def _used_in(name: str, tops: tuple[str, ...]) -> set[Path]:
    return {path for path in USES.get(name, set()) if path.parts[0] in tops}


def test_every_llmfleet_name_used_is_declared() -> None:
    used = {name for name in USES if _used_in(name, USING)}
    assert sorted(used - set(DECLARED)) == [], f"declare them in {COMMON_SPEC}"


def test_every_declared_name_is_used() -> None:
    assert sorted(set(DECLARED) - set(USES)) == [], f"remove them from {COMMON_SPEC}"


def test_role_common_declares_collection_variables_and_the_roles_their_own() -> None:
    for declaration in declarations(ROOT):
        from_common = declaration.source == COMMON_SPEC.as_posix()
        # Besides the collection-wide variables, role _common declares the inputs of the task
        # files the roles include (`tasks_from`), named with its own prefix.
        internal = from_common and declaration.name.startswith("_common_")
        assert declaration.name.startswith("llmfleet_") == (from_common and not internal), (
            declaration
        )


def test_a_name_is_declared_with_one_type() -> None:
    types: dict[str, set[str]] = defaultdict(set)
    for declaration in declarations(ROOT):
        types[declaration.name].add(declaration.type)
    assert {name: kinds for name, kinds in types.items() if len(kinds) > 1} == {}


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_an_entry_is_typed_and_described(name: str) -> None:
    entry = DECLARED[name]
    assert set(entry) <= FIELDS, set(entry) - FIELDS
    assert entry["type"] in TYPES
    assert ("elements" in entry) <= (entry["type"] == "list")
    assert str(entry.get("description", "")).strip()
    assert all(isinstance(choice, str) for choice in entry.get("choices", []))


def test_the_defaults_are_the_specs_defaults() -> None:
    """defaults/main.yml holds exactly the declared defaults, value for value."""
    declared = {name: entry["default"] for name, entry in DECLARED.items() if "default" in entry}
    assert declared == DEFAULTS


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_a_declared_default_is_written_nowhere_else(name: str) -> None:
    """A variable with a default in role _common is read bare: a `| default(...)` beside it is
    a second copy that can drift. A play's `hosts:` is templated before any role loads, and
    another host's hostvars hold no role defaults: those keep theirs."""
    copies = []
    for path in sorted(USES.get(name, set())):
        if path.parts[0] not in ("roles", "playbooks") or path.suffix not in (".yml", ".j2"):
            continue
        for number, line in enumerate((ROOT / path).read_text().splitlines(), 1):
            if line.lstrip().startswith(("hosts:", "#")) or "hostvars[" in line:
                continue
            if name in DEFAULT_OF.findall(line):
                copies.append(f"{path}:{number}")
    assert copies == []


def _depends_on_common(role: str) -> bool:
    meta = yaml.safe_load((ROOT / "roles" / role / "meta" / "main.yml").read_text())
    return COMMON in roledocs.dependencies(meta)


@pytest.mark.parametrize(
    "role", sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "tasks").is_dir())
)
def test_a_role_that_reads_one_depends_on_role_common(role: str) -> None:
    """What the role's files use (its argument spec only names them in descriptions)."""
    reads = any(
        path.parts[:2] == ("roles", role) and path.name != "argument_specs.yml"
        for paths in USES.values()
        for path in paths
    )
    assert reads == _depends_on_common(role)


def _plays() -> list[tuple[str, dict]]:
    plays = []
    for path in sorted((ROOT / "playbooks").glob("*.yml")):
        for play in yaml.safe_load(path.read_text()) or []:
            if "hosts" in play:
                plays.append((f"{path.name}: {play['name']}", play))
    return plays


@pytest.mark.parametrize(("where", "play"), _plays(), ids=[where for where, _ in _plays()])
def test_a_play_that_reads_a_default_outside_its_roles_loads_role_common(
    where: str, play: dict
) -> None:
    """A play's own tasks (and the vars files they read) see role _common's defaults only when
    one of the play's roles loads it (a dependency counts; an include_role does not)."""
    own = {key: value for key, value in play.items() if key not in ("roles", "hosts")}
    text = yaml.safe_dump(own)
    for vars_file in play.get("vars_files") or []:
        text += (ROOT / "playbooks" / vars_file).read_text()
    if not any(re.search(rf"\b{name}\b", text) for name in DEFAULTS):
        return
    roles = [entry["role"] if isinstance(entry, dict) else entry for entry in play["roles"]]
    assert any(role == COMMON or _depends_on_common(role.rsplit(".", 1)[-1]) for role in roles), (
        where
    )


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_the_labs_own_are_said_to_be(name: str) -> None:
    """A name that only the lab's inventory uses says it is the lab's own, and only those do:
    README.md's table leaves them out."""
    own = str(DECLARED[name]["description"]).startswith("The lab's own")
    assert own == roledocs.lab_only(USES.get(name, set())), sorted(USES.get(name, set()))


def test_the_readme_table_is_made_from_role_common() -> None:
    readme = (ROOT / "README.md").read_text()
    assert roledocs.updated_variables(readme, roledocs.variable_table(ROOT)) == readme, (
        "README.md's table of collection-wide variables is stale: run python -m llmfleet.roledocs"
    )
