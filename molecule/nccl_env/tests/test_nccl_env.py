"""The environment file carries the RoCE settings, the fabric interface and the GID index."""

from __future__ import annotations

import ipaddress

SYSFS = "/run/llmfleet-lab/sysfs/class/infiniband"
ADDRESS = {"molecule-spark-1": "192.168.100.11", "molecule-spark-2": "192.168.100.12"}


def environment(host) -> dict[str, str]:
    content = host.file("/etc/llmfleet/nccl.env").content_string
    pairs = [
        line.split("=", 1) for line in content.splitlines() if line and not line.startswith("#")
    ]
    return {key: value for key, value in pairs}


def roce_v2_ipv4_index(host, device: str, address: str) -> int:
    wanted = "0000:0000:0000:0000:0000:ffff:" + "{:02x}{:02x}:{:02x}{:02x}".format(
        *ipaddress.IPv4Address(address).packed
    )
    for index in range(16):
        gid = host.file(f"{SYSFS}/{device}/ports/1/gids/{index}").content_string.strip()
        kind = host.file(f"{SYSFS}/{device}/ports/1/gid_attrs/types/{index}").content_string.strip()
        if gid == wanted and kind == "RoCE v2":
            return index
    raise AssertionError(f"{address} has no RoCE v2 GID on {device}")


def test_file_is_world_readable_and_owned_by_root(host) -> None:
    env_file = host.file("/etc/llmfleet/nccl.env")
    assert env_file.mode == 0o644
    assert env_file.user == "root"


def test_socket_transports_bind_to_the_fabric(host) -> None:
    env = environment(host)
    for key in (
        "NCCL_SOCKET_IFNAME",
        "GLOO_SOCKET_IFNAME",
        "UCX_NET_DEVICES",
        "OMPI_MCA_btl_tcp_if_include",
        "TP_SOCKET_IFNAME",
    ):
        assert env[key] == "enp1s0f1np1", key
    assert env["VLLM_HOST_IP"] == ADDRESS[host.backend.get_hostname()]


def test_roce_with_gpudirect_off_on_both_rails(host) -> None:
    env = environment(host)
    assert env["NCCL_NET_PLUGIN"] == "none"
    assert env["NCCL_DMABUF_ENABLE"] == "0"
    assert env["NCCL_NET_GDR_LEVEL"] == "LOC"
    assert env["NCCL_NET_GDR_C2C"] == "0"
    assert env["NCCL_IB_HCA"] == "=rocep1s0f1:1,roceP2p1s0f1:1"
    assert env["NCCL_DEBUG"] == "INFO"
    assert "NCCL_IB_DISABLE" not in env


def test_gid_index_is_the_one_the_device_shows_at_the_start(host) -> None:
    """The file carries no index (it moves between boots): the wrapper every unit and
    container starts through reads it from the device."""
    index = roce_v2_ipv4_index(host, "rocep1s0f1", ADDRESS[host.backend.get_hostname()])
    assert "NCCL_IB_GID_INDEX" not in environment(host)
    assert environment(host)["LLMFLEET_SYSFS_ROOT"] == "/run/llmfleet-lab/sysfs"
    cmd = host.run(
        "systemd-run --wait --pipe --quiet -p EnvironmentFile=/etc/llmfleet/nccl.env "
        "/usr/local/libexec/llmfleet/nccl-gid-env sh -c 'echo $NCCL_IB_GID_INDEX'"
    )
    assert cmd.rc == 0, cmd.stderr
    assert cmd.stdout.strip() == str(index)


def test_a_systemd_unit_reads_the_file(host) -> None:
    cmd = host.run(
        "systemd-run --wait --pipe --quiet -p EnvironmentFile=/etc/llmfleet/nccl.env "
        "sh -c 'echo $NCCL_IB_HCA $GLOO_SOCKET_IFNAME'"
    )
    assert cmd.rc == 0, cmd.stderr
    assert cmd.stdout.strip() == "=rocep1s0f1:1,roceP2p1s0f1:1 enp1s0f1np1"
