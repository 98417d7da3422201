"""gpu_container's entry point `pull` with Podman (a stand-in on PATH that keeps its images
and a registry in a JSON file): a pinned image is pulled only when absent, a tag alone every
run but changed only when another image arrived, nothing asked in check mode or under
`missing`; a failed pull stops with the host, the reference and the engine's reason."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.unit.roles.localhost_play import play_on_localhost

HERE = Path(__file__).parent
OLD = "1" * 64
NEW = "2" * 64
DIGEST = "sha256:" + "a" * 64
PINNED = f"vllm/vllm-openai:v0.11.0@{DIGEST}"
BY_DIGEST = f"vllm/vllm-openai@{DIGEST}"
FLOATING = "vllm/vllm-openai:nightly"

# The podman subcommands podman_image and podman_image_info run, over a state file:
# {"images": {name: id}, "registry": {name: id}, "pulls": [name, ...]}.
FAKE_PODMAN = f"""#!{sys.executable}
import json, os, sys
path = os.environ["FAKE_PODMAN_STATE"]
state = json.load(open(path))
images = state["images"]
args = [a for a in sys.argv[1:] if a not in ("--format", "json")]
def out(value):
    sys.stdout.write(json.dumps(value) + "\\n")
if args[:3] == ["image", "inspect", "{{{{.Id}}}}"]:
    if args[3] not in images:
        sys.stderr.write(f"Error: {{args[3]}}: image not known\\n")
        sys.exit(125)
    sys.stdout.write(images[args[3]] + "\\n")
    sys.exit(0)
if args[0] == "run":
    name = args[args.index("python3") + 1]
    state.setdefault("runs", []).append(name)
    json.dump(state, open(path, "w"))
    out(state["contents"][name])
    sys.exit(0)
if args[:2] == ["image", "exists"]:
    sys.exit(0 if args[2] in images else 1)
if args[:2] == ["image", "ls"]:
    out([{{"Id": images[args[2]], "Names": [args[2]]}}] if args[2] in images else [])
elif args[0] == "inspect" or args[:2] == ["image", "inspect"]:
    names = args[1:] if args[0] == "inspect" else args[2:]
    missing = [n for n in names if n not in images]
    if missing:
        sys.stderr.write(f"Error: {{missing[0]}}: image not known\\n")
        sys.exit(125)
    out([{{"Id": images[n], "RepoTags": [n]}} for n in names])
elif args[0] == "pull":
    name = args[1]
    state["pulls"].append(name)
    if name not in state["registry"]:
        json.dump(state, open(path, "w"))
        sys.stderr.write(f"Error: initializing source docker://{{name}}: manifest unknown\\n")
        sys.exit(125)
    images[name] = state["registry"][name]
    json.dump(state, open(path, "w"))
    out(images[name])
else:
    sys.stderr.write(f"fake podman: {{args}} not understood\\n")
    sys.exit(2)
"""


class Podman:
    def __init__(self, tmp_path: Path) -> None:
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        script = self.bin / "podman"
        script.write_text(FAKE_PODMAN)
        script.chmod(0o755)
        self.state_file = tmp_path / "podman.json"
        self.set(images={}, registry={})

    def set(self, images: dict[str, str], registry: dict[str, str]) -> None:
        state = {"images": images, "registry": registry, "pulls": []}
        self.state_file.write_text(json.dumps(state))

    @property
    def state(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.state_file.read_text())
        return loaded

    def pull(self, tmp_path: Path, images: list[str], *options: str, **extra: Any) -> str:
        env = {
            **os.environ,
            "PATH": f"{self.bin}{os.pathsep}{os.environ['PATH']}",
            "FAKE_PODMAN_STATE": str(self.state_file),
        }
        proc = play_on_localhost(
            HERE / "pull_images.yml", {"images": images, **extra}, *options, env=env
        )
        return f"rc={proc.returncode}\n{proc.stdout}{proc.stderr}"


def changed(output: str) -> int:
    found = re.search(r"localhost\s+: ok=\d+\s+changed=(\d+)", output)
    assert found, output[-3000:]
    return int(found.group(1))


@pytest.fixture
def podman(tmp_path: Path) -> Podman:
    return Podman(tmp_path)


def test_a_pinned_image_present_is_not_asked_for(podman: Podman, tmp_path: Path) -> None:
    podman.set(images={BY_DIGEST: OLD}, registry={BY_DIGEST: OLD})
    output = podman.pull(tmp_path, [PINNED])
    assert output.startswith("rc=0"), output[-3000:]
    assert (changed(output), podman.state["pulls"]) == (0, [])


def test_a_pinned_image_absent_is_pulled_by_its_digest(podman: Podman, tmp_path: Path) -> None:
    podman.set(images={}, registry={BY_DIGEST: OLD})
    output = podman.pull(tmp_path, [PINNED])
    assert output.startswith("rc=0"), output[-3000:]
    assert (changed(output), podman.state["pulls"]) == (1, [BY_DIGEST])


def test_a_tag_alone_is_asked_for_and_changes_only_with_another_image(
    podman: Podman, tmp_path: Path
) -> None:
    podman.set(images={FLOATING: OLD}, registry={FLOATING: OLD})
    output = podman.pull(tmp_path, [FLOATING])
    assert output.startswith("rc=0"), output[-3000:]
    assert (changed(output), podman.state["pulls"]) == (0, [FLOATING])

    podman.set(images={FLOATING: OLD}, registry={FLOATING: NEW})
    output = podman.pull(tmp_path, [FLOATING])
    assert (changed(output), podman.state["images"][FLOATING]) == (1, NEW)


def test_check_mode_and_policy_missing_ask_nothing_for_what_is_present(
    podman: Podman, tmp_path: Path
) -> None:
    podman.set(images={FLOATING: OLD}, registry={FLOATING: NEW})
    output = podman.pull(tmp_path, [FLOATING], "--check")
    assert (changed(output), podman.state["pulls"]) == (0, [])
    output = podman.pull(tmp_path, [FLOATING], llmfleet_image_pull="missing")
    assert (changed(output), podman.state["pulls"]) == (0, [])


def test_a_failed_pull_stops_with_the_host_the_reference_and_the_reason(
    podman: Podman, tmp_path: Path
) -> None:
    podman.set(images={}, registry={})
    output = podman.pull(tmp_path, [PINNED, "llmfleet-lab/vllm-runtime:1"])
    assert output.startswith("rc=2"), output[-3000:]
    message = " ".join(output.split())
    assert (
        f"localhost: pull_images.yml: podman could not pull {PINNED}: Failed to pull image"
        f" {BY_DIGEST} (Error: initializing source docker://{BY_DIGEST}: manifest unknown);"
        " llmfleet-lab/vllm-runtime:1: Failed to pull image llmfleet-lab/vllm-runtime:1"
    ) in message
    assert "Nothing on this host was stopped" in message


def test_a_policy_the_entry_point_does_not_know_is_refused(podman: Podman, tmp_path: Path) -> None:
    output = podman.pull(tmp_path, [PINNED], gpu_container_pull="sometimes")
    assert output.startswith("rc=2"), output[-3000:]
    assert "gpu_container_pull" in output and "sometimes" in output
    assert podman.state["pulls"] == []


def test_pulling_without_a_caller_is_refused(podman: Podman, tmp_path: Path) -> None:
    output = podman.pull(tmp_path, [PINNED], caller="")
    assert output.startswith("rc=2"), output[-3000:]
    assert "llmfleet.cluster.gpu_container is internal" in output
    assert podman.state["pulls"] == []


RAY_VLLM = {
    "ray": True,
    "commands": ["ray", "vllm", "pkill"],
    "vllm_options": {"tool-call-parser": "minimax_m2", "load-format": "fastsafetensors"},
    "mounts": [],
}


def contents(vllm: str, ray: str, pkill: bool = True) -> dict[str, Any]:
    return {
        "version": 2,
        "python": "3.12.3",
        "machine": "aarch64",
        "distributions": {"vllm": vllm, "ray": ray, "fastsafetensors": "0.1.15"},
        "commands": {
            "python3": "/usr/bin/python3",
            "ray": "/usr/local/bin/ray",
            "vllm": "/usr/local/bin/vllm",
            "pkill": "/usr/bin/pkill" if pkill else None,
        },
    }


def check(podman: Podman, tmp_path: Path, found: dict[str, Any], *options: str) -> str:
    state = podman.state
    state["contents"] = {BY_DIGEST: found}
    podman.state_file.write_text(json.dumps(state))
    return podman.pull(
        tmp_path,
        [PINNED],
        *options,
        checks=[{"image": PINNED, "needs": RAY_VLLM}],
        contents_dir=str(tmp_path / "contents"),
    )


def test_an_image_with_what_its_launch_needs_is_looked_into_once(
    podman: Podman, tmp_path: Path
) -> None:
    podman.set(images={BY_DIGEST: OLD}, registry={BY_DIGEST: OLD})
    output = check(podman, tmp_path, contents("0.20.1", "2.54.0"))
    assert output.startswith("rc=0"), output[-3000:]
    assert (changed(output), podman.state["runs"]) == (1, [BY_DIGEST])  # its answer kept
    assert (tmp_path / "contents" / f"{OLD}.json").is_file()
    again = check(podman, tmp_path, contents("0.20.1", "2.54.0"))
    assert again.startswith("rc=0"), again[-3000:]
    assert changed(again) == 0
    assert podman.state["runs"] == [BY_DIGEST]  # no container started the second time


def test_an_image_that_lacks_what_its_launch_needs_stops_the_run(
    podman: Podman, tmp_path: Path
) -> None:
    podman.set(images={BY_DIGEST: OLD}, registry={BY_DIGEST: OLD})
    output = check(podman, tmp_path, contents("0.11.0", "2.48.0", pkill=False))
    assert output.startswith("rc=2"), output[-3000:]
    message = " ".join(output.split())
    assert (
        f"localhost: image {PINNED} lacks what this launch needs: no pkill on its PATH;"
        " Ray 2.48.0, older than 2.52.0 (token authentication, RAY_AUTH_MODE=token, which"
        " ray_node turns on); vLLM 0.11.0, older than 0.11.1 that --tool-call-parser minimax_m2"
        " needs"
    ) in message
    assert "Nothing on this host was stopped" in message


def test_check_mode_looks_into_an_image_present_and_keeps_nothing(
    podman: Podman, tmp_path: Path
) -> None:
    podman.set(images={BY_DIGEST: OLD}, registry={BY_DIGEST: OLD})
    output = check(podman, tmp_path, contents("0.20.1", "2.54.0"), "--check")
    assert output.startswith("rc=0"), output[-3000:]
    assert not (tmp_path / "contents").exists()
