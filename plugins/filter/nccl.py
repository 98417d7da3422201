"""Filters for the NCCL / Gloo environment of a node."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

# Every socket-based transport a launch across nodes may use, bound to one interface.
_SOCKET_INTERFACE_VARIABLES = (
    "NCCL_SOCKET_IFNAME",
    "GLOO_SOCKET_IFNAME",
    "UCX_NET_DEVICES",
    "OMPI_MCA_btl_tcp_if_include",
    "TP_SOCKET_IFNAME",
)
# The GID index is read at every start by the wrapper role nccl_env installs
# (files/llmfleet-nccl-gid-env): the environment carries no index, only where to read it.
GID_INDEX_AT_START = "auto"
DEFAULT_SYSFS_ROOT = "/sys"


def nccl_environment(
    mode_vars,
    mode,
    interface,
    address,
    *,
    ib_devices=(),
    gid_index=None,
    sysfs_root=DEFAULT_SYSFS_ROOT,
    debug="",
    extra=None,
):
    """The environment NCCL, Gloo and vLLM read on a node, in the order the file lists it:
    the socket interface of every transport, ``VLLM_HOST_IP``, the transport's own
    variables (``mode_vars[mode]``, sorted), for ``ib`` the RDMA devices (port 1 of each,
    exact match) and a pinned RoCE v2 GID index, ``NCCL_DEBUG`` when set, then ``extra``
    (sorted, last so that it wins). Every value is a string.

    ``gid_index`` ``auto`` leaves ``NCCL_IB_GID_INDEX`` out: the wrapper every consumer
    starts through reads it from the devices at each start (it moves between boots), under
    ``LLMFLEET_SYSFS_ROOT`` when ``sysfs_root`` is not ``/sys``."""
    if mode not in mode_vars:
        raise AnsibleFilterError(f"NCCL mode {mode!r}: expected one of {sorted(mode_vars)}")
    if not interface or not address:
        raise AnsibleFilterError(
            "NCCL environment needs an interface and its IPv4 address,"
            f" got {interface!r} and {address!r}"
        )
    env = dict.fromkeys(_SOCKET_INTERFACE_VARIABLES, str(interface))
    env["VLLM_HOST_IP"] = str(address)
    env.update((name, str(value)) for name, value in sorted(mode_vars[mode].items()))
    if mode == "ib":
        if not ib_devices or gid_index is None or str(gid_index) == "":
            raise AnsibleFilterError(
                f"NCCL over RoCE needs RDMA devices and a GID index, got {list(ib_devices)!r}"
                f" and {gid_index!r}"
            )
        env["NCCL_IB_HCA"] = "=" + ",".join(f"{device}:1" for device in ib_devices)
        if str(gid_index) != GID_INDEX_AT_START:
            env["NCCL_IB_GID_INDEX"] = str(gid_index)
        elif sysfs_root and str(sysfs_root).rstrip("/") != DEFAULT_SYSFS_ROOT:
            env["LLMFLEET_SYSFS_ROOT"] = str(sysfs_root)
    if debug:
        env["NCCL_DEBUG"] = str(debug)
    env.update((name, str(value)) for name, value in sorted((extra or {}).items()))
    return env


class FilterModule:
    """NCCL filters."""

    def filters(self):
        return {"nccl_environment": nccl_environment}
