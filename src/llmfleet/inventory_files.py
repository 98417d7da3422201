"""What an inventory's files hold, read without ansible: its files that can hold variables, a
YAML loader that reads them whatever tags their values carry, and the variables they set
(for the typo check: a name with the collection's or a role's prefix that nothing declares
is named before any run)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

# The files of an inventory that can hold variables.
VARS_SUFFIXES = ("", ".yml", ".yaml", ".json")
# The folders whose files are variables of a group or a host (their top-level keys).
VARS_FOLDERS = ("group_vars", "host_vars")


class Vaulted:
    """A ``!vault`` value, as VarsFileLoader reads it."""


class VarsFileLoader(yaml.SafeLoader):
    """SafeLoader that reads a vars file whatever tags its values carry: ``!vault`` values as
    Vaulted, every other tag as None."""


VarsFileLoader.add_constructor("!vault", lambda _loader, _node: Vaulted())
VarsFileLoader.add_multi_constructor("!", lambda _loader, _suffix, _node: None)


def inventory_files(inventory: Path) -> list[Path]:
    """The inventory itself when it is a file, else its files that can hold variables (hidden
    ones left out)."""
    if inventory.is_file():
        return [inventory]
    return sorted(
        path
        for path in inventory.rglob("*")
        if path.is_file()
        and path.suffix in VARS_SUFFIXES
        and not any(part.startswith(".") for part in path.relative_to(inventory).parts)
    )


def load(path: Path) -> Any:
    """A vars or inventory file as YAML (JSON is YAML); None when it cannot be read or is no
    YAML (a script, an INI inventory, a file encrypted whole: ansible says what it is)."""
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=VarsFileLoader)  # noqa: S506 - a SafeLoader
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None


def _group_names(group: Any) -> Iterator[str]:
    """The variables a YAML inventory's group sets: its ``vars``, its hosts', its children's."""
    if not isinstance(group, dict):
        return
    if isinstance(group.get("vars"), dict):
        yield from (str(name) for name in group["vars"])
    hosts = group.get("hosts")
    for host in hosts.values() if isinstance(hosts, dict) else ():
        if isinstance(host, dict):
            yield from (str(name) for name in host)
    children = group.get("children")
    for child in children.values() if isinstance(children, dict) else ():
        yield from _group_names(child)


def variable_names(inventory: Path) -> list[tuple[Path, str]]:
    """Each variable the inventory's YAML files set, with its file: the top-level keys of
    ``group_vars``/``host_vars`` files, and what a YAML inventory's groups and hosts set."""
    found: list[tuple[Path, str]] = []
    root = inventory if inventory.is_dir() else inventory.parent
    for path in inventory_files(inventory):
        data = load(path)
        if not isinstance(data, dict):
            continue
        in_vars_folder = any(part in VARS_FOLDERS for part in path.relative_to(root).parts[:-1])
        names = (
            (str(name) for name in data)
            if in_vars_folder
            else (name for group in data.values() for name in _group_names(group))
        )
        found += [(path, name) for name in names]
    return found
