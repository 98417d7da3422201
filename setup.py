"""Build step that ships the llmfleet.cluster collection inside the llmfleet wheel.

The wheel installs ``ansible_collections/llmfleet/cluster`` next to the ``llmfleet`` package,
as the ``ansible`` package installs its collections: ansible finds it on ``sys.path`` and the
CLI finds it next to itself (``llmfleet.paths``). Its files are the ones that
``ansible-galaxy collection build`` packs into the collection tarball (galaxy.yml's
``build_ignore`` decides, with ansible-galaxy's own exclusions), plus the two files the CLI
reads that the tarball leaves out: ``galaxy.yml`` (how the CLI recognises the collection) and
``ansible.cfg`` (the settings every ``llmfleet up`` runs with). Everything else about the
package is in pyproject.toml.
"""

from __future__ import annotations

import shutil
from fnmatch import fnmatch
from pathlib import Path

import yaml
from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
INSTALLED_COLLECTION = Path("ansible_collections", "llmfleet", "cluster")
# What ansible-galaxy always leaves out of a collection build (ansible.galaxy.collection,
# _build_files_manifest_walk), before galaxy.yml's build_ignore.
GALAXY_IGNORED = (
    "MANIFEST.json",
    "FILES.json",
    "galaxy.yml",
    "galaxy.yaml",
    ".git",
    "*.pyc",
    "*.retry",
    "tests/output",
)
GALAXY_IGNORED_DIRS = frozenset({"CVS", ".bzr", ".hg", ".git", ".svn", "__pycache__", ".tox"})
# What an sdist adds at its root, where the wheel is built from.
SDIST_ADDED = ("PKG-INFO", "setup.cfg")
CLI_FILES = (Path("galaxy.yml"), Path("ansible.cfg"))


def collection_files(root: Path) -> list[Path]:
    """The files, relative to ``root``, that ``ansible-galaxy collection build`` packs."""
    galaxy = yaml.safe_load((root / "galaxy.yml").read_text(encoding="utf-8"))
    built = f"{galaxy['namespace']}-{galaxy['name']}-*.tar.gz"
    ignored = [*GALAXY_IGNORED, built, *galaxy.get("build_ignore", []), *SDIST_ADDED]
    files: list[Path] = []

    def walk(folder: Path) -> None:
        for entry in sorted(folder.iterdir()):
            relative = entry.relative_to(root)
            if any(fnmatch(relative.as_posix(), pattern) for pattern in ignored):
                continue
            if not entry.is_dir():
                files.append(relative)
            elif entry.name not in GALAXY_IGNORED_DIRS and not entry.is_symlink():
                walk(entry)

    walk(root)
    return files


# The checkout's tools in the llmfleet package that the wheel leaves out: the README
# generator (`python -m llmfleet.roledocs`) writes into the checkout.
CHECKOUT_ONLY_MODULES = frozenset({("llmfleet", "roledocs")})


class BuildWithCollection(build_py):
    """build_py without the checkout's tools, then the collection copied under
    ansible_collections/llmfleet/cluster."""

    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        modules = super().find_package_modules(package, package_dir)
        return [m for m in modules if (m[0], m[1]) not in CHECKOUT_ONLY_MODULES]

    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install runs from the checkout, collection included
            return
        target = Path(self.build_lib) / INSTALLED_COLLECTION
        shutil.rmtree(target, ignore_errors=True)  # no file left over from an earlier build
        for relative in [*collection_files(ROOT), *CLI_FILES]:
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / relative, target / relative)


setup(cmdclass={"build_py": BuildWithCollection})
