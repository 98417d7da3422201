"""model_weights for real: the hub's files on both nodes, byte for byte, each node's record
of what it verified, and nothing of the copy left running."""

from __future__ import annotations

import hashlib
import json
import os
import urllib.request
from pathlib import Path

MODEL = "/opt/models/llmfleet-tiny"
STATE = "/var/lib/llmfleet/model_weights/opt_models_llmfleet-tiny.json"
FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


def test_the_model_is_in_place(host) -> None:
    for name in FILES:
        assert host.file(f"{MODEL}/{name}").is_file, name


def test_the_record_names_the_hub_commit_and_every_file_hash(host) -> None:
    record = json.loads(host.file(STATE).content_string)
    assert record["source"]["repo"] == "llmfleet/llmfleet-tiny"
    revision = record["source"]["revision"]
    assert len(revision) == 40 and int(revision, 16) >= 0
    for name in FILES:
        entry = record["files"][name]
        actual = host.check_output(f"sha256sum {MODEL}/{name}").split()[0]
        assert entry["sha256"] == actual, name
        assert entry["size"] == host.file(f"{MODEL}/{name}").size, name


def hub_sha256(name: str) -> str:
    """The file as the lab's Hub serves it (create.yml wrote the Hub's address)."""
    hub = (Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "hub_url").read_text().strip()
    request = urllib.request.Request(  # noqa: S310 - the lab's http:// Hub
        f"{hub}/llmfleet/llmfleet-tiny/resolve/main/{name}",
        headers={"Authorization": "Bearer llmfleet-lab-hub-token"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - same
        return hashlib.sha256(response.read()).hexdigest()


def test_every_node_holds_the_hubs_bytes(host) -> None:
    for name in FILES:
        assert host.check_output(f"sha256sum {MODEL}/{name}").split()[0] == hub_sha256(name), name


def test_nothing_of_the_copy_is_left(host) -> None:
    assert not host.file("/run/llmfleet-model-weights").exists
    state = host.run("systemctl is-active llmfleet-model-weights-rsyncd").stdout.strip()
    assert state in ("inactive", "unknown", "failed") or state == "", state
    assert host.run("ss -ltn 'sport = :8730'").stdout.count("LISTEN") == 0
