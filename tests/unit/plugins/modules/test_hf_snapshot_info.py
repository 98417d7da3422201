"""modules/hf_snapshot_info against the lab's Hub (a subprocess): the revision and its files,
the patterns, config.json (read_config), check mode, the hub's errors and the token,
in-process and through `ansible`."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("huggingface_hub")

from ansible_collections.llmfleet.cluster.plugins.module_utils._model import (
    hf_snapshot as _hf_snapshot,
)
from ansible_collections.llmfleet.cluster.plugins.modules import hf_snapshot_info

from tests.unit.plugins.conftest import ansible_adhoc
from tests.unit.plugins.fake_llm_server import free_port
from tests.unit.plugins.lab_hub import (
    BAD_CONFIG_REPO_ID,
    NO_CONFIG_REPO_ID,
    REPO_ID,
    TOKEN,
    LabHub,
    git_blob_sha1,
    model_files,
)

RunModule = Callable[..., tuple[int, dict[str, Any]]]
FILES = model_files()
PATHS = sorted(FILES)
CONFIG = json.loads(FILES["config.json"])


@pytest.fixture
def hub(lab_hubs: dict[str, LabHub]) -> LabHub:
    return lab_hubs["open"]


def args(hub: LabHub, **more: Any) -> dict[str, Any]:
    return {"repo_id": REPO_ID, "endpoint": hub.url, **more}


def test_reads_the_revision(hub: LabHub, run_module: RunModule) -> None:
    gets = len(hub.file_gets())
    rc, result = run_module(hf_snapshot_info, args(hub))
    assert rc == 0, result
    assert result["changed"] is False
    assert "warnings" not in result, result["warnings"]
    assert set(result) - {"changed", "invocation"} == {
        "repo_id",
        "endpoint",
        "requested_revision",
        "revision",
        "files",
        "total_bytes",
        "config",
    }
    assert result["repo_id"] == REPO_ID
    assert result["revision"] == hub.commit
    assert result["requested_revision"] == "main"
    assert result["endpoint"] == hub.url
    files = {entry["path"]: entry for entry in result["files"]}
    assert [entry["path"] for entry in result["files"]] == PATHS
    weights = FILES["model.safetensors"]
    assert files["model.safetensors"]["sha256"] == hashlib.sha256(weights).hexdigest()
    assert files["model.safetensors"]["size"] == len(weights)
    assert files["config.json"] == {
        "path": "config.json",
        "size": len(FILES["config.json"]),
        "sha256": None,
        "git_sha1": git_blob_sha1(FILES["config.json"]),
    }
    assert result["total_bytes"] == sum(len(content) for content in FILES.values())
    assert result["config"] == {}  # read_config is false
    assert len(hub.file_gets()) == gets  # nothing downloaded


def test_patterns_select_as_snapshot_download_does(hub: LabHub, run_module: RunModule) -> None:
    rc, result = run_module(
        hf_snapshot_info, args(hub, revision=hub.commit, allow_patterns=["*.json", "extra/*"])
    )
    assert rc == 0, result
    assert result["revision"] == hub.commit
    assert [f["path"] for f in result["files"]] == [
        "config.json",
        "extra/notes.md",
        "tokenizer.json",
    ]
    rc, result = run_module(hf_snapshot_info, args(hub, ignore_patterns=["*.json"]))
    assert [f["path"] for f in result["files"]] == [
        ".gitattributes",
        "extra/notes.md",
        "model.safetensors",
    ]


def test_read_config_returns_config_json_at_the_commit(hub: LabHub, run_module: RunModule) -> None:
    gets = len(hub.file_gets())
    rc, result = run_module(hf_snapshot_info, args(hub, read_config=True))
    assert rc == 0, result
    assert result["changed"] is False
    assert result["config"] == CONFIG
    assert [f["path"] for f in result["files"]] == PATHS
    new_gets = hub.file_gets()[gets:]
    assert len(new_gets) == 1, new_gets  # config.json only, at the resolved commit
    assert f"/resolve/{hub.commit}/config.json" in new_gets[0]


def test_read_config_works_in_check_mode(hub: LabHub, run_module: RunModule) -> None:
    rc, result = run_module(hf_snapshot_info, args(hub, read_config=True, _ansible_check_mode=True))
    assert rc == 0, result
    assert (result["changed"], result["config"]) == (False, CONFIG)


@pytest.mark.parametrize(
    ("repo_id", "more"),
    [
        (NO_CONFIG_REPO_ID, {}),  # the repository has none
        (REPO_ID, {"allow_patterns": ["*.safetensors"]}),  # the patterns leave it out
    ],
)
def test_read_config_without_config_json_gives_an_empty_dict(
    hub: LabHub, run_module: RunModule, repo_id: str, more: dict[str, Any]
) -> None:
    gets = len(hub.file_gets())
    rc, result = run_module(hf_snapshot_info, args(hub, repo_id=repo_id, read_config=True, **more))
    assert rc == 0, result
    assert result["revision"] == hub.commit_of(repo_id)
    assert "config.json" not in [f["path"] for f in result["files"]]
    assert result["config"] == {}
    assert len(hub.file_gets()) == gets


def test_read_config_fails_on_config_json_that_is_not_json(
    hub: LabHub, run_module: RunModule
) -> None:
    rc, result = run_module(
        hf_snapshot_info, args(hub, repo_id=BAD_CONFIG_REPO_ID, read_config=True)
    )
    assert rc == 1
    assert result["failed"] is True
    commit = hub.commit_of(BAD_CONFIG_REPO_ID)
    assert result["msg"].startswith(
        f"config.json of {BAD_CONFIG_REPO_ID} at revision 'main' ({commit}) is not valid JSON: "
    )
    assert (result["repo_id"], result["revision"]) == (BAD_CONFIG_REPO_ID, "main")

    rc, result = run_module(hf_snapshot_info, args(hub, repo_id=BAD_CONFIG_REPO_ID))
    assert (rc, result["config"]) == (0, {})  # not read, not checked


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"revision": "v9"}, f"revision 'v9' of {REPO_ID} not found on http://"),
        ({"repo_id": "llmfleet/none"}, "repository llmfleet/none not found on http://"),
    ],
)
def test_hub_errors_name_repo_and_revision(
    hub: LabHub, run_module: RunModule, change: dict[str, str], message: str
) -> None:
    rc, result = run_module(hf_snapshot_info, {**args(hub, read_config=True), **change})
    assert rc == 1
    assert message in result["msg"]


def test_unreachable_endpoint(run_module: RunModule) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    rc, result = run_module(hf_snapshot_info, {"repo_id": REPO_ID, "endpoint": endpoint})
    assert rc == 1
    assert f"the hub at {endpoint} is unreachable" in result["msg"]


def test_token_is_required_used_and_never_shown(
    lab_hubs: dict[str, LabHub], run_module: RunModule, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    hub = lab_hubs["token"]
    rc, result = run_module(hf_snapshot_info, args(hub, read_config=True))
    assert rc == 1
    assert "wants a token" in result["msg"]
    assert "HTTP 401" in result["msg"]

    rc, result = run_module(hf_snapshot_info, args(hub, token="hf_notTheRightOne"))
    assert rc == 1
    assert "refused the token" in result["msg"]
    assert "hf_notTheRightOne" not in json.dumps(result)

    gets = len(hub.file_gets())
    rc, result = run_module(hf_snapshot_info, args(hub, read_config=True, token=TOKEN))
    assert rc == 0, result
    assert result["revision"] == hub.commit
    assert result["config"] == CONFIG
    assert len(hub.file_gets()) == gets + 1  # config.json, with the token
    assert TOKEN not in json.dumps(result)


def test_missing_library_is_named(run_module: RunModule, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_hf_snapshot, "HUB_IMPORT_ERROR", "Traceback: No module named x")
    rc, result = run_module(hf_snapshot_info, {"repo_id": REPO_ID})
    assert rc == 1
    assert "huggingface_hub" in result["msg"]


def test_through_ansible_with_a_token(lab_hubs: dict[str, LabHub]) -> None:
    hub = lab_hubs["token"]
    status, result = ansible_adhoc(
        "llmfleet.cluster.hf_snapshot_info",
        f"repo_id={REPO_ID} endpoint={hub.url} read_config=true token={TOKEN}",
    )
    assert status == "SUCCESS", result
    assert result["revision"] == hub.commit
    assert result["config"] == CONFIG
    assert TOKEN not in json.dumps(result)
