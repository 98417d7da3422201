"""meta/collection_variables.yml declares every collection-wide variable the collection uses,
once, with readers that read it; README.md's table of them is made from it."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

from llmfleet import roledocs
from llmfleet.declared_variables import collection_variables, declarations

ROOT = Path(__file__).resolve().parents[3]
REGISTRY = collection_variables(ROOT)
# Where the collection's variables are used; the generated READMEs (Markdown) and the Grafana
# dashboard (JSON) hold none.
USING = ("roles", "playbooks", "plugins", "inventory")
SUFFIXES = {".yml", ".yaml", ".py", ".j2", ""}
NAME = re.compile(r"\bllmfleet_[a-z0-9_]*[a-z0-9]\b")
# A template's text outside Jinja is the file it renders: haproxy.cfg.j2 names its frontends,
# backends and ACLs llmfleet_*.
JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.S)
# llmfleet_ names in those folders that are not Ansible variables.
NOT_VARIABLES = {
    # the Python module of the lab's scripted model that vLLM loads (a logits processor)
    "llmfleet_lab_scripted_processor",
}
TYPES = {"str", "int", "float", "bool", "path", "list", "dict", "raw"}
FIELDS = {"type", "elements", "description", "choices", "read_by", "set_by", "lab_only"}


def _uses(top: str) -> dict[str, set[Path]]:
    """Each llmfleet_ name used in the files under ``top``, with those files (relative)."""
    found: dict[str, set[Path]] = defaultdict(set)
    for path in sorted((ROOT / top).rglob("*")):
        if not path.is_file() or path.suffix not in SUFFIXES or "__pycache__" in path.parts:
            continue
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".j2":
            text = " ".join(JINJA.findall(text))
        for name in set(NAME.findall(text)) - NOT_VARIABLES:
            found[name].add(path.relative_to(ROOT))
    return found


USES: dict[str, set[Path]] = defaultdict(set)
for _top in (*USING, "src"):
    for _name, _paths in _uses(_top).items():
        USES[_name] |= _paths


def _used_in(name: str, tops: tuple[str, ...]) -> set[Path]:
    return {path for path in USES.get(name, set()) if path.parts[0] in tops}


def test_every_llmfleet_name_used_is_declared() -> None:
    used = {name for name in USES if _used_in(name, USING)}
    assert sorted(used - set(REGISTRY)) == [], "declare them in meta/collection_variables.yml"


def test_every_declared_name_is_used() -> None:
    assert sorted(set(REGISTRY) - set(USES)) == [], "remove them from meta/collection_variables.yml"


def test_the_registry_declares_collection_variables_and_the_roles_their_own() -> None:
    for declaration in declarations(ROOT):
        from_registry = declaration.source == "meta/collection_variables.yml"
        assert declaration.name.startswith("llmfleet_") == from_registry, declaration


def test_a_name_is_declared_with_one_type() -> None:
    types: dict[str, set[str]] = defaultdict(set)
    for declaration in declarations(ROOT):
        types[declaration.name].add(declaration.type)
    assert {name: kinds for name, kinds in types.items() if len(kinds) > 1} == {}


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_an_entry_is_typed_and_described(name: str) -> None:
    entry = REGISTRY[name]
    assert set(entry) <= FIELDS, set(entry) - FIELDS
    assert entry["type"] in TYPES
    assert ("elements" in entry) <= (entry["type"] == "list")
    assert str(entry.get("description", "")).strip()
    assert isinstance(entry.get("read_by"), list)
    assert all(isinstance(choice, str) for choice in entry.get("choices", []))


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_the_readers_and_setters_named_use_it(name: str) -> None:
    """A role by name, a file by path, a command as `llmfleet NAME`: each one uses the name."""
    entry = REGISTRY[name]
    for who in [*entry["read_by"], *entry.get("set_by", [])]:
        if who.startswith("llmfleet "):
            assert _used_in(name, ("src",)), who
        elif "/" in who:
            assert Path(who) in USES[name], who
        else:
            assert any(path.parts[:2] == ("roles", who) for path in USES[name]), who


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_role_whose_defaults_or_vars_read_it_is_a_reader(name: str) -> None:
    readers = {
        path.parts[1]
        for path in USES[name]
        if path.parts[0] == "roles"
        and path.parts[2:] in {("defaults", "main.yml"), ("vars", "main.yml")}
    }
    assert sorted(readers - set(REGISTRY[name]["read_by"])) == []


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_the_labs_own_are_marked_lab_only(name: str) -> None:
    """A name that only the lab's inventory uses is lab-only, and a lab-only name is one."""
    used = _used_in(name, USING)
    only_the_lab = bool(used) and all(path.parts[:2] == ("inventory", "lab") for path in used)
    assert bool(REGISTRY[name].get("lab_only")) == only_the_lab, sorted(used)


def test_the_readme_table_is_made_from_the_registry() -> None:
    readme = (ROOT / "README.md").read_text()
    assert roledocs.updated_variables(readme, roledocs.variable_table(ROOT)) == readme, (
        "README.md's table of collection-wide variables is stale: run python -m llmfleet.roledocs"
    )
