"""The lab's Hugging Face Hub (``llmfleet-lab-hub``, an emulator of the lab image) for tests.

``write_model_repo`` lays out a small model repo (a config, a tokenizer, a few KB of
``model.safetensors``, a file in a subfolder, and a ``.cache`` folder the server must
skip), and ``other_repos`` two more (one without a config.json, one whose config.json
is not JSON); ``start_hub`` runs the server over them as a subprocess of this Python on a free
port of 127.0.0.1, optionally with a token file, and reads the commit sha it announces.
Its request log (stderr) goes to a file the tests read to see what a client asked for.

The server lives in the checkout's ``src/``, which ``ansible-test units`` (a copy of the
collection) does not have: there ``hub_script`` skips the tests that need it.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

HUB_SCRIPT = (
    Path(__file__).resolve().parents[3]
    / "lab/src/llmfleet_lab/assets/image/emulators/llmfleet-lab-hub"
)
REPO_ID = "llmfleet/tiny-hub"
TOKEN = "hf_labTestToken0123456789"  # a test value, never a real token
NO_CONFIG_REPO_ID = "llmfleet/tiny-no-config"
BAD_CONFIG_REPO_ID = "llmfleet/tiny-bad-config"
BAD_CONFIG = b'{"model_type": "llama",'  # cut short


def model_files() -> dict[str, bytes]:
    """Path in the repo -> content; the weights are 40 KiB of seeded noise."""
    weights = random.Random(7).randbytes(40 * 1024)
    return {
        ".gitattributes": b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n",
        "config.json": json.dumps({"model_type": "llama", "hidden_size": 64}).encode(),
        "tokenizer.json": json.dumps({"version": "1.0", "vocab": {"a": 0}}).encode(),
        "model.safetensors": weights,
        "extra/notes.md": b"# notes\n",
    }


# Branch "next" of REPO_ID: its config changed, its notes gone (ROOT/<repo>/.branches/next).
NEXT_BRANCH = "next"


def next_files() -> dict[str, bytes]:
    files = {k: v for k, v in model_files().items() if k != "extra/notes.md"}
    config = {"model_type": "llama", "hidden_size": 128}
    return {**files, "config.json": json.dumps(config).encode()}


def other_repos() -> dict[str, dict[str, bytes]]:
    """Repo id -> files of the repos served beside REPO_ID."""
    files = model_files()
    return {
        NO_CONFIG_REPO_ID: {k: v for k, v in files.items() if k != "config.json"},
        BAD_CONFIG_REPO_ID: {**files, "config.json": BAD_CONFIG},
    }


def write_model_repo(
    root: Path, files: dict[str, bytes] | None = None, repo_id: str = REPO_ID
) -> dict[str, bytes]:
    """``root/<repo_id>/...`` with ``files`` (default ``model_files()``), plus a hidden
    ``.cache`` folder that is not part of the repo."""
    files = model_files() if files is None else files
    repo = root / repo_id
    for name, content in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_bytes(content)
    (repo / ".cache").mkdir(exist_ok=True)
    (repo / ".cache" / "leftover.lock").write_bytes(b"not served")
    return files


def git_blob_sha1(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def hub_script() -> Path:
    if not HUB_SCRIPT.is_file():
        pytest.skip("the lab's Hub server (lab/src/llmfleet_lab/...) is not in this copy")
    return HUB_SCRIPT


@dataclass
class LabHub:
    url: str
    commit: str
    banner: list[str]
    log_path: Path
    process: subprocess.Popen[str] = field(repr=False)

    def commit_of(self, repo_id: str, branch: str = "main") -> str:
        """The commit sha the banner announces for ``repo_id``'s ``branch``."""
        found = re.search(
            rf"serving {re.escape(repo_id)} {branch}=([0-9a-f]{{40}})", "\n".join(self.banner)
        )
        assert found, self.banner
        return found[1]

    def log(self) -> list[str]:
        return self.log_path.read_text(encoding="utf-8").splitlines()

    def file_gets(self) -> list[str]:
        """The request lines of every file download (GET .../resolve/...) so far."""
        return [line for line in self.log() if re.search(r'"GET /\S+/resolve/', line)]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)
        if self.process.stdout is not None:
            self.process.stdout.close()


def start_hub(root: Path, log_path: Path, token_file: Path | None = None) -> LabHub:
    """The server over ``root`` on a free port; returns once it listens."""
    cmd = [sys.executable, str(hub_script()), "--root", str(root), "--host", "127.0.0.1"]
    cmd += ["--port", "0"]
    if token_file is not None:
        cmd += ["--token-file", str(token_file)]
    with log_path.open("w", encoding="utf-8") as log:
        process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
    assert process.stdout is not None
    banner: list[str] = []
    while not (banner and banner[-1].startswith("listening on ")):
        line = process.stdout.readline()
        if not line:  # it exited
            process.wait(timeout=5)
            raise AssertionError(f"the hub did not start: {banner}\n{log_path.read_text()}")
        banner.append(line.strip())
    url = re.search(r"http://\S+", banner[-1])
    commit = re.search(rf"serving {REPO_ID} main=([0-9a-f]{{40}})", "\n".join(banner))
    assert url and commit, banner
    return LabHub(url[0], commit[1], banner, log_path, process)


def hubs(base: Path) -> Iterator[dict[str, LabHub]]:
    """The body of a fixture: an open hub and one that needs ``TOKEN``, over the same repos
    (REPO_ID and ``other_repos()``)."""
    root = base / "hub"
    write_model_repo(root)
    write_model_repo(root, next_files(), f"{REPO_ID}/.branches/{NEXT_BRANCH}")
    for repo_id, files in other_repos().items():
        write_model_repo(root, files, repo_id)
    (base / "token").write_text(TOKEN + "\n", encoding="utf-8")
    started: dict[str, LabHub] = {}
    try:
        started["open"] = start_hub(root, base / "open.log")
        started["token"] = start_hub(root, base / "token.log", token_file=base / "token")
        yield started
    finally:
        for hub in started.values():
            hub.stop()
