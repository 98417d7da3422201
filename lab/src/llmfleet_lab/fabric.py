"""The lab's fabric: veth links named like the two halves of a ConnectX-7 port.

* two nodes: a direct cable per half, ``enp1s0f1np1`` on spark-1 to ``enp1s0f1np1`` on
  spark-2 (and ``enP2p1s0f1np1`` likewise), as when two Sparks share a QSFP cable;
* three or more: one switch per half, a Linux bridge in a network namespace of the lab's
  own, as when several Sparks hang off a 200G switch.

Both ends of every veth live in node namespaces (or the lab's fabric namespace), so
removing the containers and that namespace leaves nothing behind on the host.
"""

from __future__ import annotations

import hashlib
import subprocess
import time
from collections.abc import Sequence

from llmfleet_lab import podman
from llmfleet_lab.errors import LabError
from llmfleet_lab.nodes import Node

CX7_PORTS: dict[int, tuple[str, str]] = {
    0: ("enp1s0f0np0", "enP2p1s0f0np0"),
    1: ("enp1s0f1np1", "enP2p1s0f1np1"),
}
FABRIC_MTU_MAX = 9216


def fabric_namespace(lab: str) -> str:
    return f"{lab}-fabric"


def host_command(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a command on this machine (ip, nsenter); LabError with its stderr when it fails."""
    proc = subprocess.run(list(cmd), capture_output=True, text=True, check=False, timeout=60)
    if check and proc.returncode != 0:
        raise LabError(f"`{' '.join(cmd)}` failed", detail=proc.stderr.strip())
    return proc


def namespace_exists(namespace: str) -> bool:
    # `ip netns list` prints "name" or "name (id: N)" per line
    return namespace in host_command("ip", "netns", "list").stdout.split()


def _mac(node: Node, ifname: str) -> str:
    """A stable, locally administered MAC per node and interface."""
    digest = hashlib.sha256(f"{node.container}/{ifname}".encode()).digest()
    return "02:" + ":".join(f"{b:02x}" for b in digest[:5])


def _pid(node: Node) -> int:
    pid = int(podman.inspect(node.container)["State"]["Pid"])
    if pid <= 0:
        raise LabError(f"{node.container} is not running")
    return pid


def _has_link(pid: int, ifname: str) -> bool:
    probe = host_command("nsenter", "-t", str(pid), "-n", "ip", "link", "show", ifname, check=False)
    return probe.returncode == 0


def _finish_link(node: Node, pid: int, ifname: str) -> None:
    ns = ("nsenter", "-t", str(pid), "-n")
    host_command(*ns, "ip", "link", "set", ifname, "address", _mac(node, ifname))
    host_command(*ns, "ip", "link", "set", ifname, "up")


def _wire_direct(a: Node, b: Node, ifname: str) -> bool:
    """One cable: a veth pair with the same CX7 name on both nodes. True if created."""
    pid_a, pid_b = _pid(a), _pid(b)
    present = (_has_link(pid_a, ifname), _has_link(pid_b, ifname))
    if all(present):
        return False
    for pid, here in zip((pid_a, pid_b), present, strict=True):
        if here:  # a half-cable left by a restarted peer: replace the pair
            host_command("nsenter", "-t", str(pid), "-n", "ip", "link", "del", ifname)
    host_command(
        "ip",
        "link",
        "add",
        ifname,
        "netns",
        str(pid_a),
        "type",
        "veth",
        "peer",
        "name",
        ifname,
        "netns",
        str(pid_b),
    )
    _finish_link(a, pid_a, ifname)
    _finish_link(b, pid_b, ifname)
    return True


def _wire_switched(lab: str, node: Node, port_number: int, half: int) -> bool:
    """One switch port: the node's CX7 half into the lab's bridge for that half."""
    ifname = CX7_PORTS[port_number][half]
    pid = _pid(node)
    if _has_link(pid, ifname):
        return False
    namespace = fabric_namespace(lab)
    half_label = f"p{port_number}{'ab'[half]}"
    bridge = f"sw-{half_label}"
    port = f"n{node.index}-{half_label}"
    in_ns = ("ip", "netns", "exec", namespace)
    if host_command(*in_ns, "ip", "link", "show", bridge, check=False).returncode != 0:
        host_command(*in_ns, "ip", "link", "add", bridge, "type", "bridge")
        host_command(*in_ns, "ip", "link", "set", bridge, "mtu", str(FABRIC_MTU_MAX), "up")
    host_command(*in_ns, "ip", "link", "del", port, check=False)
    host_command(
        "ip",
        "link",
        "add",
        ifname,
        "netns",
        str(pid),
        "type",
        "veth",
        "peer",
        "name",
        port,
        "netns",
        namespace,
    )
    host_command(
        *in_ns, "ip", "link", "set", port, "mtu", str(FABRIC_MTU_MAX), "master", bridge, "up"
    )
    _finish_link(node, pid, ifname)
    return True


def wire_fabric(lab: str, nodes: Sequence[Node], ports: Sequence[int]) -> int:
    """Create every missing fabric link; returns how many links were created.

    ``lab`` names the fabric namespace that holds the switches (three nodes or more).
    """
    created = 0
    if len(nodes) == 2:
        for port in ports:
            for ifname in CX7_PORTS[port]:
                created += _wire_direct(nodes[0], nodes[1], ifname)
        return created
    namespace = fabric_namespace(lab)
    if not namespace_exists(namespace):
        host_command("ip", "netns", "add", namespace)
    for node in nodes:
        for port in ports:
            for half in (0, 1):
                created += _wire_switched(lab, node, port, half)
    return created


def wait_emulated_hardware(nodes: Sequence[Node], ports: Sequence[int]) -> None:
    """The RDMA emulator mirrors every cabled half once it has seen the links."""
    netdevs = [name for port in ports for name in CX7_PORTS[port]]
    deadline = time.monotonic() + 30
    for node in nodes:
        while True:
            out = podman.exec_in(node.container, "ibdev2netdev", check=False).stdout
            if all(f"==> {name} " in out for name in netdevs):
                break
            if time.monotonic() > deadline:
                raise LabError(
                    f"{node.hostname}: the emulated RDMA devices did not appear",
                    detail=out
                    + podman.exec_in(
                        node.container,
                        "journalctl",
                        "-u",
                        "llmfleet-lab-rdma",
                        "-n",
                        "20",
                        "--no-pager",
                        check=False,
                    ).stdout,
                )
            time.sleep(0.5)
