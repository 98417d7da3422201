"""Every role follows the collection's conventions (STYLE.md): specs, prefixes, docs, tests."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from llmfleet import roledocs

ROOT = Path(__file__).resolve().parents[2]
ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "tasks").is_dir())


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


def test_readme_role_reference_matches_the_specs() -> None:
    readme = (ROOT / "README.md").read_text()
    assert roledocs.updated_readme(readme, roledocs.render(ROOT)) == readme, (
        "README.md is stale: run python -m llmfleet.roledocs"
    )
