"""modules/hf_snapshot against the lab's Hub (a subprocess): the download, idempotence,
check mode, diff, the hub's errors and the token, in-process and through `ansible`.
Reading without downloading is test_hf_snapshot_info.py's."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("huggingface_hub")

from ansible_collections.llmfleet.cluster.plugins.module_utils._model import (
    hf_snapshot as _hf_snapshot,
)
from ansible_collections.llmfleet.cluster.plugins.modules import hf_snapshot

from tests.unit.plugins.conftest import ansible_adhoc
from tests.unit.plugins.fake_llm_server import free_port
from tests.unit.plugins.lab_hub import REPO_ID, TOKEN, LabHub, model_files

RunModule = Callable[..., tuple[int, dict[str, Any]]]
FILES = model_files()
PATHS = sorted(FILES)


@pytest.fixture
def hub(lab_hubs: dict[str, LabHub]) -> LabHub:
    return lab_hubs["open"]


def args(hub: LabHub, **more: Any) -> dict[str, Any]:
    return {"repo_id": REPO_ID, "endpoint": hub.url, **more}


def test_downloads_then_changes_nothing(hub: LabHub, run_module: RunModule, tmp_path: Path) -> None:
    target = tmp_path / "models" / "tiny"  # parents are created
    rc, result = run_module(hf_snapshot, args(hub, local_dir=str(target)))
    assert rc == 0, result
    assert result["changed"] is True
    assert set(result) - {"changed", "invocation"} == {
        "repo_id",
        "endpoint",
        "requested_revision",
        "revision",
        "files",
        "total_bytes",
        "local_dir",
        "downloaded",
    }
    assert result["downloaded"] == PATHS
    assert result["local_dir"] == str(target)
    assert result["revision"] == hub.commit
    assert [entry["path"] for entry in result["files"]] == PATHS
    assert "diff" not in result
    for name, content in FILES.items():
        assert (target / name).read_bytes() == content, name
    gets = len(hub.file_gets())

    rc, result = run_module(hf_snapshot, args(hub, local_dir=str(target)))
    assert rc == 0, result
    assert result["changed"] is False
    assert result["downloaded"] == []
    assert len(hub.file_gets()) == gets


def test_check_mode_lists_what_is_missing_or_resized(
    hub: LabHub, run_module: RunModule, tmp_path: Path
) -> None:
    target = tmp_path / "model"
    check = args(hub, local_dir=str(target), _ansible_check_mode=True)
    rc, result = run_module(hf_snapshot, check)
    assert rc == 0, result
    assert (result["changed"], result["downloaded"]) == (True, PATHS)
    assert not target.exists()

    run_module(hf_snapshot, args(hub, local_dir=str(target)))
    rc, result = run_module(hf_snapshot, check)
    assert (result["changed"], result["downloaded"]) == (False, [])

    (target / "config.json").write_bytes(b"{}")
    rc, result = run_module(hf_snapshot, check)
    assert (result["changed"], result["downloaded"]) == (True, ["config.json"])
    assert (target / "config.json").read_bytes() == b"{}"

    rc, result = run_module(hf_snapshot, args(hub, local_dir=str(target), _ansible_diff=True))
    assert rc == 0, result
    assert (result["changed"], result["downloaded"]) == (True, ["config.json"])
    assert (target / "config.json").read_bytes() == FILES["config.json"]
    assert result["diff"]["before"] == "config.json: 2\n"
    assert result["diff"]["after"] == f"config.json: {len(FILES['config.json'])}\n"


def test_patterns_limit_the_download(hub: LabHub, run_module: RunModule, tmp_path: Path) -> None:
    rc, result = run_module(
        hf_snapshot, args(hub, local_dir=str(tmp_path), ignore_patterns=["*.safetensors"])
    )
    assert rc == 0, result
    assert "model.safetensors" not in result["downloaded"]
    assert not (tmp_path / "model.safetensors").exists()
    assert (tmp_path / "config.json").is_file()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"revision": "v9"}, f"revision 'v9' of {REPO_ID} not found on http://"),
        ({"revision": "0" * 40}, "no branch, tag or commit has that name"),
        ({"repo_id": "llmfleet/none"}, "repository llmfleet/none not found on http://"),
    ],
)
def test_hub_errors_name_repo_and_revision(
    hub: LabHub, run_module: RunModule, tmp_path: Path, change: dict[str, str], message: str
) -> None:
    rc, result = run_module(hf_snapshot, {**args(hub, local_dir=str(tmp_path)), **change})
    assert rc == 1
    assert result["failed"] is True
    assert message in result["msg"]
    assert list(tmp_path.iterdir()) == []


def test_unreachable_endpoint(run_module: RunModule, tmp_path: Path) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    target = tmp_path / "model"
    rc, result = run_module(
        hf_snapshot, {"repo_id": REPO_ID, "endpoint": endpoint, "local_dir": str(target)}
    )
    assert rc == 1
    assert f"the hub at {endpoint} is unreachable" in result["msg"]
    assert not target.exists()


def test_token_is_used_and_never_shown(
    lab_hubs: dict[str, LabHub],
    run_module: RunModule,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    hub = lab_hubs["token"]
    target = tmp_path / "model"
    rc, result = run_module(hf_snapshot, args(hub, local_dir=str(target)))
    assert rc == 1
    assert "wants a token" in result["msg"]
    assert "HTTP 401" in result["msg"]

    rc, result = run_module(hf_snapshot, args(hub, local_dir=str(target), token="hf_notTheRight"))
    assert rc == 1
    assert "refused the token" in result["msg"]
    assert "hf_notTheRight" not in json.dumps(result)
    assert not target.exists()

    rc, result = run_module(hf_snapshot, args(hub, local_dir=str(target), token=TOKEN))
    assert rc == 0, result
    assert result["downloaded"] == PATHS
    assert TOKEN not in json.dumps(result)
    assert TOKEN not in json.dumps(dict(os.environ))


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"repo_id": REPO_ID}, "missing required arguments: local_dir"),
        ({"repo_id": REPO_ID, "local_dir": "/m", "state": "info"}, "Unsupported parameters"),
    ],
)
def test_local_dir_is_required_and_state_is_gone(
    run_module: RunModule, given: dict[str, str], message: str
) -> None:
    rc, result = run_module(hf_snapshot, given)
    assert rc == 1
    assert message in result["msg"]


def test_missing_library_is_named(
    run_module: RunModule, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(_hf_snapshot, "HUB_IMPORT_ERROR", "Traceback: No module named x")
    rc, result = run_module(hf_snapshot, {"repo_id": REPO_ID, "local_dir": str(tmp_path)})
    assert rc == 1
    assert "huggingface_hub" in result["msg"]


def test_through_ansible_with_a_token(lab_hubs: dict[str, LabHub], tmp_path: Path) -> None:
    hub = lab_hubs["token"]
    status, result = ansible_adhoc(
        "llmfleet.cluster.hf_snapshot",
        f"repo_id={REPO_ID} endpoint={hub.url} local_dir={tmp_path} token={TOKEN}",
    )
    assert status == "CHANGED", result
    assert result["revision"] == hub.commit
    assert result["downloaded"] == PATHS
    assert TOKEN not in json.dumps(result)
