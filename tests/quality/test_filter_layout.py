"""Filters are found by name: a filter named after a file of plugins/filter lives in it
(``cx7_drift`` in cx7.py, ``fabric_checks`` in fabric.py), every filter has its
documentation beside it (``<name>.yml``, what ansible-doc reads), and its unit tests
mirror the file (tests/unit/plugins/filter/test_<file>.py)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "plugins" / "filter"
FILES = sorted(p.stem for p in FOLDER.glob("*.py") if not p.name.startswith("_"))


def registered(stem: str) -> set[str]:
    module = importlib.import_module(f"ansible_collections.llmfleet.cluster.plugins.filter.{stem}")
    return set(module.FilterModule().filters())


def home(name: str) -> str | None:
    """The file a filter's name points to: the longest file name it starts with."""
    owners = [stem for stem in FILES if name.startswith(f"{stem}_")]
    return max(owners, key=len) if owners else None


def test_there_are_filter_files() -> None:
    assert FILES


@pytest.mark.parametrize("stem", FILES)
def test_filters_live_in_the_file_their_name_points_to(stem: str) -> None:
    strays = {name: home(name) for name in registered(stem) if home(name) not in (None, stem)}
    assert strays == {}, f"{stem}.py holds filters named after other files"


@pytest.mark.parametrize("stem", FILES)
def test_every_filter_has_its_documentation_beside_it(stem: str) -> None:
    undocumented = sorted(
        name for name in registered(stem) if not (FOLDER / f"{name}.yml").is_file()
    )
    assert undocumented == []


def test_every_documentation_file_documents_a_filter() -> None:
    names = set().union(*(registered(stem) for stem in FILES))
    orphans = sorted(p.stem for p in FOLDER.glob("*.yml") if p.stem not in names)
    assert orphans == []


@pytest.mark.parametrize("stem", FILES)
def test_unit_tests_mirror_the_file(stem: str) -> None:
    assert (ROOT / "tests" / "unit" / "plugins" / "filter" / f"test_{stem}.py").is_file()
