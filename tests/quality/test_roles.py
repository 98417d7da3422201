"""Every role follows the collection's conventions (STYLE.md): specs, prefixes, docs, tests."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from llmfleet import roledocs
from llmfleet.declared_variables import declarations

ROOT = Path(__file__).resolve().parents[2]
# The roles a play runs. Role _common (internal) runs no entry point of its own: it holds the
# collection-wide variables and task files other roles include, which their scenarios test.
ROLES = sorted(
    p.name
    for p in (ROOT / "roles").iterdir()
    if (p / "tasks").is_dir() and not p.name.startswith("_")
)


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text()) or {}


def test_there_are_roles() -> None:
    assert ROLES


@pytest.mark.parametrize("role", ROLES)
def test_argument_spec_names_exactly_the_defaults(role: str) -> None:
    spec = load(ROOT / "roles" / role / "meta" / "argument_specs.yml")
    options = set(spec["argument_specs"]["main"]["options"])
    defaults = set(load(ROOT / "roles" / role / "defaults" / "main.yml"))
    assert options == defaults, {
        "in the spec only": sorted(options - defaults),
        "in defaults only": sorted(defaults - options),
    }


@pytest.mark.parametrize("role", ROLES)
def test_variables_carry_the_role_prefix(role: str) -> None:
    defaults = load(ROOT / "roles" / role / "defaults" / "main.yml")
    assert [name for name in defaults if not name.startswith(f"{role}_")] == []
    internal = ROOT / "roles" / role / "vars" / "main.yml"
    if internal.exists():
        assert [name for name in load(internal) if not name.startswith(f"__{role}_")] == []


@pytest.mark.parametrize("role", ROLES)
def test_every_option_is_described_and_typed(role: str) -> None:
    spec = load(ROOT / "roles" / role / "meta" / "argument_specs.yml")
    for name, option in spec["argument_specs"]["main"]["options"].items():
        assert option.get("description"), name
        assert option.get("type"), name


@pytest.mark.parametrize("role", ROLES)
def test_every_role_has_a_molecule_scenario_with_a_verify(role: str) -> None:
    scenario = ROOT / "molecule" / role
    assert (scenario / "molecule.yml").is_file()
    assert (scenario / "converge.yml").is_file()
    tests = list((scenario / "tests").glob("test_*.py"))
    assert tests, f"molecule/{role} has no testinfra verify"


SPECCED_ROLES = [role.name for role in roledocs.roles(ROOT)]


@pytest.mark.parametrize("role", SPECCED_ROLES)
def test_role_readme_is_generated_from_its_specs(role: str) -> None:
    readme = ROOT / "roles" / role / "README.md"
    assert readme.is_file(), f"roles/{role}/README.md is missing: run python -m llmfleet.roledocs"
    assert readme.read_text() == roledocs.role_readme(ROOT / "roles" / role), (
        f"roles/{role}/README.md is stale: run python -m llmfleet.roledocs"
    )


def test_readme_role_table_lists_every_role() -> None:
    readme = (ROOT / "README.md").read_text()
    assert roledocs.updated_readme(readme, roledocs.role_table(ROOT)) == readme, (
        "README.md's role table is stale: run python -m llmfleet.roledocs"
    )


def example_plays(role: str) -> list[dict]:
    spec = load(ROOT / "roles" / role / "meta" / "argument_specs.yml")
    return yaml.safe_load(spec["argument_specs"]["main"].get("examples", "")) or []


def role_options(role: str) -> set[str]:
    spec = load(ROOT / "roles" / role / "meta" / "argument_specs.yml")
    return set(spec["argument_specs"]["main"]["options"])


PUBLIC_ROLES = [r for r in ROLES if not roledocs.is_internal(ROOT / "roles" / r)]


@pytest.mark.parametrize("role", PUBLIC_ROLES)
def test_example_play_runs_the_role_by_fqcn_with_its_own_variables(role: str) -> None:
    plays = example_plays(role)
    assert plays, f"roles/{role}/meta/argument_specs.yml has no examples (an example play)"
    used = [entry for play in plays for entry in play.get("roles", [])]
    assert f"llmfleet.cluster.{role}" in [entry["role"] for entry in used]
    for entry in used:
        name = entry["role"].removeprefix("llmfleet.cluster.")
        assert entry["role"] == f"llmfleet.cluster.{name}", f"{entry['role']}: not by FQCN"
        unknown = set(entry.get("vars", {})) - role_options(name)
        assert not unknown, f"{entry['role']} has no variable {sorted(unknown)}"


def test_example_plays_pass_the_syntax_check(tmp_path: Path) -> None:
    plays = [play for role in PUBLIC_ROLES for play in example_plays(role)]
    playbook = tmp_path / "examples.yml"
    playbook.write_text(yaml.safe_dump(plays, sort_keys=False))
    proc = subprocess.run(
        ["ansible-playbook", "--syntax-check", "-i", "localhost,", str(playbook)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]


def _vars_blocks(node: object) -> list[dict]:
    """Every `vars:` mapping in a playbook's YAML (plays, tasks, role entries)."""
    found: list[dict] = []
    if isinstance(node, dict):
        if isinstance(node.get("vars"), dict):
            found.append(node["vars"])
        for value in node.values():
            found += _vars_blocks(value)
    elif isinstance(node, list):
        for value in node:
            found += _vars_blocks(value)
    return found


def test_the_launch_is_defined_once_and_no_play_sets_it_by_hand() -> None:
    """The role variables of a launch (vllm_server_topology, model_weights_hosts, Ray's nodes,
    the firewall's API ports...) come from playbooks/vars/topology.yml alone: a play that set
    one again would let the run, its validation, plan, upgrade, status and doctor disagree."""
    topology = yaml.safe_load((ROOT / "playbooks/vars/topology.yml").read_text())
    launch = {name for name in topology if not name.startswith("__")}
    assert {"vllm_server_topology", "vllm_server_nodes", "model_weights_hosts"} <= launch
    set_by_hand = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in [ROOT / "site.yml", *sorted((ROOT / "playbooks").rglob("*.yml"))]
        if path.parent.name != "vars"
        for block in _vars_blocks(yaml.safe_load(path.read_text()))
        for name in block
        if name in launch
    }
    assert not set_by_hand


# What a role reads of another role's variables, in its Jinja (`{{ }}`, `{% %}`): a name with
# another role's prefix that is neither declared in the reading role's argument spec nor a
# fact the owning role sets (set_fact, register). Values a role passes on (a mapping key, such
# as the vars of an include_role) are no read. What several roles share is a collection-wide
# variable (role _common), one role's input or a fact the owning role returns.
_JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S)
_NAME = re.compile(r"\b_{0,2}[a-z][a-z0-9_]*\b")


def _owner(name: str, roles: list[str]) -> str | None:
    bare = name.lstrip("_")
    owners = [role for role in roles if bare.startswith(f"{role}_")]
    return max(owners, key=len) if owners else None


def _facts_set(role: str) -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "roles" / role / "tasks").rglob("*.yml"):
        text = path.read_text()
        names |= set(re.findall(r"register:\s*(\w+)", text))
        for block in re.findall(r"set_fact:\s*\n((?:[ \t]+\w+:.*\n?)+)", text):
            names |= set(re.findall(r"^\s+(\w+):", block, re.M))
    return names


def test_roles_read_no_other_roles_variables() -> None:
    facts = {role: _facts_set(role) for role in ROLES}
    # Every option of every entry point of each role's argument spec, as the CLI reads them.
    declared_by: dict[str, set[str]] = {}
    for declaration in declarations(ROOT):
        declared_by.setdefault(declaration.source, set()).add(declaration.name)
    reads = set()
    for role in ROLES:
        declared = declared_by.get(f"roles/{role}/meta/argument_specs.yml", set())
        for folder in ("tasks", "templates", "vars", "defaults", "handlers"):
            for path in (ROOT / "roles" / role / folder).rglob("*"):
                if not path.is_file():
                    continue
                for expression in _JINJA.findall(path.read_text(errors="ignore")):
                    for name in _NAME.findall(expression):
                        owner = _owner(name, ROLES)
                        if (
                            owner not in (None, role)
                            and name not in declared
                            and name not in facts[owner]
                        ):
                            reads.add((role, name))
    assert sorted(reads) == [], "declare a collection-wide variable in roles/_common instead"
