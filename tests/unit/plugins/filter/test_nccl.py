"""The NCCL / Gloo environment of a node: what nccl_env writes and publishes."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.filter.nccl import (
    FilterModule,
    nccl_environment,
)

MODE_VARS = {
    "ib": {
        "NCCL_NET_PLUGIN": "none",
        "NCCL_DMABUF_ENABLE": "0",
        "NCCL_NET_GDR_LEVEL": "LOC",
        "NCCL_NET_GDR_C2C": "0",
    },
    "socket": {"NCCL_NET": "Socket", "NCCL_IB_DISABLE": "1"},
    "gloo": {"NCCL_IB_DISABLE": "1", "NCCL_P2P_DISABLE": "1"},
}
IFACE = "enp1s0f1np1"


def test_roce_dual_rail_in_the_order_of_the_file() -> None:
    env = nccl_environment(
        MODE_VARS,
        "ib",
        IFACE,
        "192.168.100.11",
        ib_devices=["rocep1s0f1", "roceP2p1s0f1"],
        gid_index=3,
    )
    assert list(env.items()) == [
        ("NCCL_SOCKET_IFNAME", IFACE),
        ("GLOO_SOCKET_IFNAME", IFACE),
        ("UCX_NET_DEVICES", IFACE),
        ("OMPI_MCA_btl_tcp_if_include", IFACE),
        ("TP_SOCKET_IFNAME", IFACE),
        ("VLLM_HOST_IP", "192.168.100.11"),
        ("NCCL_DMABUF_ENABLE", "0"),
        ("NCCL_NET_GDR_C2C", "0"),
        ("NCCL_NET_GDR_LEVEL", "LOC"),
        ("NCCL_NET_PLUGIN", "none"),
        ("NCCL_IB_HCA", "=rocep1s0f1:1,roceP2p1s0f1:1"),
        ("NCCL_IB_GID_INDEX", "3"),
    ]


@pytest.mark.parametrize(
    ("sysfs_root", "extra"),
    [
        ("/sys", {}),
        ("/sys/", {}),
        ("/run/llmfleet-lab/sysfs", {"LLMFLEET_SYSFS_ROOT": "/run/llmfleet-lab/sysfs"}),
    ],
)
def test_an_automatic_gid_index_is_left_to_the_start_of_each_process(sysfs_root, extra) -> None:
    """The index moves between boots: under auto the environment a unit or a container keeps
    carries none (llmfleet-nccl-gid-env reads it at every start), only where to read it."""
    env = nccl_environment(
        MODE_VARS,
        "ib",
        IFACE,
        "192.168.100.11",
        ib_devices=["rocep1s0f1"],
        gid_index="auto",
        sysfs_root=sysfs_root,
    )
    assert "NCCL_IB_GID_INDEX" not in env
    assert env["NCCL_IB_HCA"] == "=rocep1s0f1:1"
    assert {k: v for k, v in env.items() if k == "LLMFLEET_SYSFS_ROOT"} == extra


def test_a_pinned_index_stays_in_the_environment_and_needs_no_sysfs() -> None:
    env = nccl_environment(
        MODE_VARS,
        "ib",
        IFACE,
        "192.168.100.11",
        ib_devices=["rocep1s0f1"],
        gid_index="5",
        sysfs_root="/run/llmfleet-lab/sysfs",
    )
    assert env["NCCL_IB_GID_INDEX"] == "5"
    assert "LLMFLEET_SYSFS_ROOT" not in env


def test_sockets_leave_the_rdma_devices_out_and_extra_wins_last() -> None:
    env = nccl_environment(
        MODE_VARS,
        "socket",
        IFACE,
        "192.168.100.12",
        debug="INFO",
        extra={"NCCL_IB_DISABLE": "0", "A_FIRST": 1},
    )
    assert "NCCL_IB_HCA" not in env and "NCCL_IB_GID_INDEX" not in env
    assert env["NCCL_NET"] == "Socket"
    assert env["NCCL_DEBUG"] == "INFO"
    assert env["NCCL_IB_DISABLE"] == "0"
    assert list(env)[-2:] == ["NCCL_DEBUG", "A_FIRST"]
    assert all(isinstance(value, str) for value in env.values())


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (
            ("rdma", IFACE, "10.0.0.1"),
            {},
            r"NCCL mode 'rdma': expected one of \['gloo', 'ib', 'socket'\]",
        ),
        (("gloo", "", "10.0.0.1"), {}, r"needs an interface and its IPv4 address"),
        (("gloo", IFACE, ""), {}, r"needs an interface and its IPv4 address"),
        (
            ("ib", IFACE, "10.0.0.1"),
            {"gid_index": 3},
            r"NCCL over RoCE needs RDMA devices and a GID index",
        ),
        (
            ("ib", IFACE, "10.0.0.1"),
            {"ib_devices": ["rocep1s0f1"]},
            r"needs RDMA devices and a GID index",
        ),
    ],
)
def test_refuses_what_nccl_could_not_use(args, kwargs, message) -> None:
    with pytest.raises(AnsibleFilterError, match=message):
        nccl_environment(MODE_VARS, *args, **kwargs)


def test_filter_is_registered() -> None:
    assert FilterModule().filters() == {"nccl_environment": nccl_environment}
