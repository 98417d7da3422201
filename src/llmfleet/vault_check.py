"""Vaulted values in an inventory and no vault password to open them: said before any run,
with the variables (or the files encrypted whole) and how to give the password. Ansible's
own error, at the first task that uses one, names neither ("Attempt to use undecryptable
variable: Attempting to decrypt but no vault secrets found")."""

from __future__ import annotations

import configparser
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from llmfleet.inventory_files import Vaulted, inventory_files, load

VAULT_HEADER = "$ANSIBLE_VAULT;"
# What gives ansible-playbook a vault password without a prompt (the CLI cannot prompt).
PASSWORD_ENVIRONMENT = ("ANSIBLE_VAULT_PASSWORD_FILE", "ANSIBLE_VAULT_IDENTITY_LIST")
PASSWORD_SETTINGS = ("vault_password_file", "vault_identity_list")


def _vaulted_names(data: Any, prefix: str = "") -> Iterator[str]:
    """The names (``hosts.spark-1.key`` for nested ones) whose value is vaulted."""
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(value, Vaulted):
                yield f"{prefix}{key}"
            else:
                yield from _vaulted_names(value, f"{prefix}{key}.")
    elif isinstance(data, list):
        for item in data:
            yield from _vaulted_names(item, prefix)


def vaulted(inventory: Path) -> list[tuple[Path, list[str]]]:
    """Each file of ``inventory`` that holds vaulted values, with their names (none for a file
    encrypted whole, whose names cannot be read without the password)."""
    found: list[tuple[Path, list[str]]] = []
    for path in inventory_files(inventory):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if text.lstrip().startswith(VAULT_HEADER):
            found.append((path, []))
        elif "!vault" in text:
            names = list(_vaulted_names(load(path)))  # (a file YAML cannot read: none)
            if names:
                found.append((path, names))
    return found


def password_given(config: Path, environ: dict[str, str] | None = None) -> bool:
    """Whether ansible gets a vault password without a prompt: the environment or the
    ``[defaults]`` of the ansible.cfg the runs use."""
    environ = dict(os.environ) if environ is None else environ
    if any(environ.get(name) for name in PASSWORD_ENVIRONMENT):
        return True
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(config, encoding="utf-8")
    except configparser.Error:
        return False
    return any(parser.get("defaults", name, fallback="").strip() for name in PASSWORD_SETTINGS)


def vault_problem(
    inventory: Path, config: Path, environ: dict[str, str] | None = None
) -> str | None:
    """Why the run would stop at the first vaulted value, or None."""
    found = vaulted(inventory)
    if not found or password_given(config, environ):
        return None
    where = "; ".join(
        f"{path}: {', '.join(names)}" if names else f"{path} (encrypted whole)"
        for path, names in found
    )
    return (
        f"the inventory holds values encrypted with ansible-vault ({where}) and no vault"
        " password is given: write the password in a file only you can read and set"
        " ANSIBLE_VAULT_PASSWORD_FILE to its path (or ANSIBLE_VAULT_IDENTITY_LIST, or"
        " vault_password_file in ansible.cfg)"
    )
