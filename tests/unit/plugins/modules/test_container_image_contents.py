"""modules/container_image_contents: a stand-in engine on PATH whose `run` really runs the
script with this Python (as an image's python3 would), answers kept per image ID and read
back without a second run, an image that cannot run the script not kept, mounts that exist
given read-only, check mode."""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.modules import container_image_contents

RunModule = Callable[..., tuple[int, dict[str, Any]]]
HEX = "0123456789abcdef" * 4
IMAGE = f"vllm/vllm-openai@sha256:{HEX}"
CHECK_MODE = {"_ansible_check_mode": True}

# `image inspect --format {{.Id}} NAME` answers from FAKE_ENGINE_DIR/images.json (name ->
# ID); `run ... --entrypoint python3 NAME -c SCRIPT` logs its arguments and runs SCRIPT with
# this Python, or fails as an image without python3 does (names in no_python.json).
FAKE_ENGINE = f"""#!{sys.executable}
import json, os, subprocess, sys
folder = os.environ["FAKE_ENGINE_DIR"]
images = json.load(open(os.path.join(folder, "images.json")))
args = sys.argv[1:]
if args[:2] == ["image", "inspect"]:
    name = args[-1]
    if name not in images:
        sys.stderr.write(f"Error: No such image: {{name}}\\n")
        sys.exit(1)
    print(images[name])
    sys.exit(0)
if args[0] == "run":
    with open(os.path.join(folder, "runs.log"), "a") as log:
        log.write(json.dumps(args) + "\\n")
    name = args[args.index("python3") + 1]
    if name in json.load(open(os.path.join(folder, "no_python.json"))):
        sys.stderr.write('docker: exec: "python3": executable file not found in $PATH\\n')
        sys.exit(127)
    sys.exit(subprocess.run([sys.executable] + args[args.index(name) + 1:]).returncode)
sys.exit(2)
"""


class Engine:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.images({})
        (folder / "no_python.json").write_text("[]")

    def images(self, images: dict[str, str], no_python: tuple[str, ...] = ()) -> None:
        (self.folder / "images.json").write_text(json.dumps(images))
        (self.folder / "no_python.json").write_text(json.dumps(list(no_python)))

    @property
    def runs(self) -> list[list[str]]:
        log = self.folder / "runs.log"
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Engine:
    bin_dir, data = tmp_path / "bin", tmp_path / "engine"
    bin_dir.mkdir()
    data.mkdir()
    for name in ("docker", "podman"):
        (bin_dir / name).write_text(FAKE_ENGINE)
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_ENGINE_DIR", str(data))
    return Engine(data)


def args(tmp_path: Path, **more: Any) -> dict[str, Any]:
    return {"image": IMAGE, "cache_dir": str(tmp_path / "cache"), **more}


def test_runs_the_image_once_and_keeps_the_answer_per_image_id(
    engine: Engine, tmp_path: Path, run_module: RunModule
) -> None:
    engine.images({IMAGE: f"sha256:{HEX}"})
    rc, first = run_module(container_image_contents, args(tmp_path))
    assert rc == 0, first
    assert (first["changed"], first["cached"], first["image_id"]) == (True, False, f"sha256:{HEX}")
    assert first["contents"]["commands"]["python3"]
    assert "torch" in first["contents"]["distributions"]
    [run] = engine.runs
    assert run[:6] == ["run", "--rm", "--pull", "never", "--network", "none"]
    assert run[6:9] == ["--entrypoint", "python3", IMAGE]
    path = Path(first["path"])
    assert path == tmp_path / "cache" / f"{HEX}.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644

    rc, again = run_module(container_image_contents, args(tmp_path))
    assert rc == 0, again
    assert (again["changed"], again["cached"]) == (False, True)
    assert again["contents"] == first["contents"]
    assert len(engine.runs) == 1  # no second container


def test_a_podman_id_and_mounts_that_exist_read_only(
    engine: Engine, tmp_path: Path, run_module: RunModule
) -> None:
    venv = tmp_path / "venv"
    venv.mkdir()
    engine.images({"llmfleet-lab/vllm-runtime:1": HEX})
    rc, result = run_module(
        container_image_contents,
        args(
            tmp_path,
            image="llmfleet-lab/vllm-runtime:1",
            engine="podman",
            mounts=[f"{venv}:/opt/vllm:rw", str(tmp_path / "absent")],
        ),
    )
    assert rc == 0, result
    assert result["image_id"] == f"sha256:{HEX}"
    [run] = engine.runs
    assert run[6:8] == ["--volume", f"{venv}:/opt/vllm:ro"]
    assert "--volume" not in run[8:]
    assert Path(result["path"]).name.startswith(f"{HEX}-")


def test_a_mount_created_after_the_first_run_is_the_same_answer(
    engine: Engine, tmp_path: Path, run_module: RunModule
) -> None:
    # A fresh node: the model's folder (a mount of the Ray container) is made later in the
    # run; the next run found another cache file's name and looked again ("changed" on the
    # second run of a fresh lab on the Ray path).
    engine.images({IMAGE: HEX})
    later = tmp_path / "models"
    given = args(tmp_path, mounts=[str(later)])
    rc, first = run_module(container_image_contents, given)
    assert rc == 0, first
    assert first["changed"] is True
    later.mkdir()
    rc, again = run_module(container_image_contents, given)
    assert rc == 0, again
    assert (again["changed"], again["cached"], again["path"]) == (False, True, first["path"])
    assert len(engine.runs) == 1


def test_an_image_without_python3_is_reported_and_not_kept(
    engine: Engine, tmp_path: Path, run_module: RunModule
) -> None:
    engine.images({IMAGE: HEX}, no_python=(IMAGE,))
    rc, result = run_module(container_image_contents, args(tmp_path))
    assert rc == 0, result
    assert result["changed"] is False
    assert result["contents"]["error"].startswith("python3 did not run in it (exit 127): docker:")
    assert not (tmp_path / "cache").exists()
    run_module(container_image_contents, args(tmp_path))
    assert len(engine.runs) == 2  # looked at again


def test_an_absent_image_fails_except_in_check_mode(
    engine: Engine, tmp_path: Path, run_module: RunModule
) -> None:
    rc, result = run_module(container_image_contents, args(tmp_path))
    assert rc == 1
    assert result["msg"] == (
        f"docker has no image {IMAGE} to look into: Error: No such image: {IMAGE}"
    )
    rc, result = run_module(container_image_contents, {**args(tmp_path), **CHECK_MODE})
    assert rc == 0, result
    assert (result["changed"], result["contents"]) == (False, None)


def test_check_mode_looks_but_keeps_nothing(
    engine: Engine, tmp_path: Path, run_module: RunModule
) -> None:
    engine.images({IMAGE: HEX})
    rc, result = run_module(container_image_contents, {**args(tmp_path), **CHECK_MODE})
    assert rc == 0, result
    assert result["changed"] is True and result["contents"]["python"]
    assert not (tmp_path / "cache").exists()


def test_a_host_without_the_engine_has_no_image_in_check_mode(
    tmp_path: Path, run_module: RunModule, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The validation play looks before any change: a fresh host may not have Docker yet.
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    rc, result = run_module(container_image_contents, {**args(tmp_path), **CHECK_MODE})
    assert rc == 0, result
    assert (result["changed"], result["contents"]) == (False, None)
    rc, result = run_module(container_image_contents, args(tmp_path))
    assert rc == 1 and "docker" in result["msg"]
