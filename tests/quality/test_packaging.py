"""Release metadata, and the two installs that need no checkout.

- the wheel (``pipx install llmfleet-*.whl``): the ``llmfleet`` command with the collection
  shipped inside, at ``site-packages/ansible_collections/llmfleet/cluster``;
- the collection tarball (``ansible-galaxy collection install llmfleet-cluster-*.tar.gz``).

Both are built here and used from a folder outside the checkout. The virtualenv the wheel goes
into borrows this one's packages (ansible, ansible-runner...) through a ``.pth`` file instead
of downloading them again, as ``--system-site-packages`` would borrow the system's.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from importlib.metadata import distribution
from importlib.metadata import version as installed_version
from pathlib import Path

import pytest
import yaml
from ansible.module_utils.compat.version import LooseVersion

ROOT = Path(__file__).resolve().parents[2]
INSTALLED_COLLECTION = "ansible_collections/llmfleet/cluster/"
# Never in the tarball: the lab, the tests, the checkout's tooling.
DEV_ONLY = (
    ".ansible-lint",
    ".config/",
    ".gitignore",
    "ansible.cfg",
    "collections/",
    "inventory/lab/",
    "lab/",
    "molecule/",
    "src/",
    "tests/",
    "Makefile",
    "pyproject.toml",
    "setup.py",
)
# What the wheel's copy holds beyond the tarball (the CLI reads them), and the reverse.
WHEEL_ONLY = {"galaxy.yml", "ansible.cfg"}
TARBALL_ONLY = {"MANIFEST.json", "FILES.json"}
# Collections named in a task, handler or template by FQCN; the lab's inventory aside.
FQCN = re.compile(r"\b([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*)\.[a-z][a-z0-9_]*\b")
USES_SEARCHED = ("roles", "playbooks", "plugins", "site.yml")
CORE_IMPORT = re.compile(r"^\s*(?:from|import) ansible\.\S+.*$", re.MULTILINE)
NOT_A_DEPENDENCY = {"ansible.builtin", "llmfleet.cluster"}
# The collections of the `ansible` package, in this virtualenv.
ANSIBLE_COLLECTIONS = Path(str(distribution("ansible").locate_file("ansible_collections")))
# The folders this virtualenv's packages are in, that the one the wheel goes into borrows.
SITE_PACKAGES = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]


def galaxy() -> dict:
    return yaml.safe_load((ROOT / "galaxy.yml").read_text(encoding="utf-8"))


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def run(*cmd: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        [str(c) for c in cmd],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))}\n{proc.stdout[-4000:]}\n{proc.stderr}"
    return proc.stdout


def outside_env(path: str, **extra: str) -> dict[str, str]:
    """The environment of a user outside the checkout: none of the test run's settings."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("ANSIBLE_", "PYTHON", "LLMFLEET_"))
    }
    env.update(PATH=path, ANSIBLE_NOCOLOR="1", **extra)
    return env


# ---------------------------------------------------------------------------
# metadata
# ---------------------------------------------------------------------------
def test_one_version_number() -> None:
    assert pyproject()["project"]["version"] == galaxy()["version"]
    lab = tomllib.loads((ROOT / "lab" / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert lab["version"] == galaxy()["version"]
    assert f"llmfleet=={galaxy()['version']}" in lab["dependencies"]


def test_license_is_the_apache_2_text() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert galaxy()["license"] == ["Apache-2.0"]
    assert pyproject()["project"]["license"] == "Apache-2.0"


def test_galaxy_dependencies_name_the_collections_used() -> None:
    used = set()
    for top in USES_SEARCHED:
        paths = [ROOT / top] if (ROOT / top).is_file() else (ROOT / top).rglob("*")
        for path in paths:
            if path.is_file() and path.suffix in {".yml", ".yaml", ".j2", ".py"}:
                text = path.read_text(encoding="utf-8")
                if path.suffix == ".py":
                    # ansible-core's own packages (ansible.utils.vars...), not collections:
                    # Python reaches collections as ansible_collections.<ns>.<name>.
                    text = CORE_IMPORT.sub("", text)
                used.update(f"{ns}.{name}" for ns, name in FQCN.findall(text))
    # The pattern also matches attribute chains (ansible_facts.default_ipv4.address): what
    # counts is what names a collection of the `ansible` package.
    known = {name for name in used if ANSIBLE_COLLECTIONS.joinpath(*name.split(".")).is_dir()}
    assert set(galaxy()["dependencies"]) == known - NOT_A_DEPENDENCY


def test_galaxy_dependencies_are_met_by_the_ansible_package() -> None:
    for name, spec in galaxy()["dependencies"].items():
        manifest_file = ANSIBLE_COLLECTIONS.joinpath(*name.split("."), "MANIFEST.json")
        manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
        shipped = manifest["collection_info"]["version"]
        assert spec.startswith(">="), f"{name}: {spec} is not a lower bound"
        assert LooseVersion(shipped) >= LooseVersion(spec[2:]), f"{name} {shipped} {spec}"


def test_requires_ansible_is_the_tested_core() -> None:
    runtime = yaml.safe_load((ROOT / "meta/runtime.yml").read_text(encoding="utf-8"))
    major, minor = installed_version("ansible-core").split(".")[:2]
    tested = f"{major}.{minor}"
    # From the tested minor release up to the next one (whose internals may differ).
    assert runtime["requires_ansible"] == f">={tested}.0,<{major}.{int(minor) + 1}"
    assert (ROOT / "tests/sanity" / f"ignore-{tested}.txt").is_file()


# ---------------------------------------------------------------------------
# the collection tarball
# ---------------------------------------------------------------------------
def tarball_files(tarball: Path) -> set[str]:
    with tarfile.open(tarball) as tar:
        return {member.name for member in tar.getmembers() if member.isfile()}


def test_tarball_holds_no_lab_or_dev_file(collection_tarball: Path) -> None:
    names = tarball_files(collection_tarball)
    assert {"LICENSE", "README.md", "site.yml", "meta/runtime.yml"} <= names
    assert sorted(n for n in names if n.startswith(DEV_ONLY)) == []


def test_galaxy_install_gives_working_roles_and_modules(
    collection_tarball: Path, tmp_path: Path
) -> None:
    collections = tmp_path / "collections"
    tool = Path(sys.executable).parent.joinpath
    env = outside_env("/usr/bin:/bin", ANSIBLE_COLLECTIONS_PATH=str(collections))
    # Its dependencies are met by the collections of the `ansible` package: nothing from Galaxy.
    install = ["collection", "install", collection_tarball, "-p", collections]
    run(tool("ansible-galaxy"), *install, cwd=tmp_path, env=env)
    installed = collections / "ansible_collections/llmfleet/cluster"
    doc = run(tool("ansible-doc"), "llmfleet.cluster.rdma_counters", cwd=tmp_path, env=env)
    assert str(installed / "plugins/modules/rdma_counters.py") in doc
    # The playbooks, by name, find their roles (by FQCN) in the installed collection.
    names = sorted(f"llmfleet.cluster.{p.stem}" for p in (installed / "playbooks").glob("*.yml"))
    playbooks = [installed / "site.yml", *names]
    syntax = ["--syntax-check", "-i", "localhost,", *playbooks]
    run(tool("ansible-playbook"), *syntax, cwd=tmp_path, env=env)
    local = ["localhost", "-c", "local", "-i", "localhost,", "-o"]
    local += ["-e", f"ansible_python_interpreter={sys.executable}"]
    adhoc = run(
        tool("ansible"), *local, "-m", "llmfleet.cluster.rdma_devices", cwd=tmp_path, env=env
    )
    assert adhoc.startswith("localhost | SUCCESS"), adhoc


# ---------------------------------------------------------------------------
# the wheel
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``python -m build``: the sdist, then the wheel built from it, as a release does."""
    if importlib.util.find_spec("build") is None:
        pytest.fail("python -m build is missing: install the dev extras (make venv)")
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, ROOT, cwd=ROOT)
    (built,) = out.glob("llmfleet-*.whl")
    return built


def test_wheel_ships_the_collection_of_the_tarball(wheel: Path, collection_tarball: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    shipped = {
        n.removeprefix(INSTALLED_COLLECTION) for n in names if n.startswith(INSTALLED_COLLECTION)
    }
    assert shipped - tarball_files(collection_tarball) == WHEEL_ONLY
    assert tarball_files(collection_tarball) - shipped == TARBALL_ONLY
    assert f"llmfleet-{galaxy()['version']}.dist-info/METADATA" in names


def _entry_points(archive: zipfile.ZipFile, name: str) -> str:
    (listed,) = [n for n in archive.namelist() if n == f"{name}.dist-info/entry_points.txt"]
    return archive.read(listed).decode()


def test_wheel_leaves_the_lab_and_the_checkout_tools_out(wheel: Path) -> None:
    """The lab (its emulators, image assets, tiny-model maker) and the README generator are
    the checkout's, not the product's: the lab is a distribution of its own."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = _entry_points(archive, f"llmfleet-{galaxy()['version']}")
    assert "llmfleet/cli.py" in names
    assert not [n for n in names if n.startswith(("llmfleet/lab/", "llmfleet_lab/"))]
    assert "llmfleet/roledocs.py" not in names
    assert "[console_scripts]\nllmfleet = llmfleet.cli:app" in entry_points
    assert "llmfleet.commands" not in entry_points


@pytest.fixture(scope="module")
def lab_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The lab's own distribution (lab/pyproject.toml), built as the product's is."""
    out = tmp_path_factory.mktemp("lab-dist")
    run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, ROOT / "lab", cwd=ROOT)
    (built,) = out.glob("llmfleet_lab-*.whl")
    return built


def test_the_lab_is_a_distribution_that_adds_the_lab_command(lab_wheel: Path) -> None:
    with zipfile.ZipFile(lab_wheel) as archive:
        names = archive.namelist()
        entry_points = _entry_points(archive, f"llmfleet_lab-{galaxy()['version']}")
        metadata = archive.read(f"llmfleet_lab-{galaxy()['version']}.dist-info/METADATA")
    assert "llmfleet_lab/cli.py" in names
    # the node image's recipe travels with it
    assert "llmfleet_lab/assets/image/Containerfile" in names
    assert any(n.startswith("llmfleet_lab/assets/image/emulators/") for n in names)
    assert not [n for n in names if n.startswith(("llmfleet/", "ansible_collections/"))]
    assert "[llmfleet.commands]\nlab = llmfleet_lab.cli:lab_app" in entry_points
    assert f"Requires-Dist: llmfleet=={galaxy()['version']}" in metadata.decode()


@pytest.fixture(scope="module")
def installed_wheel(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv outside the checkout with the wheel installed; returns its bin/."""
    venv = tmp_path_factory.mktemp("pipx") / "venv"
    python = venv / "bin" / "python"
    env = outside_env(os.environ["PATH"])  # no PYTHONPATH: pip would see the checkout's src/
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=venv.parent, env=env)
    pip_install = ["-m", "pip", "--python", python, "install", "--quiet", "--no-deps", "--no-index"]
    run(sys.executable, *pip_install, wheel, cwd=venv.parent, env=env)
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    purelib = Path(run(python, "-c", where, cwd=venv.parent, env=env).strip())
    # The dependencies: this virtualenv's packages, and ansible-playbook's entry point as pip
    # writes it when it installs ansible-core.
    (purelib / "borrowed.pth").write_text("".join(f"{path}\n" for path in SITE_PACKAGES))
    entry_point = "import sys\nfrom ansible.cli.playbook import main\nsys.exit(main())\n"
    (venv / "bin" / "ansible-playbook").write_text(f"#!{python}\n{entry_point}")
    (venv / "bin" / "ansible-playbook").chmod(0o755)
    return venv / "bin"


def test_installed_wheel_works_outside_the_checkout(installed_wheel: Path, tmp_path: Path) -> None:
    env = outside_env("/usr/bin:/bin")
    assert "Usage: llmfleet" in run(installed_wheel / "llmfleet", "--help", cwd=tmp_path, env=env)
    where = "from llmfleet.paths import collection_root; print(collection_root())"
    found = run(installed_wheel / "python", "-c", where, cwd=tmp_path, env=env).strip()
    assert found.startswith(str(installed_wheel.parent)), found
    assert found.endswith(INSTALLED_COLLECTION.rstrip("/")), found
    # ansible finds it on sys.path, as it finds the `ansible` package's collections.
    (tmp_path / "none").mkdir()
    doc_env = outside_env("/usr/bin:/bin", ANSIBLE_COLLECTIONS_PATH=str(tmp_path / "none"))
    doc = ["-m", "ansible.cli.doc", "llmfleet.cluster.rdma_counters"]
    assert f"{found}/plugins/modules/rdma_counters.py" in run(
        installed_wheel / "python", *doc, cwd=tmp_path, env=doc_env
    )
    # A real run: the CLI's ansible.cfg, ansible-runner, the playbook and its roles, all from
    # the installed collection (localhost is in no topology's group: nothing is changed, and
    # the CLI says that no play had a host instead of OK).
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    localhost:\n      ansible_connection: local\n")
    check = ["check", "-i", inventory, "--plain", "-v"]  # -v: the plays' names
    proc = subprocess.run(
        [str(installed_wheel / "llmfleet"), *map(str, check)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert "Check the whole inventory" in out, out[-4000:]
    assert proc.returncode == 1 and "no play had a host" in out, out[-4000:]


def test_the_lab_wheel_adds_its_command_to_the_installed_cli(
    installed_wheel: Path, lab_wheel: Path, tmp_path: Path
) -> None:
    """llmfleet-lab installed beside llmfleet adds `llmfleet lab` (its entry point)."""
    env = outside_env("/usr/bin:/bin")
    python = installed_wheel / "python"
    pip_install = ["-m", "pip", "--python", python, "install", "--quiet", "--no-deps", "--no-index"]
    run(sys.executable, *pip_install, lab_wheel, cwd=tmp_path, env=env)
    lab = run(installed_wheel / "llmfleet", "lab", "--help", cwd=tmp_path, env=env)
    assert "Usage: llmfleet lab" in lab, lab
    where = "import llmfleet_lab; print(llmfleet_lab.__file__)"
    found = run(python, "-c", where, cwd=tmp_path, env=env).strip()
    assert found.startswith(str(installed_wheel.parent)), found
