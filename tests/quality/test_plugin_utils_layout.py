"""The shared Python code is grouped by job (issue 37): ``plugins/module_utils/<job>/`` holds
what modules carry to the hosts (the benchmark, memory, the model, RDMA, the node, containers,
HTTP), ``plugins/plugin_utils/<job>/`` what runs only on the controller (the planner, the
doctor, the benchmark's gate and llama-benchy's plan, the images' needs). A module's
AnsiballZ payload can only hold module_utils: nothing there imports plugin_utils, and every
file there is carried by some module (else it is the controller's). The unit tests mirror
the files: tests/unit/plugins/<kind>/<job>/test_<file>.py."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = ROOT / "plugins"
KINDS = ("module_utils", "plugin_utils")
PACKAGE = "ansible_collections.llmfleet.cluster.plugins."


def imported(path: Path) -> set[Path]:
    """The collection's module_utils and plugin_utils files ``path`` imports (by either
    form: ``from ...<job>.<file> import name`` and ``from ...<job> import <file>``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith(PACKAGE):
            continue
        base = PLUGINS.joinpath(*node.module.removeprefix(PACKAGE).split("."))
        candidates = [base.with_suffix(".py"), *(base / f"{a.name}.py" for a in node.names)]
        found |= {candidate for candidate in candidates if candidate.is_file()}
    return found


def carried_by_modules() -> set[Path]:
    """Every module_utils file some module imports, directly or through another."""
    todo = [*PLUGINS.glob("modules/*.py")]
    seen: set[Path] = set()
    while todo:
        for target in imported(todo.pop()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def files(kind: str) -> list[Path]:
    return sorted(p for p in (PLUGINS / kind).rglob("*.py") if p.name != "__init__.py")


def test_no_flat_files_only_packages_by_job() -> None:
    for kind in KINDS:
        flat = sorted(p.name for p in (PLUGINS / kind).glob("*.py") if p.name != "__init__.py")
        allowed = {"_ansible_internals.py"} if kind == "plugin_utils" else set()
        assert set(flat) <= allowed, f"plugins/{kind}: {flat} belong in a package of their job"


def test_module_utils_never_import_plugin_utils() -> None:
    strays = {
        str(path.relative_to(ROOT)): sorted(str(t.relative_to(ROOT)) for t in targets)
        for path in files("module_utils")
        if (targets := {t for t in imported(path) if "plugin_utils" in t.parts})
    }
    assert strays == {}


def test_every_module_utils_file_is_carried_by_a_module() -> None:
    controller_only = sorted(
        str(path.relative_to(ROOT)) for path in set(files("module_utils")) - carried_by_modules()
    )
    assert controller_only == [], "no module imports these: they belong in plugin_utils"


@pytest.mark.parametrize("kind", KINDS)
def test_unit_tests_mirror_the_files(kind: str) -> None:
    tests = sorted((ROOT / "tests/unit/plugins" / kind).rglob("test_*.py"))
    assert tests
    orphans = [
        str(test.relative_to(ROOT))
        for test in tests
        if not (PLUGINS / kind / test.parent.relative_to(ROOT / "tests/unit/plugins" / kind))
        .joinpath(f"{test.stem.removeprefix('test_')}.py")
        .is_file()
    ]
    assert orphans == []
