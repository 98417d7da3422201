"""module_utils/_container/gpu_support: whether Docker or Podman can give a container the NVIDIA
GPUs, from the engine's info, the NVIDIA hook and the CDI specs."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._container.gpu_support import (
    cdi_spec_files,
    docker_runtimes,
    engine_info,
    gpu_specs,
    gpu_support,
    spec_kinds,
)

DIRS = ["/etc/cdi", "/var/run/cdi"]
HOOK = "/usr/bin/nvidia-container-runtime-hook"
SPEC = "/var/run/cdi/nvidia.yaml"
NVIDIA_YAML = "---\ncdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: all\n"
NVIDIA_JSON = '{"cdiVersion":"0.6.0","kind":"nvidia.com/gpu","devices":[{"name":"all"}]}'


def test_docker_info_runtimes() -> None:
    info = engine_info(
        '{"Runtimes": {"runc": {"path": "runc"}, "nvidia": {"path": "nvidia-container-runtime"},'
        ' "io.containerd.runc.v2": {}}, "DefaultRuntime": "runc"}'
    )
    assert docker_runtimes(info) == ["io.containerd.runc.v2", "nvidia", "runc"]


@pytest.mark.parametrize("stdout", ["", "not json", "[]", '{"Runtimes": null}'])
def test_no_info_or_no_runtimes_lists_none(stdout: str) -> None:
    assert docker_runtimes(engine_info(stdout)) == []


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        (NVIDIA_YAML, ["nvidia.com/gpu"]),
        (NVIDIA_JSON, ["nvidia.com/gpu"]),
        ("kind: 'vendor.example/net'\n", ["vendor.example/net"]),
        ("devicekind: nvidia.com/gpu\n", []),
        ("", []),
    ],
)
def test_spec_kinds(text: str, kinds: list[str]) -> None:
    assert spec_kinds(text) == kinds


def test_spec_files_and_those_for_gpus(tmp_path: Path) -> None:
    etc, run = tmp_path / "etc", tmp_path / "run"
    etc.mkdir()
    (etc / "net.yaml").write_text("kind: vendor.example/net\n")
    (etc / "README").write_text("kind: nvidia.com/gpu\n")  # not a spec file
    (etc / "nvidia.json").write_text(NVIDIA_JSON)
    run.mkdir()
    (run / "nvidia.yaml").write_text(NVIDIA_YAML)
    files = cdi_spec_files([str(etc), str(tmp_path / "missing"), str(run)])
    assert files == [str(etc / "net.yaml"), str(etc / "nvidia.json"), str(run / "nvidia.yaml")]
    texts = {path: Path(path).read_text() for path in files}
    assert gpu_specs(files, texts.get) == [str(etc / "nvidia.json"), str(run / "nvidia.yaml")]
    assert gpu_specs(files, lambda path: None) == []


@pytest.mark.parametrize(
    ("runtimes", "hook", "specs", "found"),
    [
        (["nvidia", "runc"], None, [], "the nvidia runtime"),
        (["runc"], HOOK, [], HOOK),
        (["runc"], None, [SPEC], f"CDI spec for nvidia.com/gpu: {SPEC}"),
    ],
)
def test_docker_with_any_part_of_the_toolkit(
    runtimes: list[str], hook: str | None, specs: list[str], found: str
) -> None:
    assert gpu_support("docker", runtimes, hook, specs, DIRS) == {
        "supported": True,
        "reason": found,
    }


def test_docker_without_the_toolkit_is_no_and_says_how() -> None:
    answer = gpu_support("docker", ["io.containerd.runc.v2", "runc"], None, [], DIRS)
    assert answer["supported"] is False
    assert answer["reason"].startswith(
        "Docker's runtimes (io.containerd.runc.v2, runc) lack nvidia, "
        "nvidia-container-runtime-hook is not on the PATH and no CDI spec in "
        "/etc/cdi, /var/run/cdi declares nvidia.com/gpu"
    )
    assert "nvidia-ctk runtime configure --runtime=docker" in answer["reason"]


def test_podman_needs_a_cdi_spec_whatever_docker_has() -> None:
    # the nvidia runtime and the hook serve Docker's --gpus, not Podman's CDI device
    answer = gpu_support("podman", ["nvidia"], HOOK, [], DIRS)
    assert answer["supported"] is False
    assert "no CDI spec in /etc/cdi, /var/run/cdi declares nvidia.com/gpu" in answer["reason"]
    assert "nvidia-ctk cdi generate" in answer["reason"]
    assert gpu_support("podman", [], None, [SPEC], DIRS)["supported"] is True
