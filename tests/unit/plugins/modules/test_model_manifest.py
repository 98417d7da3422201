"""modules/model_manifest: the source host's manifest, verification on the other hosts,
fail_on_bad's message, check and diff mode, in-process and through `ansible`."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.modules import model_manifest

from tests.unit.plugins.conftest import ansible_adhoc
from tests.unit.plugins.module_utils._model.test_manifest import (
    CONTENT,
    flip_byte,
    make_model,
    reference,
    sha256,
)

RunModule = Callable[..., tuple[int, dict[str, Any]]]
RETURN_KEYS = {
    "path",
    "mode",
    "files",
    "ok",
    "missing",
    "bad",
    "removed",
    "taken_back",
    "hashed",
    "extra",
    "bytes_total",
    "bytes_needed",
    "free_bytes",
    "verified",
    "previous_source",
    "changed",
}


@pytest.fixture
def source(tmp_path: Path) -> Path:
    return make_model(tmp_path / "source" / "m")


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    return make_model(tmp_path / "copy" / "m")


def test_source_host_builds_the_manifest_and_a_rerun_is_cheap(
    source: Path, tmp_path: Path, run_module: RunModule
) -> None:
    state = tmp_path / "state" / "m.json"
    args = {
        "path": str(source),
        "state_file": str(state),
        "source": {"repo": "org/m", "revision": "main"},
    }
    rc, first = run_module(model_manifest, args)
    assert rc == 0, first
    assert set(first) >= RETURN_KEYS
    assert first["files"] == reference()
    assert first["changed"] is True
    assert first["hashed"] == sorted(CONTENT)
    assert stat.S_IMODE(state.stat().st_mode) == 0o644
    assert json.loads(state.read_text())["source"] == {"repo": "org/m", "revision": "main"}

    rc, again = run_module(model_manifest, args)
    assert rc == 0, again
    assert (again["changed"], again["hashed"], again["files"]) == (False, [], first["files"])
    assert (first["previous_source"], again["previous_source"]) == (None, args["source"])


def test_other_host_verifies_against_the_source_manifest(
    copy: Path, tmp_path: Path, run_module: RunModule
) -> None:
    args = {"path": str(copy), "files": reference(), "state_file": str(tmp_path / "s.json")}
    rc, first = run_module(model_manifest, args)
    assert rc == 0, first
    assert (first["verified"], first["changed"], first["ok"]) == (True, True, sorted(CONTENT))
    flip_byte(copy / "model-00001-of-00002.safetensors")
    rc, second = run_module(model_manifest, args)
    assert rc == 0, second
    assert second["hashed"] == ["model-00001-of-00002.safetensors"]
    assert [b["path"] for b in second["bad"]] == ["model-00001-of-00002.safetensors"]
    assert second["verified"] is False
    # Said where a user looks (the run's warnings), by file and reason.
    warnings = json.dumps(second["warnings"])
    assert f"{copy}/model-00001-of-00002.safetensors: sha256 " in warnings, warnings
    assert "; left as it is" in warnings, warnings
    args["remove_bad"] = True
    rc, third = run_module(model_manifest, args)
    assert "; removed, to be copied again" in json.dumps(third["warnings"]), third


def test_fail_on_bad_names_each_file_and_why(
    copy: Path, tmp_path: Path, run_module: RunModule
) -> None:
    flip_byte(copy / "model-00002-of-00002.safetensors")
    (copy / "tokenizer" / "tokenizer.json").unlink()
    rc, result = run_module(
        model_manifest,
        {
            "path": str(copy),
            "files": reference(),
            "state_file": str(tmp_path / "s.json"),
            "fail_on_bad": True,
            "remove_bad": True,
        },
    )
    assert rc == 1
    expected = sha256(CONTENT["model-00002-of-00002.safetensors"])
    assert result["msg"].startswith(f"2 of 4 model file(s) in {copy} failed verification (quick): ")
    assert "model-00002-of-00002.safetensors: sha256 " in result["msg"]
    assert f"expected {expected[:12]}...; tokenizer/tokenizer.json: missing" in result["msg"]
    assert result["removed"] == ["model-00002-of-00002.safetensors"]
    assert not (copy / "model-00002-of-00002.safetensors").exists()
    assert result["missing"] == ["tokenizer/tokenizer.json"]


def test_check_mode_with_diff_writes_nothing(
    copy: Path, tmp_path: Path, run_module: RunModule
) -> None:
    (copy / "config.json").write_bytes(b"{}")
    state = tmp_path / "state" / "m.json"
    rc, result = run_module(
        model_manifest,
        {
            "path": str(copy),
            "files": reference(),
            "state_file": str(state),
            "remove_bad": True,
            "_ansible_check_mode": True,
            "_ansible_diff": True,
        },
    )
    assert rc == 0, result
    assert result["changed"] is True
    assert result["removed"] == ["config.json"]
    assert (copy / "config.json").exists()
    assert not state.parent.exists()
    state_diff, removed_diff = result["diff"]
    assert state_diff["before"] == ""
    assert "  tokenizer/tokenizer.json\n" in state_diff["after"]
    assert "config.json" not in state_diff["after"]
    assert removed_diff["before"] == "config.json\n"


def test_inspect_before_the_copy(tmp_path: Path, run_module: RunModule) -> None:
    rc, result = run_module(
        model_manifest,
        {"path": str(tmp_path / "models" / "m"), "files": reference(), "mode": "inspect"},
    )
    assert rc == 0, result
    assert result["changed"] is False
    assert result["bytes_needed"] == result["bytes_total"] == 8043
    assert result["free_bytes"] > 0
    assert result["missing"] == sorted(CONTENT)
    assert "diff" not in result


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (
            {"files": [{"path": "../etc/shadow", "size": 1}]},
            ["files[0]", "../etc/shadow", "without '..'"],
        ),
        (
            {"files": [{"path": "a", "size": 1}, {"path": "a", "size": 2}]},
            ["files[1]", "a is listed twice"],
        ),
        ({"files": [{"path": "a"}]}, ["size"]),
        ({"mode": "full", "state_file": None}, ["state_file"]),
    ],
)
def test_bad_arguments_fail_clearly(
    copy: Path, tmp_path: Path, run_module: RunModule, args: dict[str, Any], needles: list[str]
) -> None:
    rc, result = run_module(
        model_manifest, {"path": str(copy), "state_file": str(tmp_path / "s.json"), **args}
    )
    assert rc == 1, result
    for needle in needles:
        assert needle in result["msg"]


def test_an_unwritable_state_file_fails_with_its_path(
    copy: Path, tmp_path: Path, run_module: RunModule
) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where a folder should be")
    rc, result = run_module(
        model_manifest, {"path": str(copy), "state_file": str(blocker / "s.json")}
    )
    assert rc == 1
    assert result["msg"].startswith(f"cannot write the state file {blocker / 's.json'}: ")
    assert str(blocker) in result["msg"]


def test_end_to_end(source: Path, tmp_path: Path) -> None:
    state = tmp_path / "s.json"
    status, result = ansible_adhoc(
        "llmfleet.cluster.model_manifest", f"path={source} state_file={state} mode=full"
    )
    assert status.startswith("CHANGED"), result
    assert result["files"] == reference()
    assert os.path.exists(state)
