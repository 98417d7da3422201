"""llmfleet.host_access: the ssh command line that reaches a host the way the inventory says
Ansible reaches it (address, port, user, key, SSH arguments, sudo), templated like Ansible
templates it; the local connection; connections ssh cannot stand in for are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmfleet.host_access import HostAccessError, host_accesses

INVENTORY = """\
all:
  vars:
    ansible_user: nvidia
    ansible_become: true
    fabric_port: 2222
  children:
    sparks:
      hosts:
        spark-1:
          ansible_host: 192.0.2.11
          ansible_port: "{{ fabric_port }}"
          ansible_ssh_private_key_file: ~/.ssh/spark
          ansible_ssh_common_args: -o StrictHostKeyChecking=yes -o 'UserKnownHostsFile=/k h'
        spark-2:
          ansible_user: root
        controller:
          ansible_connection: local
          ansible_become: false
        node-in-podman:
          ansible_connection: containers.podman.podman
"""


@pytest.fixture
def inventory(tmp_path: Path) -> Path:
    path = tmp_path / "hosts.yml"
    path.write_text(INVENTORY)
    return path


def test_ssh_with_the_inventorys_settings_and_sudo(inventory: Path) -> None:
    access = host_accesses(inventory, ["spark-1"])["spark-1"]
    argv = access.command(["journalctl", "--follow", "--unit=llmfleet-vllm.service"])
    assert argv[:5] == ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]
    assert argv[5:9] == ["-p", "2222", "-l", "nvidia"]
    assert argv[9] == "-i" and argv[10] == str(Path("~/.ssh/spark").expanduser())
    assert argv[11:15] == ["-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=/k h"]
    assert argv[15:] == [
        "192.0.2.11",
        "sudo -n journalctl --follow --unit=llmfleet-vllm.service",
    ]


def test_root_needs_no_sudo_and_the_name_is_the_address(inventory: Path) -> None:
    access = host_accesses(inventory, ["spark-2"])["spark-2"]
    assert access.command(["true"])[-2:] == ["spark-2", "true"]
    assert access.sudo == ()


def test_the_local_connection_runs_the_command_here(inventory: Path) -> None:
    assert host_accesses(inventory, ["controller"])["controller"].command(["true"]) == ["true"]


def test_a_connection_ssh_cannot_stand_in_for_is_refused(inventory: Path) -> None:
    with pytest.raises(HostAccessError, match="node-in-podman is reached with the connection"):
        host_accesses(inventory, ["node-in-podman"])
    with pytest.raises(HostAccessError, match="spark-9 is not in"):
        host_accesses(inventory, ["spark-9"])
