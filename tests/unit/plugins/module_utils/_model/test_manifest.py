"""module_utils/_model/manifest and manifest_state: reference validation, hashing,
the walk, the state file, and check_model's modes on small files in tmp_path."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._model import manifest as mm
from ansible_collections.llmfleet.cluster.plugins.module_utils._model import manifest_state as ms

CONTENT = {
    "config.json": b'{"model_type": "qwen3"}\n',
    "model-00001-of-00002.safetensors": b"\x01" * 5000,
    "model-00002-of-00002.safetensors": b"\x02" * 3000,
    "tokenizer/tokenizer.json": b'{"version": "1.0"}\n',
}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def git_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def make_model(root: Path, content: dict[str, bytes] | None = None) -> Path:
    for rel, data in (content or CONTENT).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def reference(content: dict[str, bytes] | None = None) -> list[dict[str, Any]]:
    return [
        {"path": rel, "size": len(data), "sha256": sha256(data)}
        for rel, data in sorted((content or CONTENT).items())
    ]


def flip_byte(path: Path, keep_mtime: bool = False) -> None:
    before = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    if keep_mtime:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    else:
        # A filesystem with coarse timestamps could give the write the same mtime.
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000))


# ---------------------------------------------------------------------------
# validate_reference
# ---------------------------------------------------------------------------
def test_reference_is_normalized_and_sorted() -> None:
    entries = mm.validate_reference(
        [
            {"path": "./b/x.bin", "size": "12", "sha256": "AB" * 32, "git_sha1": None},
            {"path": "a.json", "size": 3, "git_sha1": "cd" * 20},
        ]
    )
    assert entries == [
        {"path": "a.json", "size": 3, "git_sha1": "cd" * 20},
        {"path": "b/x.bin", "size": 12, "sha256": "ab" * 32},
    ]


@pytest.mark.parametrize(
    ("files", "needles"),
    [
        ([{"path": "/etc/passwd", "size": 1}], ["files[0]", "/etc/passwd", "relative"]),
        ([{"path": "a/../../b", "size": 1}], ["files[0]", "a/../../b", "'..'"]),
        ([{"path": "..", "size": 1}], ["files[0]", "'..'"]),
        ([{"path": "", "size": 1}], ["files[0]", "non-empty"]),
        ([{"path": ".", "size": 1}], ["files[0]", "model folder itself"]),
        (
            [{"path": "a", "size": 1}, {"path": "b", "size": 1}, {"path": "./a", "size": 2}],
            ["files[2]", "a is listed twice"],
        ),
        ([{"path": "a", "size": -1}], ["files[0]", "size", "-1"]),
        ([{"path": "a", "size": True}], ["files[0]", "size"]),
        ([{"path": "a"}], ["files[0]", "size", "None"]),
        ([{"path": "a", "size": 1, "sha256": "xyz"}], ["files[0]", "sha256", "64 hex"]),
        ([{"path": "a", "size": 1, "git_sha1": "ab" * 32}], ["git_sha1", "40 hex"]),
        ([{"path": "a", "size": 1, "sha": "ab"}], ["files[0]", "unknown key(s) sha"]),
        (["a"], ["files[0]", "expected a dict"]),
    ],
)
def test_bad_reference_entries_are_named(files: list[Any], needles: list[str]) -> None:
    with pytest.raises(mm.ManifestError) as info:
        mm.validate_reference(files)
    for needle in needles:
        assert needle in str(info.value)


# ---------------------------------------------------------------------------
# hashing, walking, free space
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("size", [0, 1, mm.CHUNK_BYTES - 1, mm.CHUNK_BYTES + 7])
def test_hash_file_matches_hashlib_and_git(tmp_path: Path, size: int) -> None:
    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    target = tmp_path / "f"
    target.write_bytes(data)
    digest, blob, st = mm.hash_file(str(target), git_sha1=True)
    assert digest == sha256(data)
    assert blob == git_sha1(data)
    assert st.st_size == size
    assert mm.hash_file(str(target))[1] is None


def test_git_blob_sha1_is_gits() -> None:
    # `printf 'hello\n' | git hash-object --stdin`
    assert git_sha1(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"


def test_hash_files_reports_unreadable_files(tmp_path: Path) -> None:
    (tmp_path / "ok").write_bytes(b"1")
    result = mm.hash_files(
        {"ok": (str(tmp_path / "ok"), False), "gone": (str(tmp_path / "gone"), False)}
    )
    assert result["ok"]["sha256"] == sha256(b"1")
    assert result["gone"]["error"].startswith("unreadable: ")


def test_walk_skips_cache_git_and_the_state_file_and_follows_links(tmp_path: Path) -> None:
    make_model(tmp_path)
    for rel in (".cache/huggingface/download/x.lock", ".git/HEAD", "sub/.git/config"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    (tmp_path / "state.json").write_text("{}")
    blob = tmp_path.parent / f"{tmp_path.name}-blob"
    blob.write_bytes(b"linked")
    (tmp_path / "linked.bin").symlink_to(blob)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    found = mm.walk_files(str(tmp_path), [str(tmp_path / "state.json")])
    assert sorted(found) == sorted([*CONTENT, "linked.bin"])
    assert found["linked.bin"].st_size == 6


def test_free_bytes_of_a_path_that_does_not_exist_is_its_ancestors(tmp_path: Path) -> None:
    vfs = os.statvfs(tmp_path)
    assert mm.free_bytes(str(tmp_path / "a" / "b")) == pytest.approx(
        vfs.f_bavail * vfs.f_frsize, rel=0.01
    )


# ---------------------------------------------------------------------------
# check_model
# ---------------------------------------------------------------------------
@pytest.fixture
def model(tmp_path: Path) -> Path:
    return make_model(tmp_path / "model")


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state" / "model.json"


def test_source_mode_builds_the_manifest_then_rereads_nothing(model: Path, state: Path) -> None:
    first = mm.check_model(str(model), state_file=str(state), source={"repo": "org/m"})
    assert first["files"] == reference()
    assert first["hashed"] == sorted(CONTENT)
    assert first["ok"] == sorted(CONTENT)
    assert first["changed"] is True
    assert first["verified"] is True
    assert first["bytes_total"] == sum(len(d) for d in CONTENT.values())
    assert first["bytes_needed"] == 0
    document = json.loads(state.read_text())
    assert document["source"] == {"repo": "org/m"}
    assert document["path"] == str(model)
    assert document["files"]["config.json"]["sha256"] == sha256(CONTENT["config.json"])

    again = mm.check_model(str(model), state_file=str(state), source={"repo": "org/m"})
    assert again["hashed"] == []
    assert again["changed"] is False
    assert again["files"] == first["files"]


def test_quick_rerun_against_a_reference_reads_nothing(model: Path, state: Path) -> None:
    first = mm.check_model(str(model), reference(), state_file=str(state))
    assert first["hashed"] == sorted(CONTENT)
    assert first["changed"] is True
    again = mm.check_model(str(model), reference(), state_file=str(state))
    assert (again["hashed"], again["changed"], again["verified"]) == ([], False, True)
    assert again["ok"] == sorted(CONTENT)


def test_quick_finds_a_flipped_byte_by_name(model: Path, state: Path) -> None:
    mm.check_model(str(model), reference(), state_file=str(state))
    flip_byte(model / "model-00002-of-00002.safetensors")
    result = mm.check_model(str(model), reference(), state_file=str(state))
    assert result["hashed"] == ["model-00002-of-00002.safetensors"]
    (bad,) = result["bad"]
    assert bad["path"] == "model-00002-of-00002.safetensors"
    assert bad["expected"] == sha256(CONTENT[bad["path"]])
    assert bad["actual"] != bad["expected"]
    assert bad["reason"] == f"sha256 {bad['actual'][:12]}... expected {bad['expected'][:12]}..."
    assert result["verified"] is False
    assert result["changed"] is True  # its record leaves the state file
    assert bad["path"] not in json.loads(state.read_text())["files"]
    assert result["bytes_needed"] == 3000


def test_a_flip_with_the_mtime_set_back_is_missed_by_quick_found_by_full(
    model: Path, state: Path
) -> None:
    mm.check_model(str(model), reference(), state_file=str(state))
    flip_byte(model / "config.json", keep_mtime=True)
    quick = mm.check_model(str(model), reference(), state_file=str(state))
    assert (quick["hashed"], quick["bad"], quick["verified"]) == ([], [], True)
    full = mm.check_model(str(model), reference(), mode="full", state_file=str(state))
    assert full["hashed"] == sorted(CONTENT)
    assert [b["path"] for b in full["bad"]] == ["config.json"]


def test_missing_and_wrong_size_and_extra_files(model: Path, state: Path) -> None:
    (model / "tokenizer" / "tokenizer.json").unlink()
    (model / "config.json").write_bytes(b"{}")
    (model / "README.md").write_text("extra")
    result = mm.check_model(str(model), reference(), state_file=str(state))
    assert result["missing"] == ["tokenizer/tokenizer.json"]
    assert result["bad"] == [
        {
            "path": "config.json",
            "reason": f"size 2, expected {len(CONTENT['config.json'])}",
            "expected": len(CONTENT["config.json"]),
            "actual": 2,
        }
    ]
    assert "config.json" not in result["hashed"]  # a size mismatch needs no hashing
    assert result["extra"] == ["README.md"]
    assert result["bytes_needed"] == len(CONTENT["config.json"]) + len(
        CONTENT["tokenizer/tokenizer.json"]
    )
    message = mm.describe_problems(result)
    assert message.startswith(f"2 of 4 model file(s) in {model} failed verification (quick): ")
    assert "config.json: size 2, expected 24" in message
    assert "tokenizer/tokenizer.json: missing" in message


def test_remove_bad_deletes_only_bad_files(model: Path, state: Path) -> None:
    flip_byte(model / "model-00001-of-00002.safetensors")
    (model / "config.json").write_bytes(b"{}")
    (model / "tokenizer" / "tokenizer.json").unlink()
    (model / "README.md").write_text("extra")
    result = mm.check_model(str(model), reference(), state_file=str(state), remove_bad=True)
    assert result["removed"] == ["config.json", "model-00001-of-00002.safetensors"]
    assert sorted(p.name for p in model.rglob("*") if p.is_file()) == [
        "README.md",
        "model-00002-of-00002.safetensors",
    ]


def test_check_mode_writes_and_removes_nothing(model: Path, state: Path) -> None:
    (model / "config.json").write_bytes(b"{}")
    result = mm.check_model(
        str(model), reference(), state_file=str(state), remove_bad=True, check_mode=True
    )
    assert result["changed"] is True
    assert result["removed"] == ["config.json"]
    assert (model / "config.json").read_bytes() == b"{}"
    assert not state.parent.exists()


def test_inspect_a_path_that_does_not_exist(tmp_path: Path) -> None:
    result = mm.check_model(str(tmp_path / "models" / "m"), reference(), mode="inspect")
    assert result["missing"] == sorted(CONTENT)
    assert result["bytes_needed"] == result["bytes_total"] == 8000 + 24 + 19
    vfs = os.statvfs(tmp_path)
    assert result["free_bytes"] == pytest.approx(vfs.f_bavail * vfs.f_frsize, rel=0.01)
    assert (result["changed"], result["hashed"], result["verified"]) == (False, [], False)
    assert not (tmp_path / "models").exists()


def test_a_path_that_is_a_file_or_goes_through_one_is_refused(tmp_path: Path) -> None:
    (tmp_path / "hostname").write_text("spark-1\n")
    with pytest.raises(mm.ManifestError, match=r"/hostname is a file, not a folder$"):
        mm.check_model(str(tmp_path / "hostname"), reference(), mode="inspect")
    through = r"/hostname/m/x goes through a file \(.*/hostname\)$"
    with pytest.raises(mm.ManifestError, match=through):
        mm.check_model(str(tmp_path / "hostname" / "m" / "x"), reference(), mode="inspect")


def test_inspect_reads_no_content(model: Path, state: Path) -> None:
    flip_byte(model / "config.json")
    (model / "tokenizer" / "tokenizer.json").write_bytes(b"{}")
    result = mm.check_model(str(model), reference(), mode="inspect", state_file=str(state))
    assert result["hashed"] == []
    assert [b["path"] for b in result["bad"]] == ["tokenizer/tokenizer.json"]
    assert "config.json" in result["ok"]
    assert result["bytes_needed"] == 19
    assert not state.exists()


def test_git_sha1_verifies_files_outside_lfs(model: Path, state: Path) -> None:
    files = [
        {"path": rel, "size": len(data), "git_sha1": git_sha1(data)}
        for rel, data in CONTENT.items()
    ]
    files[0]["git_sha1"] = git_sha1(b"something else")
    result = mm.check_model(str(model), files, mode="full", state_file=str(state))
    assert [b["path"] for b in result["bad"]] == ["config.json"]
    assert result["bad"][0]["reason"].startswith("git_sha1 ")
    good = {e["path"]: e for e in result["files"]}["tokenizer/tokenizer.json"]
    assert good["sha256"] == sha256(CONTENT["tokenizer/tokenizer.json"])
    assert good["git_sha1"] == git_sha1(CONTENT["tokenizer/tokenizer.json"])
    # the recorded git sha1 vouches for the file on the next quick run
    again = mm.check_model(str(model), files, state_file=str(state))
    assert again["hashed"] == ["config.json"]


def test_a_state_for_another_folder_vouches_for_nothing(model: Path, state: Path) -> None:
    mm.check_model(str(model), reference(), state_file=str(state))
    copy = make_model(model.parent / "copy")
    result = mm.check_model(str(copy), reference(), state_file=str(state))
    assert result["hashed"] == sorted(CONTENT)


@pytest.mark.parametrize("garbage", ["", "not json", "[]", '{"version": 99}'])
def test_an_unreadable_state_file_means_hashing_again(
    model: Path, state: Path, garbage: str
) -> None:
    state.parent.mkdir()
    state.write_text(garbage)
    result = mm.check_model(str(model), reference(), state_file=str(state))
    assert result["hashed"] == sorted(CONTENT)
    assert result["changed"] is True
    assert json.loads(state.read_text())["version"] == ms.STATE_VERSION


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"mode": "quick"}, "needs state_file"),
        ({"mode": "fast", "state_file": "s"}, "mode is 'fast'"),
    ],
)
def test_bad_calls_fail(model: Path, kwargs: dict[str, Any], needle: str) -> None:
    with pytest.raises(mm.ManifestError, match=needle):
        mm.check_model(str(model), **kwargs)


def test_without_files_the_folder_must_exist(tmp_path: Path) -> None:
    with pytest.raises(mm.ManifestError, match="does not exist"):
        mm.check_model(str(tmp_path / "nope"), state_file=str(tmp_path / "s.json"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(mm.ManifestError, match="not a folder"):
        mm.check_model(str(tmp_path / "file"), mode="inspect")


# ---------------------------------------------------------------------------
# the state file
# ---------------------------------------------------------------------------
def test_state_is_written_atomically_0644_with_0755_parents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old_umask = os.umask(0o077)
    try:
        target = tmp_path / "a" / "b" / "state.json"
        replaced = []
        real_replace = os.replace

        def spy(src: str, dst: str) -> None:
            assert Path(src).parent == target.parent
            assert json.loads(Path(src).read_text())["files"] == {}
            replaced.append(dst)
            real_replace(src, dst)

        monkeypatch.setattr(ms.os, "replace", spy)
        ms.write_state(str(target), ms.state_document("/m", {}))
    finally:
        os.umask(old_umask)
    assert replaced == [str(target)]
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    for folder in (tmp_path / "a", tmp_path / "a" / "b"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o755
    assert [p.name for p in target.parent.iterdir()] == ["state.json"]


def test_a_failed_write_leaves_the_old_state_and_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "state.json"
    target.write_text("old")

    def boom(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ms.os, "replace", boom)
    with pytest.raises(OSError):
        ms.write_state(str(target), ms.state_document("/m", {}))
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_read_state_drops_malformed_records(tmp_path: Path) -> None:
    target = tmp_path / "s.json"
    good = {"size": 1, "mtime_ns": 2, "sha256": "a" * 64, "junk": 1}
    target.write_text(
        json.dumps(
            {
                "version": 1,
                "path": "/m",
                "files": {"a": good, "b": {"size": 1}, "c": [], "d": {**good, "size": True}},
            }
        )
    )
    assert ms.read_state(str(target), "/m")["files"] == {
        "a": {"size": 1, "mtime_ns": 2, "sha256": "a" * 64}
    }
    assert ms.read_state(str(target), "/other")["files"] == {}


def test_state_diff_lists_files_and_removals() -> None:
    before = ms.state_document("/m", {"a": {"size": 1, "mtime_ns": 1, "sha256": "f" * 64}})
    after = ms.state_document("/m", {})
    diff = ms.state_diff("/s.json", before, after, ["a"])
    assert diff[0] == {
        "before_header": "/s.json",
        "after_header": "/s.json",
        "before": f"{'f' * 64}  a\n",
        "after": "",
    }
    assert diff[1]["before"] == "a\n"


def test_source_mode_leaves_out_unreadable_files_and_the_state_file(
    model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_hash_file = mm.hash_file

    def hash_file(path: str, git_sha1: bool = False) -> Any:
        if path.endswith("config.json"):
            raise PermissionError(13, "Permission denied", path)
        return real_hash_file(path, git_sha1)

    monkeypatch.setattr(mm, "hash_file", hash_file)
    state = model / ".llmfleet-state.json"
    result = mm.check_model(str(model), state_file=str(state), remove_bad=True)
    assert result["bad"] == [
        {
            "path": "config.json",
            "reason": "unreadable: Permission denied",
            "expected": None,
            "actual": None,
        }
    ]
    assert [e["path"] for e in result["files"]] == sorted(set(CONTENT) - {"config.json"})
    assert result["removed"] == []  # the source's own files are never deleted
    assert (model / "config.json").exists()
    assert result["verified"] is False
    assert result["bytes_needed"] == len(CONTENT["config.json"])
    assert state.exists()
    again = mm.check_model(str(model), state_file=str(state))
    assert ".llmfleet-state.json" not in [e["path"] for e in again["files"]]
    assert again["hashed"] == ["config.json"]
