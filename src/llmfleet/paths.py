"""Where the llmfleet.cluster collection lives, and the environment every ansible run gets.

The repository root *is* the collection: it holds ``galaxy.yml``, ``site.yml``, ``ansible.cfg``,
``playbooks/``, ``roles/`` and ``inventory/``. The wheel ships a copy of it next to this
package, at ``<site-packages>/ansible_collections/llmfleet/cluster`` (where ansible finds it
on ``sys.path``, as it finds the collections of the ``ansible`` package). The CLI finds it, in
this order:

1. ``$LLMFLEET_HOME`` when set (it must point at the collection root);
2. the current directory or one of its parents;
3. the directory this package was imported from, or one of its parents (an editable install
   lives inside the checkout: ``<root>/src/llmfleet/paths.py``);
4. the collection installed with this package (a wheel, e.g. through ``pipx install``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

ENV_HOME = "LLMFLEET_HOME"
MARKERS: tuple[str, ...] = ("galaxy.yml", "site.yml")
# Where the wheel puts the collection, relative to the folder holding this package.
INSTALLED_COLLECTION = Path("ansible_collections", "llmfleet", "cluster")


class CollectionNotFound(RuntimeError):
    """The llmfleet.cluster collection root (galaxy.yml + site.yml) could not be located."""


def is_collection_root(path: Path) -> bool:
    """True when ``path`` holds every marker file of the collection root."""
    return all((path / marker).is_file() for marker in MARKERS)


def _self_and_parents(start: Path) -> Iterator[Path]:
    start = start.resolve()
    yield start
    yield from start.parents


def collection_root(
    *,
    cwd: Path | None = None,
    environ: Mapping[str, str] | None = None,
    package_dir: Path | None = None,
) -> Path:
    """Return the collection root directory (absolute).

    ``cwd`` and ``environ`` default to the process's own, ``package_dir`` to the folder of
    this package; they exist for tests.
    Raises :class:`CollectionNotFound` with a message saying what was tried.
    """
    env = os.environ if environ is None else environ
    home = env.get(ENV_HOME, "").strip()
    if home:
        path = Path(home).expanduser().resolve()
        if is_collection_root(path):
            return path
        raise CollectionNotFound(
            f"{ENV_HOME}={home} is not the llmfleet collection root "
            f"(expected {' and '.join(MARKERS)} in {path})"
        )

    package = Path(__file__).parent if package_dir is None else package_dir
    starts = [Path.cwd() if cwd is None else cwd, package]
    for start in starts:
        for candidate in _self_and_parents(start):
            if is_collection_root(candidate):
                return candidate
    installed = (package.parent / INSTALLED_COLLECTION).resolve()
    if is_collection_root(installed):
        return installed
    raise CollectionNotFound(
        "cannot find the llmfleet collection root (a directory holding "
        f"{' and '.join(MARKERS)}): not in {starts[0]} or its parents, nor above the installed "
        f"package, nor at {installed}; run from the llmfleet checkout, install the llmfleet "
        f"wheel, or set {ENV_HOME}=/path/to/llmfleet"
    )


def ansible_env(root: Path, *, tty: bool | None = None) -> dict[str, str]:
    """Environment variables every ansible run needs, layered over the process environment.

    - ``ANSIBLE_CONFIG`` pins the collection's own ``ansible.cfg`` (ansible would otherwise
      ignore it when the CLI runs from another directory);
    - the interpreter's ``bin/`` is put first on ``PATH`` so ``ansible-playbook`` from the same
      virtualenv runs even when the venv is not activated;
    - colour is turned off when the output is not a terminal (CI logs);
    - retry files are off (they would litter the playbook directory).
    """
    if tty is None:
        tty = sys.stdout.isatty()
    bindir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    parts = [p for p in path.split(os.pathsep) if p and p != bindir]
    env = {
        "ANSIBLE_CONFIG": str(root / "ansible.cfg"),
        "PATH": os.pathsep.join([bindir, *parts]),
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "PYTHONUNBUFFERED": "1",
    }
    if not tty:
        env["ANSIBLE_FORCE_COLOR"] = "0"
        env["ANSIBLE_NOCOLOR"] = "1"
    return env
