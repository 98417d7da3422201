"""Quality gates: linters, type checks, playbook syntax and plugin docs, as tests."""

from __future__ import annotations

import ast
import re
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOKS = sorted(["site.yml", *(str(p.relative_to(ROOT)) for p in ROOT.glob("playbooks/*.yml"))])
SAMPLE_INVENTORIES = [
    "inventory/sparks",
    "inventory/gh200",
    "inventory/mac-studio",
    "inventory/lab",
]


def run(*cmd: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(cmd), cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )


def assert_ok(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0, (
        f"{' '.join(proc.args)}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    )


def test_ruff_lint() -> None:
    assert_ok(run("ruff", "check", "."))


def test_ruff_format() -> None:
    assert_ok(run("ruff", "format", "--check", "."))


def test_mypy_strict_on_src() -> None:
    assert_ok(run("mypy"))


def test_ansible_lint_production_profile() -> None:
    proc = run("ansible-lint", "--profile", "production", "--nocolor")
    assert_ok(proc)
    assert "Profile 'production' was required, and it passed" in proc.stdout + proc.stderr


@pytest.mark.parametrize("inventory", SAMPLE_INVENTORIES)
def test_playbook_syntax(inventory: str) -> None:
    """Every playbook in one ansible-playbook (a second each when run one by one); an
    error names its playbook."""
    assert_ok(run("ansible-playbook", "--syntax-check", "-i", inventory, *PLAYBOOKS))


def plugin_names(kind: str) -> list[str]:
    folder = ROOT / "plugins" / kind
    suffix = ".yml" if kind == "filter" else ".py"
    return sorted(
        p.stem
        for p in folder.glob(f"*{suffix}")
        if not p.name.startswith("_") and p.stem != "__init__"
    )


@pytest.mark.parametrize(
    ("kind", "name"),
    [("module", n) for n in plugin_names("modules")]
    + [("filter", n) for n in plugin_names("filter")],
)
def test_ansible_doc_renders(kind: str, name: str) -> None:
    proc = run("ansible-doc", "-t", kind, f"llmfleet.cluster.{name}")
    assert_ok(proc)
    assert "EXAMPLES" in proc.stdout
    assert "RETURN" in proc.stdout or "RETURN VALUES" in proc.stdout


@pytest.mark.parametrize("name", plugin_names("callback"))
def test_ansible_doc_renders_each_callback(name: str) -> None:
    proc = run("ansible-doc", "-t", "callback", f"llmfleet.cluster.{name}")
    assert_ok(proc)
    assert "OPTIONS" in proc.stdout and "REQUIREMENTS" in proc.stdout


def test_the_checkout_and_molecule_run_with_the_preload_callback() -> None:
    """ansible-playbook from the checkout (and llmfleet, which pins its ansible.cfg) and the
    molecule scenarios, whose ansible.cfg molecule writes, both enable it."""
    assert (
        "callbacks_enabled = llmfleet.cluster.preload_filters" in (ROOT / "ansible.cfg").read_text()
    )
    molecule = yaml.safe_load((ROOT / ".config/molecule/config.yml").read_text())
    defaults = molecule["provisioner"]["config_options"]["defaults"]
    assert defaults["callbacks_enabled"] == "llmfleet.cluster.preload_filters"


def test_collection_builds(tmp_path: Path) -> None:
    assert_ok(run("ansible-galaxy", "collection", "build", "--output-path", str(tmp_path)))
    (artifact,) = tmp_path.glob("llmfleet-cluster-*.tar.gz")
    with tarfile.open(artifact) as tar:
        names = tar.getnames()
    assert "galaxy.yml" not in names  # built collections carry MANIFEST.json instead
    assert "MANIFEST.json" in names
    assert "playbooks/spark_cluster.yml" in names
    assert not [
        n for n in names if n.startswith((".venv", "collections/", "src/", "lab/", "tests/"))
    ]


# A file a newcomer can read through: split along its seams past this many lines of code.
# A module's DOCUMENTATION, EXAMPLES and RETURN (what ansible-doc shows) do not count: a
# module is not split because its options are well described. The lab's emulators stand in
# for whole vendor tools (perftest, nvidia-smi) and are exempt.
MAX_LINES = 450
EMULATORS = ROOT / "lab/src/llmfleet_lab/assets/image/emulators"
DOC_BLOCKS = frozenset({"DOCUMENTATION", "EXAMPLES", "RETURN"})


def code_lines(path: Path) -> int:
    """The lines of ``path`` outside its module-level DOCUMENTATION, EXAMPLES and RETURN."""
    text = path.read_text(encoding="utf-8")
    docs = sum(
        node.end_lineno - node.lineno + 1
        for node in ast.parse(text).body
        if isinstance(node, ast.Assign)
        and node.end_lineno is not None
        and {getattr(target, "id", None) for target in node.targets} & DOC_BLOCKS
    )
    return len(text.splitlines()) - docs


# ansible-core's modules that are no public plugin API, and the one file each side may import
# them in (issue 37: one seam, with a clear error when an ansible-core lacks them).
PRIVATE_ANSIBLE = re.compile(
    r"^\s*(?:from|import)\s+ansible\.(?:_internal|inventory\.manager|vars\.manager"
    r"|parsing\.dataloader|executor|playbook|galaxy)\b"
    r"|^\s*from\s+ansible\.template\s+import\s+.*\bTemplar\b",
    re.MULTILINE,
)
ANSIBLE_SEAMS = {
    "plugins/plugin_utils/_ansible_internals.py",  # the collection's plugins
    "src/llmfleet/host_access.py",  # the CLI: the inventory as ansible-playbook reads it
}


def test_ansible_cores_private_modules_are_imported_only_in_the_seams() -> None:
    importing = {
        str(path.relative_to(ROOT))
        for path in [
            *ROOT.glob("plugins/**/*.py"),
            *ROOT.glob("src/llmfleet/**/*.py"),
            *ROOT.glob("lab/src/llmfleet_lab/**/*.py"),
        ]
        if PRIVATE_ANSIBLE.search(path.read_text(encoding="utf-8"))
    }
    assert importing == ANSIBLE_SEAMS


def test_no_plugin_or_cli_file_is_oversized() -> None:
    files = [
        *ROOT.glob("plugins/**/*.py"),
        *ROOT.glob("src/llmfleet/**/*.py"),
        *ROOT.glob("lab/src/llmfleet_lab/**/*.py"),
    ]
    sizes = {
        str(path.relative_to(ROOT)): code_lines(path)
        for path in files
        if EMULATORS not in path.parents
    }
    assert sizes
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}
