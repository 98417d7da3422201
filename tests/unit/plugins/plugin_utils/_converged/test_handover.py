"""plugin_utils/_converged/handover: what the callback hands over to the record's action, a file
per host in an owner-only folder, read back as written; a host none of whose tasks managed
anything known still learns the run and the hosts that failed; no folder, no hand-over."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._converged.handover import (
    HANDOVER_ENV,
    read_handover,
    write_handover,
)

ITEMS = {
    "spark-1": {"files": ["/etc/a"], "units": ["llmfleet-vllm.service"]},
    "spark-2": {"containers": [{"name": "llmfleet-vllm", "engine": "docker"}]},
}


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_what_is_written_is_read_back_owner_only(tmp_path: Path) -> None:
    folder = tmp_path / "handover"
    folder.mkdir(mode=0o755)
    write_handover(str(folder), "r1", ITEMS, ["gh200-1"])
    assert mode_of(folder) == 0o700
    files = sorted(folder.iterdir())
    assert [p.name for p in files] == [".run.json", "spark-1.json", "spark-2.json"]
    assert all(mode_of(p) == 0o600 for p in files)
    environ = {HANDOVER_ENV: str(folder)}
    for host, items in ITEMS.items():
        assert read_handover(host, environ) == {
            "run": "r1",
            "failed_hosts": ["gh200-1"],
            "items": items,
        }


def test_a_host_without_items_learns_the_run(tmp_path: Path) -> None:
    write_handover(str(tmp_path), "r1", ITEMS, [])
    assert read_handover("claude-client-1", {HANDOVER_ENV: str(tmp_path)}) == {
        "run": "r1",
        "failed_hosts": [],
        "items": {},
    }


def test_a_second_hand_over_replaces_the_first(tmp_path: Path) -> None:
    write_handover(str(tmp_path), "r1", ITEMS, ["spark-2"])
    write_handover(str(tmp_path), "r2", {"spark-1": {"files": ["/etc/b"]}}, [])
    assert read_handover("spark-1", {HANDOVER_ENV: str(tmp_path)}) == {
        "run": "r2",
        "failed_hosts": [],
        "items": {"files": ["/etc/b"]},
    }
    assert json.loads((tmp_path / ".run.json").read_text()) == {"run": "r2", "failed_hosts": []}


def test_a_host_name_never_leaves_the_folder(tmp_path: Path) -> None:
    write_handover(str(tmp_path), "r1", {"../spark-1": {"files": ["/etc/a"]}}, [])
    assert sorted(p.name for p in tmp_path.iterdir()) == [".._spark-1.json", ".run.json"]
    assert read_handover("../spark-1", {HANDOVER_ENV: str(tmp_path)})["items"] == {
        "files": ["/etc/a"]
    }


def test_without_a_folder_nothing_was_handed_over(tmp_path: Path) -> None:
    assert read_handover("spark-1", {}) is None
    assert read_handover("spark-1", {HANDOVER_ENV: ""}) is None
    assert read_handover("spark-1", {HANDOVER_ENV: str(tmp_path / "gone")}) is None


def test_the_process_environment_is_read_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_handover(str(tmp_path), "r1", ITEMS, [])
    monkeypatch.setenv(HANDOVER_ENV, str(tmp_path))
    assert read_handover("spark-1")["items"] == ITEMS["spark-1"]
    monkeypatch.delenv(HANDOVER_ENV)
    assert read_handover("spark-1") is None
