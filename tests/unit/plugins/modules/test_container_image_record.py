"""modules/container_image_record: what a container runs recorded on the node, from a fake
engine's inspect output (Docker's and Podman's forms), written only when it changes, mode
0644; forgetting; check and diff mode; the engine's refusal in the message; and through
`ansible`."""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.modules import container_image_record

from tests.unit.plugins.conftest import ansible_adhoc

RunModule = Callable[..., tuple[int, dict[str, Any]]]
HEX = "0123456789abcdef" * 4
NEW = "fedcba9876543210" * 4
REF = f"vllm/vllm-openai:v0.11.0@sha256:{HEX}"

# A stand-in for `docker`/`podman`: `container inspect NAME` and `image inspect ID` answer
# with the JSON files of FAKE_ENGINE_DIR (container-NAME.json, image-ID.json), as the
# engines do; anything missing fails the way they fail.
FAKE_ENGINE = f"""#!{sys.executable}
import os, sys
kind, verb, what = sys.argv[1:4]
path = os.path.join(os.environ["FAKE_ENGINE_DIR"], f"{{kind}}-{{what.replace(':', '_')}}.json")
if verb != "inspect" or not os.path.exists(path):
    sys.stdout.write("[]\\n")
    sys.stderr.write(f"Error: No such {{kind}}: {{what}}\\n")
    sys.exit(1)
sys.stdout.write(open(path).read())
"""


class FakeEngine:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def container(self, name: str, image: str) -> None:
        (self.folder / f"container-{name}.json").write_text(
            json.dumps([{"Id": "c" * 64, "Name": name, "Image": image}])
        )

    def image(self, image: str, digests: list[str] | None) -> None:
        (self.folder / f"image-{image.replace(':', '_')}.json").write_text(
            json.dumps([{"Id": image, "RepoTags": [], "RepoDigests": digests}])
        )


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeEngine:
    bin_dir = tmp_path / "bin"
    data = tmp_path / "engine"
    bin_dir.mkdir()
    data.mkdir()
    for name in ("docker", "podman"):
        script = bin_dir / name
        script.write_text(FAKE_ENGINE)
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_ENGINE_DIR", str(data))
    return FakeEngine(data)


def record_args(path: Path, **more: Any) -> dict[str, Any]:
    return {"name": "llmfleet-vllm", "reference": REF, "path": str(path), **more}


def test_records_what_a_docker_container_runs_once(
    engine: FakeEngine, tmp_path: Path, run_module: RunModule
) -> None:
    engine.container("llmfleet-vllm", f"sha256:{HEX}")
    engine.image(f"sha256:{HEX}", [f"vllm/vllm-openai@sha256:{HEX}"])
    path = tmp_path / "var" / "lib" / "llmfleet" / "images.json"
    rc, first = run_module(container_image_record, record_args(path))
    assert rc == 0, first
    entry = {
        "reference": REF,
        "image_id": f"sha256:{HEX}",
        "repo_digests": [f"vllm/vllm-openai@sha256:{HEX}"],
    }
    assert (first["changed"], first["record"], first["images"]) == (
        True,
        entry,
        {"llmfleet-vllm": entry},
    )
    assert json.loads(path.read_text()) == {"version": 1, "containers": {"llmfleet-vllm": entry}}
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o755
    written = path.stat().st_mtime_ns

    rc, again = run_module(container_image_record, record_args(path))
    assert rc == 0, again
    assert again["changed"] is False
    assert path.stat().st_mtime_ns == written


def test_a_podman_container_and_a_local_image_keep_the_other_entries(
    engine: FakeEngine, tmp_path: Path, run_module: RunModule
) -> None:
    path = tmp_path / "images.json"
    ray = {"reference": "ray:1", "image_id": "sha256:" + "1" * 64, "repo_digests": []}
    path.write_text(json.dumps({"version": 1, "containers": {"llmfleet-ray": ray}}))
    engine.container("llmfleet-vllm", NEW)
    engine.image(NEW, None)
    rc, result = run_module(
        container_image_record,
        record_args(path, engine="podman", reference="llmfleet-lab/vllm-runtime:1"),
    )
    assert rc == 0, result
    assert result["record"] == {
        "reference": "llmfleet-lab/vllm-runtime:1",
        "image_id": f"sha256:{NEW}",
        "repo_digests": [],
    }
    assert set(json.loads(path.read_text())["containers"]) == {"llmfleet-ray", "llmfleet-vllm"}


def test_a_new_image_changes_the_record_with_a_diff(
    engine: FakeEngine, tmp_path: Path, run_module: RunModule
) -> None:
    path = tmp_path / "images.json"
    engine.container("llmfleet-vllm", f"sha256:{HEX}")
    engine.image(f"sha256:{HEX}", [])
    assert run_module(container_image_record, record_args(path))[0] == 0
    engine.container("llmfleet-vllm", f"sha256:{NEW}")
    engine.image(f"sha256:{NEW}", [])
    rc, result = run_module(container_image_record, {**record_args(path), "_ansible_diff": True})
    assert rc == 0, result
    assert result["changed"] is True
    assert HEX in result["diff"]["before"] and NEW in result["diff"]["after"]
    assert NEW in path.read_text()


def test_check_mode_writes_nothing_and_predicts_the_record_of_a_container_to_come(
    engine: FakeEngine, tmp_path: Path, run_module: RunModule
) -> None:
    path = tmp_path / "images.json"
    engine.container("llmfleet-vllm", f"sha256:{HEX}")
    engine.image(f"sha256:{HEX}", [])
    rc, result = run_module(
        container_image_record, {**record_args(path), "_ansible_check_mode": True}
    )
    assert (rc, result["changed"], path.exists()) == (0, True, False)
    rc, result = run_module(
        container_image_record,
        {**record_args(path, name="to-be-created"), "_ansible_check_mode": True},
    )
    assert (rc, result["changed"], result["record"]) == (0, True, None)


def test_a_container_the_engine_does_not_have_fails_with_its_message(
    engine: FakeEngine, tmp_path: Path, run_module: RunModule
) -> None:
    rc, result = run_module(container_image_record, record_args(tmp_path / "images.json"))
    assert rc == 1
    assert result["msg"] == (
        "docker has no container llmfleet-vllm to record: Error: No such container: llmfleet-vllm"
    )


def test_an_image_the_engine_cannot_inspect_fails_naming_it(
    engine: FakeEngine, tmp_path: Path, run_module: RunModule
) -> None:
    engine.container("llmfleet-vllm", f"sha256:{HEX}")
    rc, result = run_module(container_image_record, record_args(tmp_path / "images.json"))
    assert rc == 1
    assert result["msg"].startswith(
        f"docker cannot inspect image sha256:{HEX} of container llmfleet-vllm"
    )


def test_forgetting_removes_one_entry_and_writes_no_file_where_there_is_none(
    engine: FakeEngine, tmp_path: Path, run_module: RunModule
) -> None:
    path = tmp_path / "images.json"
    rc, result = run_module(
        container_image_record, {"name": "llmfleet-vllm", "state": "absent", "path": str(path)}
    )
    assert (rc, result["changed"], path.exists()) == (0, False, False)
    keep = {"reference": "ray:1", "image_id": "sha256:1", "repo_digests": []}
    path.write_text(
        json.dumps({"version": 1, "containers": {"llmfleet-ray": keep, "llmfleet-vllm": keep}})
    )
    path.chmod(0o600)
    args = {"name": "llmfleet-vllm", "state": "absent", "path": str(path)}
    rc, result = run_module(container_image_record, args)
    assert (rc, result["changed"], result["images"]) == (0, True, {"llmfleet-ray": keep})
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert run_module(container_image_record, args)[1]["changed"] is False


def test_a_foreign_file_is_replaced_by_the_record(
    engine: FakeEngine, tmp_path: Path, run_module: RunModule
) -> None:
    path = tmp_path / "images.json"
    path.write_text("not a record\n")
    engine.container("llmfleet-vllm", f"sha256:{HEX}")
    engine.image(f"sha256:{HEX}", [])
    rc, result = run_module(container_image_record, record_args(path))
    assert (rc, result["changed"]) == (0, True)
    assert json.loads(path.read_text())["version"] == 1


def test_present_needs_the_reference(tmp_path: Path, run_module: RunModule) -> None:
    rc, result = run_module(
        container_image_record, {"name": "llmfleet-vllm", "path": str(tmp_path / "x.json")}
    )
    assert rc == 1
    assert "reference" in result["msg"]


def test_through_ansible(engine: FakeEngine, tmp_path: Path) -> None:
    engine.container("llmfleet-ray", f"sha256:{HEX}")
    engine.image(f"sha256:{HEX}", [f"vllm/vllm-openai@sha256:{HEX}"])
    path = tmp_path / "images.json"
    status, result = ansible_adhoc(
        "llmfleet.cluster.container_image_record",
        f"name=llmfleet-ray reference={REF} path={path}",
        env={"PATH": os.environ["PATH"], "FAKE_ENGINE_DIR": str(engine.folder)},
    )
    assert status == "CHANGED", result
    assert result["images"]["llmfleet-ray"]["repo_digests"] == [f"vllm/vllm-openai@sha256:{HEX}"]
