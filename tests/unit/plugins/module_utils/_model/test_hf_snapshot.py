"""module_utils/_model/hf_snapshot: the local bookkeeping (what a download wrote, what is missing),
config.json (downloaded into a temporary folder and parsed), and the sentences for the hub's
errors (raised by the real client against the lab's Hub)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

hf = pytest.importorskip("huggingface_hub")

from ansible_collections.llmfleet.cluster.plugins.module_utils._model import (  # noqa: E402
    hf_snapshot as _hf_snapshot,
)

from tests.unit.plugins.fake_llm_server import free_port  # noqa: E402
from tests.unit.plugins.lab_hub import REPO_ID, TOKEN, LabHub  # noqa: E402


def write(path: Path, content: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)


def test_local_state_sees_regular_files_only(tmp_path: Path) -> None:
    write(tmp_path / "a.json", b"{}")
    write(tmp_path / "sub" / "b.bin", b"12345")
    (tmp_path / "dir.json").mkdir()
    state = _hf_snapshot.local_state(str(tmp_path), ["a.json", "sub/b.bin", "dir.json", "none"])
    assert set(state) == {"a.json", "sub/b.bin"}
    info = (tmp_path / "sub" / "b.bin").stat()
    assert state["sub/b.bin"] == (5, info.st_mtime_ns, info.st_ino)


def test_changed_paths_new_or_rewritten_or_replaced(tmp_path: Path) -> None:
    write(tmp_path / "kept", b"same")
    write(tmp_path / "rewritten", b"old")
    write(tmp_path / "replaced", b"same size")
    paths = ["kept", "rewritten", "replaced", "new"]
    before = _hf_snapshot.local_state(str(tmp_path), paths)
    write(tmp_path / "rewritten", b"longer")
    write(tmp_path / "replaced.tmp", b"same size")
    os.replace(tmp_path / "replaced.tmp", tmp_path / "replaced")  # new inode, as a download
    write(tmp_path / "new", b"x")
    after = _hf_snapshot.local_state(str(tmp_path), paths)
    assert _hf_snapshot.changed_paths(before, after) == ["new", "replaced", "rewritten"]
    assert _hf_snapshot.changed_paths(after, after) == []


def test_missing_or_resized(tmp_path: Path) -> None:
    write(tmp_path / "ok", b"1234")
    write(tmp_path / "short", b"12")
    files = [
        {"path": "ok", "size": 4},
        {"path": "short", "size": 4},
        {"path": "missing", "size": 1},
    ]
    assert _hf_snapshot.missing_or_resized(str(tmp_path), files) == ["short", "missing"]


def test_file_diff_gives_sizes_before_and_after() -> None:
    before = {"config.json": (2, 0, 0)}
    files = [{"path": "config.json", "size": 40}, {"path": "model.safetensors", "size": 9}]
    diff = _hf_snapshot.file_diff("/m", ["config.json", "model.safetensors"], before, files)
    assert diff["before"] == "config.json: 2\nmodel.safetensors: absent\n"
    assert diff["after"] == "config.json: 40\nmodel.safetensors: 9\n"
    assert diff["before_header"] == diff["after_header"] == "/m"


def test_scrub_hides_the_token() -> None:
    assert _hf_snapshot.scrub(f"bad {TOKEN}!", TOKEN) == "bad ********!"
    assert _hf_snapshot.scrub("nothing", None) == "nothing"


def test_hub_endpoint_defaults_to_huggingface_hubs() -> None:
    assert _hf_snapshot.hub_endpoint("http://hub.lab:8080/") == "http://hub.lab:8080"
    assert _hf_snapshot.hub_endpoint(None) == hf.constants.ENDPOINT.rstrip("/")


def test_telemetry_and_progress_bars_are_off() -> None:
    assert os.environ["HF_HUB_DISABLE_TELEMETRY"] == "1"
    assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"


def test_explain_leaves_other_errors_alone() -> None:
    assert _hf_snapshot.explain(KeyError("x"), REPO_ID, "main", "http://h", False) is None


@pytest.mark.parametrize(
    ("hub_name", "repo_id", "revision", "token", "expected"),
    [
        ("open", REPO_ID, "v2", None, f"revision 'v2' of {REPO_ID} not found on "),
        ("open", "llmfleet/none", "main", None, "repository llmfleet/none not found on "),
        ("token", REPO_ID, "main", False, "the hub wants a token for llmfleet/tiny-hub at "),
        ("token", REPO_ID, "main", "hf_wrong", "the hub refused the token for llmfleet/tiny-hub"),
    ],
)
def test_explain_the_hubs_errors(
    lab_hubs: dict[str, LabHub],
    hub_name: str,
    repo_id: str,
    revision: str,
    token: str | bool | None,
    expected: str,
) -> None:
    hub = lab_hubs[hub_name]
    api = hf.HfApi(endpoint=hub.url, token=token)
    with pytest.raises(hf.errors.HfHubHTTPError) as caught:
        _hf_snapshot.read_revision(api, repo_id, revision)
    message = _hf_snapshot.explain(caught.value, repo_id, revision, hub.url, bool(token))
    assert message is not None
    assert expected in message
    assert hub.url in message


def test_explain_an_unreachable_hub() -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    api = hf.HfApi(endpoint=endpoint, token=False)
    with pytest.raises(_hf_snapshot.transport_errors()) as caught:
        _hf_snapshot.read_revision(api, REPO_ID, "main")
    message = _hf_snapshot.explain(caught.value, REPO_ID, "main", endpoint, False)
    assert message is not None
    assert message.startswith(f"the hub at {endpoint} is unreachable while reading")


def test_read_revision_filters_and_sums(lab_hubs: dict[str, LabHub]) -> None:
    hub = lab_hubs["open"]
    api = hf.HfApi(endpoint=hub.url, token=False)
    result = _hf_snapshot.read_revision(api, REPO_ID, "main", allow_patterns=["*.safetensors"])
    assert result["revision"] == hub.commit
    assert [f["path"] for f in result["files"]] == ["model.safetensors"]
    assert result["total_bytes"] == result["files"][0]["size"] == 40 * 1024


def test_hub_args_are_the_shared_options() -> None:
    params = {name: object() for name in _hf_snapshot.HUB_OPTIONS}
    assert _hf_snapshot.hub_args({**params, "local_dir": "/m", "read_config": True}) == params


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"model_type": ', "is not valid JSON: "),
        (b"\xff\xfe{", "is not valid JSON: "),
        (b"[1, 2]", "is not a JSON object but a list"),
    ],
)
def test_model_config_refuses_what_is_not_a_json_object(
    monkeypatch: pytest.MonkeyPatch, content: bytes, message: str
) -> None:
    folders: list[str] = []

    def fake_download(repo_id: str, filename: str, *, local_dir: str, **_: object) -> str:
        folders.append(local_dir)
        path = os.path.join(local_dir, filename)
        Path(path).write_bytes(content)
        return path

    monkeypatch.setattr(_hf_snapshot, "hf_hub_download", fake_download)
    result = {
        "repo_id": REPO_ID,
        "requested_revision": "v1",
        "revision": "a" * 40,
        "endpoint": "http://h",
    }
    with pytest.raises(_hf_snapshot.HubRequestError) as caught:
        _hf_snapshot.model_config(result, None)
    assert str(caught.value).startswith(f"config.json of {REPO_ID} at revision 'v1' ({'a' * 40}) ")
    assert message in str(caught.value)
    assert folders and not os.path.exists(folders[0])  # the temporary folder is gone


def test_model_config_parses_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, object] = {}

    def fake_download(repo_id: str, filename: str, **kwargs: object) -> str:
        seen.update(kwargs, repo_id=repo_id, filename=filename)
        path = os.path.join(str(kwargs["local_dir"]), filename)
        Path(path).write_text('{"hidden_size": 64}')
        return path

    monkeypatch.setattr(_hf_snapshot, "hf_hub_download", fake_download)
    result = {"repo_id": REPO_ID, "requested_revision": "main", "revision": "b" * 40}
    config = _hf_snapshot.model_config({**result, "endpoint": "http://h"}, TOKEN)
    assert config == {"hidden_size": 64}
    assert (seen["repo_id"], seen["filename"], seen["revision"]) == (
        REPO_ID,
        "config.json",
        "b" * 40,
    )
    assert (seen["endpoint"], seen["token"]) == ("http://h", TOKEN)


def test_read_adds_config_only_when_asked_and_selected(lab_hubs: dict[str, LabHub]) -> None:
    hub = lab_hubs["open"]
    common = {"repo_id": REPO_ID, "endpoint": hub.url, "token": None}
    assert _hf_snapshot.read(**common)["config"] == {}
    assert _hf_snapshot.read(read_config=True, **common)["config"] == {
        "model_type": "llama",
        "hidden_size": 64,
    }
    only_weights = _hf_snapshot.read(read_config=True, allow_patterns=["*.safetensors"], **common)
    assert only_weights["config"] == {}
