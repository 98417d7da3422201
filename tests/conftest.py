"""Shared test settings: the collection root, and the venv's tools on PATH."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Plugins import as the collection does at run time: ansible_collections.llmfleet.cluster.*
sys.path.insert(0, str(ROOT / "collections"))

# Tests call ansible-playbook, ansible-lint, molecule... from the venv running pytest.
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
os.environ.setdefault("ANSIBLE_CONFIG", str(ROOT / "ansible.cfg"))
os.environ.setdefault("ANSIBLE_NOCOLOR", "1")


@pytest.fixture(scope="session")
def collection_root() -> Path:
    return ROOT
