"""Swap stays off, only our stale containers are gone (logs kept), memory is checked."""

from __future__ import annotations

import json


def containers(host) -> dict[str, str]:
    # The Docker API itself: a --format template would be read as Jinja by testinfra's backend.
    out = host.check_output(
        "curl -s --unix-socket /var/run/docker.sock 'http://docker/containers/json?all=1'"
    )
    return {name.lstrip("/"): row["State"] for row in json.loads(out) for name in row["Names"]}


def test_swap_is_off_and_stays_off(host) -> None:
    fstab = host.file("/etc/fstab").content_string
    assert "# /swap.img none swap sw 0 0  # swap off: llmfleet preflight" in fstab
    assert not [line for line in fstab.splitlines() if line.split()[2:3] == ["swap"]], (
        "an active swap line is left in fstab"
    )
    assert len(host.file("/proc/swaps").content_string.strip().splitlines()) == 1
    # The fstab as it was is kept beside it (replace's backup: fstab.<pid>.<date>~).
    backups = host.check_output("ls /etc/ | grep '^fstab\\..*~$' || true").split()
    assert len(backups) == 1, backups
    assert "\n/swap.img none swap sw 0 0" in "\n" + host.file(f"/etc/{backups[0]}").content_string


def test_only_our_stale_containers_are_removed(host) -> None:
    state = containers(host)
    if host.backend.get_hostname() == "molecule-spark-1":
        assert "llmfleet-vllm" not in state and "llmfleet-ray" not in state
        assert state.get("other-exited") == "exited", "a container not ours was touched"
        logs = host.file("/var/log/llmfleet")
        assert logs.is_directory and logs.mode == 0o750
        saved = host.check_output("cat /var/log/llmfleet/llmfleet-vllm-*.log")
        assert "CUDA out of memory" in saved
    else:
        assert state.get("llmfleet-vllm") == "running", "a running container of ours was removed"


def test_memory_check_sees_the_gb10_unified_memory(host) -> None:
    result = host.ansible("llmfleet.cluster.cuda_free_memory", "required_gib=1", check=False)
    assert result["gpu_count"] == 1 and result["fits"] is True
    gpu = result["gpus"][0]
    assert gpu["name"] == "NVIDIA GB10" and gpu["unified_memory"] is True
    assert result["source"] == "nvidia-smi"
    assert gpu["source"] == "os-meminfo MemFree (unified memory)"


def test_memory_check_fails_with_the_numbers(host) -> None:
    result = host.ansible("llmfleet.cluster.cuda_free_memory", "required_gib=100000", check=False)
    assert result["fits"] is False
    assert "GPU 0 (NVIDIA GB10): free" in result["msg"] and "100000" in result["msg"]
