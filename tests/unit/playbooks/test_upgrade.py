"""playbooks/upgrade.yml's first play on the sample inventories, connected locally: with no
history of what a host serves (none on this machine), every serving host is refused by name
before anything runs, whatever the topology. The switch itself is proven on the lab
(tests/lab/test_lab_upgrade.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
HISTORY = Path("/var/lib/llmfleet/history.json")


@pytest.mark.skipif(HISTORY.exists(), reason="this machine has a history of what it serves")
@pytest.mark.parametrize(
    ("inventory", "hosts"),
    [
        pytest.param("inventory/sparks", ["spark-1", "spark-2"], id="sparks"),
        pytest.param("inventory/gh200", ["gh200-1"], id="gh200"),
    ],
)
def test_a_host_without_a_history_is_refused_by_name(inventory: str, hosts: list[str]) -> None:
    proc = subprocess.run(
        [
            "ansible-playbook", "playbooks/upgrade.yml", "-i", inventory,
            "-e", json.dumps({
                "ansible_connection": "local",
                "ansible_python_interpreter": sys.executable,
                "vault_llmfleet_api_key": "unit-test-key-0123456789abcdef",
                "llmfleet_upgrade_profile": "tiny_lab",
            }),
        ],
        capture_output=True, text=True, timeout=300, check=False, cwd=ROOT,
    )  # fmt: skip
    out = " ".join(proc.stdout.split())
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-2000:]
    for host in hosts:
        assert f"{host}: it has no record of what it serves ({HISTORY})" in out, out[-3000:]
    assert "PLAY [Check the whole inventory" not in out
