"""Thin wrappers over the podman CLI used by the lab (rootful podman with runc)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from typing import Any

from llmfleet_lab.errors import LabError


def run(*args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    if shutil.which("podman") is None:
        raise LabError("podman is not installed", hint="run `make lab-deps` (apt-get install)")
    proc = subprocess.run(
        ["podman", *args], capture_output=True, text=True, check=False, timeout=timeout
    )
    if check and proc.returncode != 0:
        raise LabError(
            f"podman {args[0]} failed (exit {proc.returncode})",
            detail=(proc.stderr or proc.stdout).strip()[-2000:],
        )
    return proc


def image_exists(ref: str) -> bool:
    return run("image", "exists", ref, check=False).returncode == 0


def image_refs(repository: str) -> list[str]:
    out = run("images", "--format", "{{.Repository}}:{{.Tag}}", repository, check=False)
    return [line for line in out.stdout.split() if line.startswith(repository + ":")]


def remove_image(ref: str) -> bool:
    return run("rmi", ref, check=False).returncode == 0


def containers(label: str) -> list[dict[str, Any]]:
    """Every container (running or not) carrying ``label`` (``key=value``)."""
    out = run("ps", "-a", "--filter", f"label={label}", "--format", "json")
    data: list[dict[str, Any]] = json.loads(out.stdout or "[]")
    return data


def inspect(name: str) -> dict[str, Any]:
    out = run("inspect", "--type", "container", name)
    data: list[dict[str, Any]] = json.loads(out.stdout)
    return data[0]


def container_exists(name: str) -> bool:
    return run("container", "exists", name, check=False).returncode == 0


def remove_container(name: str, attempts: int = 3) -> None:
    """``podman rm -f``, again if the kill raced the container's own shutdown.

    A node busy shutting down (vLLM ranks, Ray) can stop by itself between podman's
    SIGKILL and its removal; podman then reports "container state improper"."""
    for attempt in range(1, attempts + 1):
        proc = run("rm", "-f", "-t", "5", name, check=False)
        if proc.returncode == 0 or not container_exists(name):
            return
        if attempt == attempts:
            raise LabError(
                f"podman rm failed (exit {proc.returncode})",
                detail=(proc.stderr or proc.stdout).strip()[-2000:],
            )
        time.sleep(2)


def network_exists(name: str) -> bool:
    return run("network", "exists", name, check=False).returncode == 0


def network_subnet(name: str) -> str:
    """The first subnet of network ``name`` (``10.89.0.0/24``)."""
    data: list[dict[str, Any]] = json.loads(run("network", "inspect", name).stdout)
    return str(data[0]["subnets"][0]["subnet"])


def network_labels(name: str) -> dict[str, str]:
    """The labels of network ``name`` ({} when it has none)."""
    data: list[dict[str, Any]] = json.loads(run("network", "inspect", name).stdout)
    return dict(data[0].get("labels") or {})


def exec_in(
    container: str, *cmd: str, check: bool = True, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return run("exec", container, *cmd, check=check, timeout=timeout)
