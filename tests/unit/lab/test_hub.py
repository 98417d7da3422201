"""The lab's Hugging Face Hub (emulators/llmfleet-lab-hub), driven by the real huggingface_hub.

The server runs as a subprocess over a small model repo (tests/unit/plugins/lab_hub.py);
HfApi, hf_hub_download and snapshot_download talk to it as they would to huggingface.co.
A few pure helpers of the script are tested directly.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import json
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.unit.plugins.lab_hub import (
    HUB_SCRIPT,
    NEXT_BRANCH,
    REPO_ID,
    TOKEN,
    LabHub,
    git_blob_sha1,
    hubs,
    model_files,
    next_files,
    start_hub,
    write_model_repo,
)

hf = pytest.importorskip("huggingface_hub")
from huggingface_hub import errors as hf_errors  # noqa: E402

FILES = model_files()
WEIGHTS = FILES["model.safetensors"]


@functools.cache
def load_hub_module() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("llmfleet_lab_hub", str(HUB_SCRIPT))
    spec = importlib.util.spec_from_loader("llmfleet_lab_hub", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["llmfleet_lab_hub"] = module  # its dataclasses look their module up
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # keep assets clean
    try:
        loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = saved
    return module


@pytest.fixture(scope="module")
def lab_hubs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, LabHub]]:
    yield from hubs(tmp_path_factory.mktemp("lab-hub"))


@pytest.fixture(scope="module")
def hub(lab_hubs: dict[str, LabHub]) -> LabHub:
    return lab_hubs["open"]


def request(
    url: str, method: str = "GET", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


# ---------------------------------------------------------------------------
# the script's helpers
# ---------------------------------------------------------------------------
def test_commit_follows_from_paths_and_contents(tmp_path: Path) -> None:
    module = load_hub_module()
    write_model_repo(tmp_path / "a")
    write_model_repo(tmp_path / "b")
    first = module.scan_repo(REPO_ID, tmp_path / "a" / REPO_ID)
    assert first.commit == module.scan_repo(REPO_ID, tmp_path / "b" / REPO_ID).commit
    assert ".cache/leftover.lock" not in first.files
    (tmp_path / "b" / REPO_ID / "config.json").write_text("{}")
    assert module.scan_repo(REPO_ID, tmp_path / "b" / REPO_ID).commit != first.commit


@pytest.mark.parametrize(
    ("name", "size", "lfs"),
    [
        ("model.safetensors", 10, True),
        ("pytorch_model.bin", 10, True),
        ("model.gguf", 10, True),
        ("config.json", 10, False),
        ("tokenizer.json", 10 * 1024 * 1024, True),
    ],
)
def test_lfs_by_pattern_or_size(name: str, size: int, lfs: bool) -> None:
    assert load_hub_module().is_lfs(name, size) is lfs


@pytest.mark.parametrize(
    ("header", "span"),
    [
        ("", None),
        ("bytes=10-19", (10, 19)),
        ("bytes=90-", (90, 99)),
        ("bytes=-5", (95, 99)),
        ("bytes=95-500", (95, 99)),
        ("items=1-2", None),
    ],
)
def test_byte_range(header: str, span: tuple[int, int] | None) -> None:
    assert load_hub_module().byte_range(header, 100) == span


# ---------------------------------------------------------------------------
# the server, through huggingface_hub
# ---------------------------------------------------------------------------
def test_banner_names_each_repo(hub: LabHub) -> None:
    size = sum(len(content) for content in FILES.values())
    assert f"serving {REPO_ID} main={hub.commit} ({len(FILES)} files, {size} bytes)" in hub.banner


def test_model_info_with_files_metadata(hub: LabHub) -> None:
    info = hf.HfApi(endpoint=hub.url).model_info(REPO_ID, files_metadata=True, token=False)
    assert info.sha == hub.commit
    siblings = {s.rfilename: s for s in info.siblings or []}
    assert set(siblings) == set(FILES)
    for name, content in FILES.items():
        assert siblings[name].size == len(content), name
    lfs = siblings["model.safetensors"].lfs
    assert lfs is not None
    assert lfs.sha256 == hashlib.sha256(WEIGHTS).hexdigest()
    assert lfs.size == len(WEIGHTS)
    assert siblings["config.json"].lfs is None
    assert siblings["config.json"].blob_id == git_blob_sha1(FILES["config.json"])


def test_main_resolves_to_the_commit(hub: LabHub) -> None:
    api = hf.HfApi(endpoint=hub.url)
    assert api.model_info(REPO_ID, revision="main", token=False).sha == hub.commit
    assert api.model_info(REPO_ID, revision=hub.commit, token=False).sha == hub.commit
    refs = api.list_repo_refs(REPO_ID, token=False)
    assert [(b.name, b.target_commit) for b in refs.branches] == [
        ("main", hub.commit),
        (NEXT_BRANCH, hub.commit_of(REPO_ID, NEXT_BRANCH)),
    ]


def test_another_branch_is_its_own_commit_by_name_or_sha(hub: LabHub, tmp_path: Path) -> None:
    api = hf.HfApi(endpoint=hub.url)
    commit = hub.commit_of(REPO_ID, NEXT_BRANCH)
    assert commit != hub.commit
    for revision in (NEXT_BRANCH, f"refs/heads/{NEXT_BRANCH}", commit):
        info = api.model_info(REPO_ID, revision=revision, files_metadata=True, token=False)
        assert info.sha == commit, revision
        assert {s.rfilename for s in info.siblings or []} == set(next_files()), revision
    target = tmp_path / "next"
    hf.snapshot_download(
        REPO_ID, revision=commit, local_dir=target, cache_dir=tmp_path / "cache",
        endpoint=hub.url, token=False,
    )  # fmt: skip
    for name, content in next_files().items():
        assert (target / name).read_bytes() == content, name
    assert not (target / "extra").exists()
    # A file of main only is not on next.
    with pytest.raises(hf_errors.EntryNotFoundError):
        hf.hf_hub_download(
            REPO_ID, "extra/notes.md", revision=commit, cache_dir=tmp_path / "cache",
            endpoint=hub.url, token=False,
        )  # fmt: skip


def test_tree_and_paths_info(hub: LabHub) -> None:
    api = hf.HfApi(endpoint=hub.url)
    top = {e.path for e in api.list_repo_tree(REPO_ID, token=False)}
    assert top == {".gitattributes", "config.json", "tokenizer.json", "model.safetensors", "extra"}
    every = {e.path for e in api.list_repo_tree(REPO_ID, recursive=True, token=False)}
    assert every == set(FILES) | {"extra"}
    below = [e.path for e in api.list_repo_tree(REPO_ID, path_in_repo="extra", token=False)]
    assert below == ["extra/notes.md"]
    info = api.get_paths_info(REPO_ID, ["config.json", "extra", "missing"], token=False)
    assert sorted(type(e).__name__ for e in info) == ["RepoFile", "RepoFolder"]


def test_snapshot_download_is_byte_identical_then_downloads_nothing(
    hub: LabHub, tmp_path: Path
) -> None:
    target = tmp_path / "model"
    got = hf.snapshot_download(
        REPO_ID,
        revision=hub.commit,
        local_dir=target,
        cache_dir=tmp_path / "cache",
        endpoint=hub.url,
        token=False,
    )
    assert Path(got) == target.resolve()
    for name, content in FILES.items():
        assert (target / name).read_bytes() == content, name
    stats = {name: (target / name).stat() for name in FILES}
    gets = len(hub.file_gets())

    hf.snapshot_download(
        REPO_ID,
        revision=hub.commit,
        local_dir=target,
        cache_dir=tmp_path / "cache",
        endpoint=hub.url,
        token=False,
    )
    assert len(hub.file_gets()) == gets
    for name in FILES:
        after = (target / name).stat()
        assert (after.st_ino, after.st_mtime_ns) == (stats[name].st_ino, stats[name].st_mtime_ns)


def test_unknown_repo_revision_and_file_raise_the_hubs_errors(hub: LabHub, tmp_path: Path) -> None:
    api = hf.HfApi(endpoint=hub.url)
    with pytest.raises(hf_errors.RepositoryNotFoundError):
        api.model_info("llmfleet/no-such-model", token=False)
    with pytest.raises(hf_errors.RevisionNotFoundError):
        api.model_info(REPO_ID, revision="v9", token=False)
    with pytest.raises(hf_errors.RevisionNotFoundError):
        hf.snapshot_download(
            REPO_ID, revision="0" * 40, local_dir=tmp_path / "x", endpoint=hub.url, token=False
        )
    with pytest.raises(hf_errors.EntryNotFoundError):
        hf.hf_hub_download(
            REPO_ID, "missing.json", cache_dir=tmp_path / "cache", endpoint=hub.url, token=False
        )
    status, headers, body = request(f"{hub.url}/api/nothing/here")
    assert status == 404
    assert "error" in json.loads(body)
    assert "X-Error-Code" not in headers


def test_head_and_range(hub: LabHub) -> None:
    url = f"{hub.url}/{REPO_ID}/resolve/main/model.safetensors"
    status, headers, body = request(url, method="HEAD")
    assert (status, body) == (200, b"")
    sha256 = hashlib.sha256(WEIGHTS).hexdigest()
    assert headers["ETag"] == headers["X-Linked-Etag"] == f'"{sha256}"'
    assert headers["X-Linked-Size"] == headers["Content-Length"] == str(len(WEIGHTS))
    assert headers["X-Repo-Commit"] == hub.commit

    status, headers, body = request(url, headers={"Range": "bytes=100-199"})
    assert status == 206
    assert body == WEIGHTS[100:200]
    assert headers["Content-Range"] == f"bytes 100-199/{len(WEIGHTS)}"
    status, _, body = request(url, headers={"Range": "bytes=-10"})
    assert (status, body) == (206, WEIGHTS[-10:])
    status, _, _ = request(url, headers={"Range": f"bytes={len(WEIGHTS)}-"})
    assert status == 416

    status, headers, body = request(f"{hub.url}/{REPO_ID}/resolve/{hub.commit}/config.json")
    assert (status, body) == (200, FILES["config.json"])
    assert headers["ETag"] == f'"{git_blob_sha1(FILES["config.json"])}"'
    assert "X-Linked-Etag" not in headers


def test_token_file_makes_every_request_need_the_token(
    lab_hubs: dict[str, LabHub], tmp_path: Path
) -> None:
    hub = lab_hubs["token"]
    assert "(token required)" in hub.banner[-1]
    status, headers, _ = request(f"{hub.url}/api/models/{REPO_ID}")
    assert status == 401
    assert headers["WWW-Authenticate"].startswith("Bearer")
    api = hf.HfApi(endpoint=hub.url)
    for token in (False, "hf_wrong"):
        with pytest.raises(hf_errors.HfHubHTTPError) as caught:
            api.model_info(REPO_ID, token=token)
        assert caught.value.response.status_code == 401
    assert api.model_info(REPO_ID, token=TOKEN).sha == hub.commit
    target = tmp_path / "model"
    hf.snapshot_download(
        REPO_ID, revision=hub.commit, local_dir=target, endpoint=hub.url, token=TOKEN
    )
    assert (target / "model.safetensors").read_bytes() == WEIGHTS


def test_a_root_that_is_not_a_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="not a directory"):
        start_hub(tmp_path / "missing", tmp_path / "hub.log")
