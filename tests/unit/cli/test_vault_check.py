"""llmfleet.vault_check: an inventory's vaulted values and no vault password to open them
stop every command before it runs, naming the variables and how to give the password."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from llmfleet.cli import app
from llmfleet.vault_check import password_given, vault_problem, vaulted

runner = CliRunner()
# `ansible-vault encrypt_string --name vault_llmfleet_api_key ...` writes this shape.
VAULTED = """\
vault_llmfleet_api_key: !vault |
          $ANSIBLE_VAULT;1.1;AES256
          62313365396662343061393464336163383764373764613633653634306231386433626436623361
          6134333665353966363534333632666535333761666131620a663537646436643735383237343531
"""
WHOLE = "$ANSIBLE_VAULT;1.1;AES256\n6231336539666234306139346433616338\n"


@pytest.fixture
def inventory(tmp_path: Path) -> Path:
    folder = tmp_path / "inventory"
    (folder / "group_vars" / "all").mkdir(parents=True)
    (folder / "hosts.yml").write_text("all:\n  hosts:\n    spark-1:\n")
    (folder / "group_vars" / "all" / "api_key.yml").write_text(
        'llmfleet_api_key: "{{ vault_llmfleet_api_key }}"\n'
    )
    (folder / "group_vars" / "all" / "vault.yml").write_text(VAULTED)
    return folder


def test_the_vaulted_variables_are_named_by_file(inventory: Path) -> None:
    (inventory / "group_vars" / "all" / "secrets.yml").write_text(WHOLE)
    (inventory / "host_vars").mkdir()
    (inventory / "host_vars" / "spark-1.yml").write_text(
        "ansible_become_password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  6231\n"
    )
    assert vaulted(inventory) == [
        (inventory / "group_vars" / "all" / "secrets.yml", []),
        (inventory / "group_vars" / "all" / "vault.yml", ["vault_llmfleet_api_key"]),
        (inventory / "host_vars" / "spark-1.yml", ["ansible_become_password"]),
    ]


def test_a_password_from_the_environment_or_ansible_cfg_is_enough(
    inventory: Path, tmp_path: Path
) -> None:
    config = tmp_path / "ansible.cfg"
    config.write_text("[defaults]\nforks = 10\n")
    assert not password_given(config, {})
    assert vault_problem(inventory, config, {}) is not None
    assert password_given(config, {"ANSIBLE_VAULT_PASSWORD_FILE": "/home/me/.vault-pass"})
    assert vault_problem(inventory, config, {"ANSIBLE_VAULT_IDENTITY_LIST": "me@prompt"}) is None
    config.write_text("[defaults]\nvault_password_file = ~/.vault-pass\n")
    assert vault_problem(inventory, config, {}) is None


def test_an_inventory_without_vaulted_values_needs_no_password(
    inventory: Path, tmp_path: Path
) -> None:
    (inventory / "group_vars" / "all" / "vault.yml").write_text("vault_llmfleet_api_key: plain\n")
    assert vault_problem(inventory, tmp_path / "ansible.cfg", {}) is None


@pytest.mark.parametrize("command", ["check", "up", "status", "doctor", "plan", "bench"])
def test_every_command_stops_before_it_runs_and_says_how_to_give_the_password(
    fake_collection: Any, inventory: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    for name in ("ANSIBLE_VAULT_PASSWORD_FILE", "ANSIBLE_VAULT_IDENTITY_LIST"):
        monkeypatch.delenv(name, raising=False)
    for playbook in ("validate", "bench"):  # what these commands look for first
        (fake_collection.root / "playbooks" / f"{playbook}.yml").write_text("[]\n")
    result = runner.invoke(app, [command, "-i", str(inventory)])
    assert result.exit_code == 1, result.output
    said = " ".join(result.output.split())
    assert "group_vars/all/vault.yml: vault_llmfleet_api_key" in said, said
    assert "set ANSIBLE_VAULT_PASSWORD_FILE to its path" in said, said
    # Nothing ran: no run's artifacts.
    assert not (fake_collection.root / "artifacts" / "runs").exists()
