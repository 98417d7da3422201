"""modules/deployment_history: switches recorded on the node with their time (folders 0755,
file 0644, written only when an entry is appended), a second `llmfleet up` recording nothing,
what runs now after a rollback or a failure, the images to keep, the oldest entries dropped,
a foreign file refused by a read and replaced (with a warning) by a record, check and diff
mode, and through `ansible`."""

from __future__ import annotations

import json
import stat
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.modules import deployment_history

from tests.unit.plugins.conftest import ansible_adhoc

RunModule = Callable[..., tuple[int, dict[str, Any]]]
V10 = {
    "image": f"vllm/vllm-openai:v0.10.2@sha256:{'a' * 64}",
    "profile": "qwen3_32b",
    "model_revision": "r1",
}
V11 = {**V10, "image": f"vllm/vllm-openai:v0.11.0@sha256:{'b' * 64}"}
V12 = {**V10, "image": f"vllm/vllm-openai:v0.12.0@sha256:{'c' * 64}"}
NATIVE = {**V10, "image": None}
MOMENT = datetime(2025, 11, 24, 7, 13, 5, tzinfo=UTC)


@pytest.fixture(autouse=True)
def fixed_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deployment_history, "utc_now", lambda: MOMENT)


def recorded(path: Path, action: str, to: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"path": str(path), "state": "recorded", "action": action, "to_state": to, **more}


def test_up_is_recorded_once_with_only_if_different(tmp_path: Path, run_module: RunModule) -> None:
    path = tmp_path / "var" / "lib" / "llmfleet" / "history.json"
    args = recorded(path, "up", V11, only_if_different=True)
    rc, first = run_module(deployment_history, args)
    assert rc == 0, first
    entry = {
        "time": "2025-11-24T07:13:05Z",
        "action": "up",
        "from": None,
        "to": V11,
        "outcome": "ok",
        "reason": None,
    }
    assert first["changed"] is True
    assert (first["entry"], first["history"], first["current"]) == (entry, [entry], V11)
    assert (first["current_uncertain"], first["images_to_keep"]) == (False, [V11["image"]])
    assert first["path"] == str(path)
    assert json.loads(path.read_text()) == {"version": 1, "entries": [entry]}
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    for folder in (path.parent, path.parent.parent, path.parent.parent.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o755
    written = path.stat().st_mtime_ns

    rc, again = run_module(deployment_history, args)
    assert rc == 0, again
    assert (again["changed"], again["entry"], again["history"]) == (False, None, [entry])
    assert path.stat().st_mtime_ns == written


def test_each_record_appends_without_only_if_different(
    tmp_path: Path, run_module: RunModule
) -> None:
    path = tmp_path / "history.json"
    assert run_module(deployment_history, recorded(path, "up", V11))[1]["changed"] is True
    rc, again = run_module(deployment_history, recorded(path, "up", V11))
    assert (rc, again["changed"], len(again["history"])) == (0, True, 2)


def test_another_state_is_recorded_with_only_if_different(
    tmp_path: Path, run_module: RunModule
) -> None:
    path = tmp_path / "history.json"
    run_module(deployment_history, recorded(path, "up", V10, only_if_different=True))
    rc, result = run_module(
        deployment_history, recorded(path, "up", V11, from_state=V10, only_if_different=True)
    )
    assert (rc, result["changed"], result["current"]) == (0, True, V11)
    assert result["images_to_keep"] == [V11["image"], V10["image"]]


def test_an_entry_without_from_state_comes_from_what_serves(
    tmp_path: Path, run_module: RunModule
) -> None:
    """`llmfleet up` names only what it serves now: the entry's `from` is what the history
    said served before it (null in the first entry)."""
    path = tmp_path / "history.json"
    rc, first = run_module(deployment_history, recorded(path, "up", V10, only_if_different=True))
    assert (rc, first["entry"]["from"]) == (0, None)
    rc, second = run_module(deployment_history, recorded(path, "up", V11, only_if_different=True))
    assert (rc, second["entry"]["from"], second["entry"]["to"]) == (0, V10, V11)


def test_a_rolled_back_upgrade_leaves_the_old_state_current(
    tmp_path: Path, run_module: RunModule
) -> None:
    path = tmp_path / "history.json"
    run_module(deployment_history, recorded(path, "up", V10))
    rc, result = run_module(
        deployment_history,
        recorded(
            path,
            "upgrade",
            V11,
            from_state=V10,
            outcome="rolled back",
            reason="no answer on /health in 600 s",
        ),
    )
    assert rc == 0, result
    assert result["entry"]["reason"] == "no answer on /health in 600 s"
    assert (result["current"], result["current_uncertain"]) == (V10, False)
    assert result["images_to_keep"] == [V10["image"]]
    # The next `llmfleet up` of the old state records nothing.
    rc, again = run_module(deployment_history, recorded(path, "up", V10, only_if_different=True))
    assert (rc, again["changed"]) == (0, False)


def test_after_a_failed_switch_what_runs_is_uncertain_and_the_next_up_is_recorded(
    tmp_path: Path, run_module: RunModule
) -> None:
    path = tmp_path / "history.json"
    run_module(deployment_history, recorded(path, "up", V10))
    rc, failed = run_module(
        deployment_history, recorded(path, "upgrade", V11, from_state=V10, outcome="failed")
    )
    assert (rc, failed["current"], failed["current_uncertain"]) == (0, V10, True)
    rc, read = run_module(deployment_history, {"path": str(path)})
    assert (read["changed"], read["current"], read["current_uncertain"]) == (False, V10, True)
    # The state is V10 again, as before the failure: only_if_different still records it,
    # since after the failure what ran was unknown.
    rc, up = run_module(deployment_history, recorded(path, "up", V10, only_if_different=True))
    assert (rc, up["changed"], up["current_uncertain"], len(up["history"])) == (0, True, False, 3)


def test_an_outcome_other_than_ok_is_recorded_even_with_only_if_different(
    tmp_path: Path, run_module: RunModule
) -> None:
    path = tmp_path / "history.json"
    run_module(deployment_history, recorded(path, "up", V10))
    rc, result = run_module(
        deployment_history,
        recorded(path, "up", V10, only_if_different=True, outcome="failed"),
    )
    assert (rc, result["changed"], result["current_uncertain"]) == (0, True, True)


def test_reading_a_missing_file_is_nothing_and_writes_nothing(
    tmp_path: Path, run_module: RunModule
) -> None:
    path = tmp_path / "history.json"
    rc, result = run_module(deployment_history, {"path": str(path), "_ansible_diff": True})
    assert rc == 0, result
    assert (result["changed"], result["history"], result["current"]) == (False, [], None)
    assert (result["current_uncertain"], result["images_to_keep"]) == (False, [])
    assert result["diff"]["before"] == result["diff"]["after"] == ""
    assert not path.exists()


def test_reading_leaves_the_mode_of_the_file_alone(tmp_path: Path, run_module: RunModule) -> None:
    path = tmp_path / "history.json"
    run_module(deployment_history, recorded(path, "up", NATIVE))
    path.chmod(0o600)
    rc, result = run_module(deployment_history, {"path": str(path)})
    assert (rc, result["changed"], result["current"], result["images_to_keep"]) == (
        0,
        False,
        NATIVE,
        [],
    )
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    rc, result = run_module(
        deployment_history, recorded(path, "up", NATIVE, only_if_different=True)
    )
    assert (rc, result["changed"], result["entry"]) == (0, True, None)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("not a history\n", "it is no JSON"),
        ('{"version": 1, "containers": {}}', "its entries are not a list"),
        (b"\xff\xfe\x00", "it is not UTF-8 text"),
    ],
)
def test_a_read_of_a_file_that_is_no_history_fails_naming_it(
    tmp_path: Path, run_module: RunModule, text: str | bytes, why: str
) -> None:
    path = tmp_path / "history.json"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    rc, result = run_module(deployment_history, {"path": str(path)})
    assert rc == 1
    assert result["msg"].startswith(f"{path} is not a deployment history: {why}")
    assert 'expected {"version": 1, "entries": [...]}' in result["msg"]


def test_a_record_replaces_a_file_that_is_no_history_with_a_warning(
    tmp_path: Path, run_module: RunModule
) -> None:
    path = tmp_path / "history.json"
    path.write_text("not a history\n")
    rc, result = run_module(deployment_history, recorded(path, "up", V11, only_if_different=True))
    assert (rc, result["changed"], result["current"]) == (0, True, V11)
    warnings = json.dumps(result["warnings"])
    assert f"{path} is not a deployment history (it is no JSON" in warnings
    assert len(json.loads(path.read_text())["entries"]) == 1


def test_check_mode_writes_nothing_and_diff_shows_the_entry(
    tmp_path: Path, run_module: RunModule
) -> None:
    path = tmp_path / "history.json"
    run_module(deployment_history, recorded(path, "up", V10))
    before = path.read_text()
    args = {
        **recorded(path, "upgrade", V11, from_state=V10),
        "_ansible_check_mode": True,
        "_ansible_diff": True,
    }
    rc, result = run_module(deployment_history, args)
    assert rc == 0, result
    assert (result["changed"], result["current"], len(result["history"])) == (True, V11, 2)
    assert result["diff"]["before"] == before
    assert json.loads(result["diff"]["after"])["entries"][-1]["action"] == "upgrade"
    assert result["diff"]["before_header"] == result["diff"]["after_header"] == str(path)
    assert path.read_text() == before
    rc, missing = run_module(
        deployment_history, {**recorded(tmp_path / "new" / "h.json", "up", V10), **args}
    )
    assert (rc, missing["changed"], (tmp_path / "new").exists()) == (0, True, False)


def test_the_oldest_entries_beyond_keep_entries_are_dropped(
    tmp_path: Path, run_module: RunModule
) -> None:
    path = tmp_path / "history.json"
    for state in (V10, V11, V12):
        rc, result = run_module(deployment_history, recorded(path, "up", state, keep_entries=2))
        assert rc == 0, result
    assert [entry["to"] for entry in result["history"]] == [V11, V12]
    assert len(json.loads(path.read_text())["entries"]) == 2


def test_keep_images_bounds_the_images_to_keep(tmp_path: Path, run_module: RunModule) -> None:
    path = tmp_path / "history.json"
    for before, after in ((None, V10), (V10, V11), (V11, V12)):
        run_module(deployment_history, recorded(path, "upgrade", after, from_state=before))
    rc, result = run_module(deployment_history, {"path": str(path), "keep_images": 2})
    assert (rc, result["images_to_keep"]) == (0, [V12["image"], V11["image"]])
    rc, result = run_module(deployment_history, {"path": str(path)})
    assert result["images_to_keep"] == [V12["image"], V11["image"], V10["image"]]


@pytest.mark.parametrize(
    ("args", "why"),
    [
        ({"state": "recorded", "action": "up"}, "to_state"),
        ({"state": "recorded", "to_state": V10}, "action"),
        ({"keep_entries": 0}, "keep_entries is 0: it is at least 1"),
        ({"keep_images": 0}, "keep_images is 0: it is at least 1"),
        (
            {"state": "recorded", "action": "up", "to_state": {"image": ["x"]}},
            "to_state.image is ['x']: each value is text or null",
        ),
        ({"state": "recorded", "action": "up", "to_state": V10, "outcome": "done"}, "outcome"),
    ],
)
def test_arguments_that_do_not_fit_fail_saying_why(
    tmp_path: Path, run_module: RunModule, args: dict[str, Any], why: str
) -> None:
    path = tmp_path / "history.json"
    rc, result = run_module(deployment_history, {"path": str(path), **args})
    assert rc == 1
    assert why in result["msg"]
    assert not path.exists()


def test_through_ansible(tmp_path: Path) -> None:
    path = tmp_path / "history.json"
    args = json.dumps(recorded(path, "up", V11, only_if_different=True))
    status, result = ansible_adhoc("llmfleet.cluster.deployment_history", args)
    assert status == "CHANGED", result
    assert result["current"] == V11
    status, result = ansible_adhoc("llmfleet.cluster.deployment_history", args)
    assert status == "SUCCESS", result
    assert result["images_to_keep"] == [V11["image"]]
