"""Fixtures for the CLI tests: a fake collection root with a local-connection inventory."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

ANSIBLE_CFG = """\
[defaults]
host_key_checking = False
interpreter_python = auto_silent
retry_files_enabled = False
"""


@dataclass
class FakeCollection:
    root: Path
    inventory: Path

    def write_site(self, text: str) -> Path:
        site = self.root / "site.yml"
        site.write_text(text, encoding="utf-8")
        return site


@pytest.fixture
def fake_collection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeCollection:
    """A collection root in tmp_path (galaxy.yml, site.yml, ansible.cfg), set as LLMFLEET_HOME."""
    root = tmp_path / "collection"
    (root / "playbooks").mkdir(parents=True)
    (root / "galaxy.yml").write_text(
        "namespace: llmfleet\nname: cluster\nversion: 0.0.1\n", encoding="utf-8"
    )
    (root / "site.yml").write_text("- hosts: all\n  gather_facts: false\n  tasks: []\n")
    (root / "ansible.cfg").write_text(ANSIBLE_CFG, encoding="utf-8")
    inventory = root / "hosts.ini"
    inventory.write_text(
        f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("LLMFLEET_HOME", str(root))
    monkeypatch.chdir(tmp_path)
    for var in ("ANSIBLE_CONFIG", "ANSIBLE_INVENTORY", "ANSIBLE_STDOUT_CALLBACK"):
        monkeypatch.delenv(var, raising=False)
    return FakeCollection(root=root, inventory=inventory)


@pytest.fixture
def play() -> Callable[[str], str]:
    """Wrap task YAML (indented 4) into a one-play playbook on all hosts."""

    def make(tasks: str) -> str:
        return "- name: Test play\n  hosts: all\n  gather_facts: false\n  tasks:\n" + tasks

    return make
