"""module_utils/_model/manifest_keep through check_model(keep_in=...): a change of revision
keeps the files it replaces, going back takes them back without a download, the keep folder
holds one generation, and a kept file that does not verify is not trusted."""

from __future__ import annotations

import os
from pathlib import Path

from ansible_collections.llmfleet.cluster.plugins.module_utils._model import manifest as mm

from tests.unit.plugins.module_utils._model.test_manifest import (
    CONTENT,
    git_sha1,
    make_model,
    reference,
    sha256,
)

# Revision "next": one weight file and the config changed; the hub names the small file by
# its git blob sha1 only, the weights by their sha256 only.
NEXT = {
    **CONTENT,
    "config.json": b'{"model_type": "qwen3", "rope_theta": 1000000}\n',
    "model-00002-of-00002.safetensors": b"\x03" * 3000,
}


def hub_reference(content: dict[str, bytes]) -> list[dict[str, object]]:
    """As the hub gives it: sha256 for the weights, the git blob sha1 for the rest."""
    return [
        {"path": rel, "size": len(data), "sha256": sha256(data)}
        if rel.endswith(".safetensors")
        else {"path": rel, "size": len(data), "git_sha1": git_sha1(data)}
        for rel, data in sorted(content.items())
    ]


def check(model: Path, state: Path, keep: Path, content: dict[str, bytes]) -> dict:
    return mm.check_model(
        str(model), hub_reference(content), mode="quick", state_file=str(state),
        remove_bad=True, keep_in=str(keep),
    )  # fmt: skip


def download(model: Path, result: dict, content: dict[str, bytes]) -> None:
    """What the hub's download would write: the files still missing."""
    for rel in result["missing"]:
        (model / rel).parent.mkdir(parents=True, exist_ok=True)
        (model / rel).write_bytes(content[rel])


def kept(keep: Path) -> set[str]:
    return {p.name for p in keep.iterdir() if p.is_file()}


def test_going_back_takes_the_replaced_files_back_without_a_download(tmp_path: Path) -> None:
    model, state, keep = make_model(tmp_path / "m"), tmp_path / "m.json", tmp_path / "keep"
    assert check(model, state, keep, CONTENT)["verified"]

    # To next: the two changed files are kept (by both hashes), then missing, then fetched.
    result = check(model, state, keep, NEXT)
    changed = ["config.json", "model-00002-of-00002.safetensors"]
    assert (result["removed"], result["missing"], result["taken_back"]) == (changed, [], [])
    assert sorted(b["path"] for b in result["bad"]) == changed
    assert not result["verified"]
    assert kept(keep) == {
        f"{kind}-{digest(CONTENT[rel])}" for rel in changed
        for kind, digest in (("sha256", sha256), ("git_sha1", git_sha1))
    }  # fmt: skip
    assert not (model / "config.json").exists()
    result = check(model, state, keep, NEXT)
    assert sorted(result["missing"]) == changed
    download(model, result, NEXT)
    assert check(model, state, keep, NEXT)["verified"]

    # Back to the first revision: taken back from the keep folder, verified, nothing missing.
    result = check(model, state, keep, CONTENT)
    assert result["taken_back"] == changed
    assert sorted(result["removed"]) == changed
    assert result["verified"], result
    assert (result["missing"], result["bad"], result["changed"]) == ([], [], True)
    for rel, data in CONTENT.items():
        assert (model / rel).read_bytes() == data, rel
    # One generation: next's files, kept by this run; nothing of the old one is left, and
    # no kept file shares the model's.
    assert kept(keep) == {
        f"{kind}-{digest(NEXT[rel])}" for rel in changed
        for kind, digest in (("sha256", sha256), ("git_sha1", git_sha1))
    }  # fmt: skip
    inodes = {(model / rel).stat().st_ino for rel in CONTENT}
    assert not inodes & {p.stat().st_ino for p in keep.iterdir()}
    assert oct(keep.stat().st_mode & 0o777) == "0o700"
    # And a second run has nothing to do.
    again = check(model, state, keep, CONTENT)
    assert (again["verified"], again["changed"], again["hashed"]) == (True, False, [])


def test_a_kept_file_whose_content_changed_is_checked_and_not_trusted(tmp_path: Path) -> None:
    model, state, keep = make_model(tmp_path / "m"), tmp_path / "m.json", tmp_path / "keep"
    check(model, state, keep, CONTENT)
    check(model, state, keep, NEXT)
    # Someone wrote into the kept weights: their name says another content.
    name = f"sha256-{sha256(CONTENT['model-00002-of-00002.safetensors'])}"
    (keep / name).write_bytes(b"\x09" * 3000)
    result = check(model, state, keep, CONTENT)
    assert "model-00002-of-00002.safetensors" in result["taken_back"]
    assert [b["path"] for b in result["bad"]] == ["model-00002-of-00002.safetensors"]
    assert not result["verified"]


def test_without_keep_in_or_in_check_mode_nothing_is_kept(tmp_path: Path) -> None:
    model, state, keep = make_model(tmp_path / "m"), tmp_path / "m.json", tmp_path / "keep"
    check(model, state, keep, CONTENT)
    assert not keep.exists()  # nothing to keep yet
    result = mm.check_model(
        str(model), hub_reference(NEXT), mode="quick", state_file=str(state),
        remove_bad=True, keep_in=str(keep), check_mode=True,
    )  # fmt: skip
    assert sorted(result["removed"]) == ["config.json", "model-00002-of-00002.safetensors"]
    assert (model / "config.json").exists() and not keep.exists()
    result = mm.check_model(
        str(model), reference(NEXT), mode="quick", state_file=str(state), remove_bad=True
    )
    assert sorted(result["removed"]) == ["config.json", "model-00002-of-00002.safetensors"]
    assert not keep.exists() and not (model / "config.json").exists()
    assert os.listdir(model)
