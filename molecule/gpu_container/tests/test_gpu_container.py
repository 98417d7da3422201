"""The shared container launch in Podman: supervised, sized, given its environment and mounts."""

from __future__ import annotations

import json

NAME = "llmfleet-molecule-gpu"


def inspect(host) -> dict:
    return json.loads(host.check_output(f"podman container inspect {NAME}"))[0]


def test_container_runs_supervised_and_is_never_removed(host) -> None:
    info = inspect(host)
    assert info["State"]["Running"] is True
    assert info["HostConfig"]["RestartPolicy"]["Name"] == "always"
    assert info["HostConfig"]["AutoRemove"] is False
    assert host.service("podman-restart.service").is_enabled


def test_host_network_and_ipc(host) -> None:
    # The namespaces themselves (Podman 4.3's inspect says IpcMode "shareable" for --ipc host).
    pid = inspect(host)["State"]["Pid"]
    for namespace in ("net", "ipc"):
        theirs = host.check_output(f"readlink /proc/{pid}/ns/{namespace}")
        assert theirs == host.check_output(f"readlink /proc/1/ns/{namespace}"), namespace
    # The host's IPC namespace: the container sees the node's own /dev/shm.
    host.run_test("echo from-the-node > /dev/shm/llmfleet-molecule-gpu")
    assert (
        host.check_output(f"podman exec {NAME} /usr/bin/cat /dev/shm/llmfleet-molecule-gpu")
        == "from-the-node"
    )


def test_entrypoint_and_arguments(host) -> None:
    info = inspect(host)
    assert info["Config"]["Entrypoint"] in ("/usr/bin/sleep", ["/usr/bin/sleep"])
    assert info["Args"] == ["infinity"]


def test_environment_from_the_arguments_and_the_file(host) -> None:
    env = host.check_output(f"podman exec {NAME} /usr/bin/cat /proc/1/environ").split("\x00")
    assert "NCCL_SOCKET_IFNAME=enp1s0f1np1" in env
    assert "MOLECULE_SECRET=from-the-env-file" in env


def test_mount_is_read_only(host) -> None:
    mounts = {m["Destination"]: m for m in inspect(host)["Mounts"]}
    assert mounts["/srv"]["RW"] is False
    cmd = host.run(f"podman exec {NAME} /usr/bin/dash -c 'echo x > /srv/molecule-gpu-share.txt'")
    assert cmd.rc != 0
    assert (
        host.check_output(f"podman exec {NAME} /usr/bin/cat /srv/molecule-gpu-share.txt")
        == "mounted read-only"
    )


def test_no_rdma_options_without_rdma_devices(host) -> None:
    # The lab has no /dev/infiniband: no device, no IPC_LOCK, no memlock limit asked for.
    assert not host.file("/dev/infiniband").exists
    info = inspect(host)
    assert "CAP_IPC_LOCK" not in (info["HostConfig"].get("CapAdd") or [])
    assert not [
        u for u in info["HostConfig"].get("Ulimits") or [] if "memlock" in u["Name"].lower()
    ]
    assert not info["HostConfig"].get("Devices")
