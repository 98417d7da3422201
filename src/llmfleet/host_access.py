"""How this machine runs a long-lived command on an inventory's host by itself (``llmfleet logs
--follow`` streams ``journalctl -f``): the host's SSH settings as Ansible resolves them from the
inventory (address, port, user, key, extra SSH arguments, sudo), turned into an ``ssh`` command
line. Ansible cannot stream a command's output while it runs; ssh can.

The CLI's one seam onto ansible-core's Python API (InventoryManager, VariableManager,
DataLoader, Templar: no public plugin API, tested with the ansible-core that pyproject.toml
pins); the collection's plugins have theirs in plugins/plugin_utils/_ansible_internals.py
(tests/quality/test_gates.py holds both)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ansible.inventory.manager import InventoryManager  # type: ignore[import-untyped]
from ansible.parsing.dataloader import DataLoader  # type: ignore[import-untyped]
from ansible.template import Templar  # type: ignore[import-untyped]
from ansible.vars.manager import VariableManager  # type: ignore[import-untyped]

SSH_CONNECTIONS = ("ssh", "smart", "paramiko", "paramiko_ssh", "ansible.builtin.ssh")
LOCAL_CONNECTIONS = ("local", "ansible.builtin.local")


class HostAccessError(RuntimeError):
    """A host this machine cannot reach by itself (a connection other than SSH or local)."""


@dataclass(frozen=True)
class HostAccess:
    """What runs a command on one host: ``ssh`` arguments before the remote command (empty for
    the local connection) and the sudo to prefix (empty when none is needed)."""

    host: str
    ssh: tuple[str, ...]
    sudo: tuple[str, ...]

    def command(self, argv: list[str]) -> list[str]:
        """The local argv that runs ``argv`` on the host."""
        remote = [*self.sudo, *argv]
        if not self.ssh:
            return remote
        return [*self.ssh, shlex.join(remote)]


def _ssh_argv(host: str, settings: dict[str, Any]) -> tuple[str, ...]:
    argv = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]
    if settings.get("ansible_port"):
        argv += ["-p", str(settings["ansible_port"])]
    if settings.get("ansible_user"):
        argv += ["-l", str(settings["ansible_user"])]
    if settings.get("ansible_ssh_private_key_file"):
        argv += ["-i", str(Path(str(settings["ansible_ssh_private_key_file"])).expanduser())]
    for key in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
        if settings.get(key):
            argv += shlex.split(str(settings[key]))
    return (*argv, str(settings.get("ansible_host") or host))


def _sudo(settings: dict[str, Any]) -> tuple[str, ...]:
    if not settings.get("ansible_become"):
        return ()
    method = str(settings.get("ansible_become_method") or "sudo")
    if method not in ("sudo", "ansible.builtin.sudo"):
        raise HostAccessError(f"become method {method}: only sudo is supported here")
    become_user = str(settings.get("ansible_become_user") or "root")
    if become_user == "root" and settings.get("ansible_user") == "root":
        return ()
    return ("sudo", "-n", "-u", become_user) if become_user != "root" else ("sudo", "-n")


KEYS = (
    "ansible_connection",
    "ansible_host",
    "ansible_port",
    "ansible_user",
    "ansible_ssh_private_key_file",
    "ansible_ssh_common_args",
    "ansible_ssh_extra_args",
    "ansible_become",
    "ansible_become_method",
    "ansible_become_user",
)


def host_accesses(inventory: Path, hosts: list[str]) -> dict[str, HostAccess]:
    """Each host's access, from the inventory's variables as Ansible templates them. Raises
    HostAccessError for a host that is neither reached over SSH nor local."""
    loader = DataLoader()
    manager = InventoryManager(loader=loader, sources=[str(inventory)])
    variables = VariableManager(loader=loader, inventory=manager)
    accesses = {}
    for name in hosts:
        host = manager.get_host(name)
        if host is None:
            raise HostAccessError(f"{name} is not in {inventory}")
        host_vars = variables.get_vars(host=host)
        templar = Templar(loader=loader, variables=host_vars)
        settings = {key: templar.template(host_vars[key]) for key in KEYS if key in host_vars}
        connection = str(settings.get("ansible_connection") or "ssh")
        try:
            sudo = _sudo(settings)
        except HostAccessError as exc:
            raise HostAccessError(f"{name}: {exc}") from None
        if connection in LOCAL_CONNECTIONS:
            accesses[name] = HostAccess(name, (), sudo)
        elif connection in SSH_CONNECTIONS:
            accesses[name] = HostAccess(name, _ssh_argv(name, settings), sudo)
        else:
            raise HostAccessError(
                f"{name} is reached with the connection {connection}; following its logs "
                "needs SSH (or the local connection)"
            )
    return accesses
