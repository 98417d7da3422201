"""playbooks/report.yml shows, per serving host, one line per container of the node's image
record (what gpu_container wrote), and nothing where there is no record (native)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DIGEST = "sha256:" + "0123456789abcdef" * 4
IMAGE = "sha256:" + "fedcba9876543210" * 4


def report(tmp_path: Path, record: str | None) -> str:
    record_file = tmp_path / "images.json"
    if record is not None:
        record_file.write_text(record)
    inventory = tmp_path / "hosts.json"
    inventory.write_text(
        json.dumps(
            {
                "gh200": {
                    "hosts": {
                        "gh200-1": {
                            "ansible_connection": "local",
                            "ansible_python_interpreter": sys.executable,
                            "gpu_container_record_file": str(record_file),
                        }
                    }
                }
            }
        )
    )
    proc = subprocess.run(
        ["ansible-playbook", "playbooks/report.yml", "-i", str(inventory)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
        # Its plays name sparks and claude_clients too, which this inventory lacks (the
        # repository's ansible.cfg says the same; ansible-test units runs without it).
        env={**os.environ, "ANSIBLE_HOST_PATTERN_MISMATCH": "ignore"},
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    return " ".join(output.split())


def test_each_container_of_the_record_is_one_line(tmp_path: Path) -> None:
    record = {
        "version": 1,
        "containers": {
            "llmfleet-vllm": {
                "reference": f"vllm/vllm-openai:v0.11.0@{DIGEST}",
                "image_id": IMAGE,
                "repo_digests": [f"vllm/vllm-openai@{DIGEST}"],
            }
        },
    }
    output = report(tmp_path, json.dumps(record))
    assert (
        f"gh200-1: llmfleet-vllm runs vllm/vllm-openai:v0.11.0@{DIGEST} (image {IMAGE})" in output
    )


def test_no_record_shows_nothing(tmp_path: Path) -> None:
    output = report(tmp_path, None)
    assert not re.search(r"gh200-1: \S+ runs ", output), output
    assert re.search(r"gh200-1\s+: ok=\d+ changed=0 unreachable=0 failed=0", output), output
