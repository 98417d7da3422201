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


def nccl_environment(
    mode_vars,
    mode,
    interface,
    address,
    *,
    ib_devices=(),
    gid_index=None,
    debug="",
    extra=None,
):
    """The environment NCCL, Gloo and vLLM read on a node, in the order the file lists it:
    the socket interface of every transport, ``VLLM_HOST_IP``, the transport's own
    variables (``mode_vars[mode]``, sorted), for ``ib`` the RDMA devices (port 1 of each,
    exact match) and the RoCE v2 GID index, ``NCCL_DEBUG`` when set, then ``extra``
    (sorted, last so that it wins). Every value is a string."""
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
        env["NCCL_IB_GID_INDEX"] = str(gid_index)
    if debug:
        env["NCCL_DEBUG"] = str(debug)
    env.update((name, str(value)) for name, value in sorted((extra or {}).items()))
    return env


class FilterModule:
    """NCCL filters."""

    def filters(self):
        return {"nccl_environment": nccl_environment}
