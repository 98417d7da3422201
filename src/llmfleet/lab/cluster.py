"""The lab cluster: systemd node containers joined by CX7-named veth links.

Each node is a privileged podman container booting systemd (hostname ``spark-N``) on a
management network. The fabric is built from real veth pairs named like the two halves of
a ConnectX-7 port:

* two nodes: a direct cable per half, ``enp1s0f1np1`` on spark-1 to ``enp1s0f1np1`` on
  spark-2 (and ``enP2p1s0f1np1`` likewise), as when two Sparks share a QSFP cable;
* three or more: one switch per half, a Linux bridge in a network namespace of the lab's
  own, as when several Sparks hang off a 200G switch.

Both ends of every veth live in node namespaces (or the lab's fabric namespace), so
removing the containers and that namespace leaves nothing behind on the host.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from rich.console import Console

from llmfleet.lab import access, podman
from llmfleet.lab.errors import LabError
from llmfleet.lab.image import ensure_image, host_ca_bundle, node_image_ref

DEFAULT_LAB = "llmfleet-lab"
LAB_LABEL = "llmfleet.lab"
NODE_LABEL = "llmfleet.lab.node"
CX7_PORTS: dict[int, tuple[str, str]] = {
    0: ("enp1s0f0np0", "enP2p1s0f0np0"),
    1: ("enp1s0f1np1", "enP2p1s0f1np1"),
}
SETTINGS_FILE = "/etc/llmfleet-lab/settings.json"
EMULATED_SYSFS = "/run/llmfleet-lab/sysfs"
# Where a node keeps its trust bundle (Debian); the lab mounts this machine's over it.
NODE_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
BOOT_TIMEOUT_S = 180
FABRIC_MTU_MAX = 9216


@dataclass(frozen=True)
class Node:
    """A node container: its name on the host, its hostname inside, its index (1-based)."""

    container: str
    hostname: str
    index: int

    @classmethod
    def of_lab(cls, lab: str, index: int) -> Node:
        return cls(container=f"{lab}-spark-{index}", hostname=f"spark-{index}", index=index)

    @property
    def storage_volume(self) -> str:
        return f"{self.container}-containers"


@dataclass
class LinkStatus:
    name: str
    state: str
    mtu: int
    addresses: list[str]
    tx_bytes: int


@dataclass
class NodeStatus:
    hostname: str
    container: str
    state: str
    image: str
    management_ip: str = ""
    system_state: str = ""
    links: list[LinkStatus] = field(default_factory=list)


@dataclass
class LabStatus:
    lab: str
    image_current: str
    nodes: list[NodeStatus]
    # The key and known hosts that reach the nodes as root over SSH ("" before `up`).
    ssh_private_key: str = ""
    ssh_known_hosts: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


def fabric_namespace(lab: str) -> str:
    return f"{lab}-fabric"


def _host(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, check=False, timeout=60)
    if check and proc.returncode != 0:
        raise LabError(f"`{' '.join(cmd)}` failed", detail=proc.stderr.strip())
    return proc


def _namespace_exists(namespace: str) -> bool:
    # `ip netns list` prints "name" or "name (id: N)" per line
    return namespace in _host("ip", "netns", "list").stdout.split()


def _mac(node: Node, ifname: str) -> str:
    """A stable, locally administered MAC per node and interface."""
    digest = hashlib.sha256(f"{node.container}/{ifname}".encode()).digest()
    return "02:" + ":".join(f"{b:02x}" for b in digest[:5])


def lab_nodes(lab: str) -> list[dict[str, Any]]:
    return sorted(
        podman.containers(f"{LAB_LABEL}={lab}"),
        key=lambda c: int(c["Labels"].get("llmfleet.lab.index", "0")),
    )


def _create_node(lab: str, node: Node, image: str, ssh: access.LabAccess) -> None:
    podman.run(
        "run",
        "-d",
        "--name",
        node.container,
        "--hostname",
        node.hostname,
        "--network",
        lab,
        "--network-alias",
        node.hostname,
        "--privileged",
        "--systemd=always",
        # vLLM's CPU workers exchange tensors through /dev/shm
        "--shm-size=2g",
        "--label",
        f"{LAB_LABEL}={lab}",
        "--label",
        f"{NODE_LABEL}={node.hostname}",
        "--label",
        f"llmfleet.lab.index={node.index}",
        # Where the inventory finds the key and known hosts that reach this node.
        "--label",
        f"{access.SSH_LABEL}={ssh.folder}",
        "-v",
        f"{node.storage_volume}:/var/lib/containers",
        *_trust_options(),
        image,
        "/sbin/init",
    )


def _trust_options() -> list[str]:
    """Let nodes reach the package registries as this machine does (npm, pip, apt over TLS):
    its certificate bundle in place of theirs, and its proxy settings."""
    options: list[str] = []
    bundle = host_ca_bundle()
    if bundle:
        options += ["-v", f"{bundle}:{NODE_CA_BUNDLE}:ro"]
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY"):
        value = os.environ.get(name) or os.environ.get(name.lower())
        if value:
            options += ["--env", f"{name}={value}"]
    return options


def hostname_of(container: str) -> str:
    return str(podman.inspect(container)["Config"]["Hostname"])


def _pid(node: Node) -> int:
    pid = int(podman.inspect(node.container)["State"]["Pid"])
    if pid <= 0:
        raise LabError(f"{node.container} is not running")
    return pid


def _has_link(pid: int, ifname: str) -> bool:
    probe = _host("nsenter", "-t", str(pid), "-n", "ip", "link", "show", ifname, check=False)
    return probe.returncode == 0


def _finish_link(node: Node, pid: int, ifname: str) -> None:
    ns = ("nsenter", "-t", str(pid), "-n")
    _host(*ns, "ip", "link", "set", ifname, "address", _mac(node, ifname))
    _host(*ns, "ip", "link", "set", ifname, "up")


def _wire_direct(a: Node, b: Node, ifname: str) -> bool:
    """One cable: a veth pair with the same CX7 name on both nodes. True if created."""
    pid_a, pid_b = _pid(a), _pid(b)
    present = (_has_link(pid_a, ifname), _has_link(pid_b, ifname))
    if all(present):
        return False
    for pid, here in zip((pid_a, pid_b), present, strict=True):
        if here:  # a half-cable left by a restarted peer: replace the pair
            _host("nsenter", "-t", str(pid), "-n", "ip", "link", "del", ifname)
    _host(
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
    if _host(*in_ns, "ip", "link", "show", bridge, check=False).returncode != 0:
        _host(*in_ns, "ip", "link", "add", bridge, "type", "bridge")
        _host(*in_ns, "ip", "link", "set", bridge, "mtu", str(FABRIC_MTU_MAX), "up")
    _host(*in_ns, "ip", "link", "del", port, check=False)
    _host(
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
    _host(*in_ns, "ip", "link", "set", port, "mtu", str(FABRIC_MTU_MAX), "master", bridge, "up")
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
    if not _namespace_exists(namespace):
        _host("ip", "netns", "add", namespace)
    for node in nodes:
        for port in ports:
            for half in (0, 1):
                created += _wire_switched(lab, node, port, half)
    return created


def _wait_booted(nodes: Sequence[Node], console: Console) -> dict[str, str]:
    """Wait until systemd in every node has finished starting up."""
    states: dict[str, str] = {}
    deadline = time.monotonic() + BOOT_TIMEOUT_S
    with console.status("waiting for systemd in the nodes") as status:
        for node in nodes:
            while True:
                proc = podman.exec_in(
                    node.container, "systemctl", "is-system-running", check=False, timeout=30
                )
                state = proc.stdout.strip() or "unknown"
                status.update(f"{node.hostname}: systemd {state}")
                if state in ("running", "degraded"):
                    states[node.hostname] = state
                    break
                if time.monotonic() > deadline:
                    journal = podman.exec_in(
                        node.container, "journalctl", "-b", "-n", "30", "--no-pager", check=False
                    ).stdout
                    raise LabError(
                        f"{node.hostname} did not finish booting (systemd: {state})",
                        detail=journal,
                    )
                time.sleep(1)
    for hostname, state in states.items():
        if state == "degraded":
            container = next(n.container for n in nodes if n.hostname == hostname)
            failed = podman.exec_in(
                container, "systemctl", "--failed", "--no-legend", check=False
            ).stdout.strip()
            console.print(f"[yellow]{hostname}: systemd degraded[/]\n{failed}")
    return states


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


def up(
    console: Console,
    *,
    nodes: int = 2,
    ports: Sequence[int] = (1,),
    lab: str = DEFAULT_LAB,
    rebuild: bool = False,
) -> LabStatus:
    """Build the image if needed, start ``nodes`` nodes and wire the fabric (idempotent)."""
    if nodes < 2:
        raise LabError(f"--nodes {nodes}: a lab needs at least 2 nodes")
    unknown = sorted(set(ports) - set(CX7_PORTS))
    if unknown:
        raise LabError(f"--ports {unknown}: a Spark has CX7 ports 0 and 1")
    existing = lab_nodes(lab)
    if existing and len(existing) != nodes:
        raise LabError(
            f"lab {lab!r} already runs {len(existing)} nodes, not {nodes}",
            hint="`llmfleet lab down` first to change its size",
        )
    image = ensure_image(console, rebuild=rebuild)
    stale = {c["Image"] for c in existing} - {image}
    if stale:
        console.print(
            f"[yellow]lab {lab!r} runs an older image ({', '.join(sorted(stale))}); "
            "`llmfleet lab down` then `up` to move to the current recipe[/]"
        )
    if not podman.network_exists(lab):
        podman.run("network", "create", "--label", f"{LAB_LABEL}={lab}", lab)
    elif not _lab_network(lab):
        raise LabError(
            f"a podman network named {lab!r} exists and is not this lab's"
            f" (no {LAB_LABEL}={lab} label)",
            hint="give the lab another name (--name), or remove that network yourself",
        )
    members = [Node.of_lab(lab, i) for i in range(1, nodes + 1)]
    by_name = {c["Names"][0]: c for c in existing}
    ssh = access.ensure_key(lab)
    with console.status("starting nodes"):
        for node in members:
            current = by_name.get(node.container)
            if current is None:
                _create_node(lab, node, image, ssh)
            elif current["State"] != "running":
                podman.run("start", node.container)
    _wait_booted(members, console)
    with console.status("installing the lab's SSH key"):
        addresses = access.management_addresses([node.container for node in members], lab)
        access.authorize(ssh, addresses)
        access.wait_reachable(ssh, list(addresses.values()))
    created = wire_fabric(lab, members, ports)
    wait_emulated_hardware(members, ports)
    if created:
        console.print(f"fabric: {created} CX7 link(s) wired")
    return status(lab)


def _lab_network(lab: str) -> bool:
    """Whether the podman network named like the lab is the lab's own (carries its label):
    a network of the same name made by someone else is never used nor removed."""
    return podman.network_labels(lab).get(LAB_LABEL) == lab


def down(console: Console, lab: str = DEFAULT_LAB) -> list[str]:
    """Remove the lab's containers, volumes, network and fabric namespace."""
    removed: list[str] = []
    for container in lab_nodes(lab):
        name = container["Names"][0]
        podman.remove_container(name)
        podman.run("volume", "rm", "-f", f"{name}-containers", check=False)
        removed.append(name)
    if podman.network_exists(lab) and _lab_network(lab):
        podman.run("network", "rm", "-f", lab)
        removed.append(f"network {lab}")
    namespace = fabric_namespace(lab)
    if _namespace_exists(namespace):
        _host("ip", "netns", "del", namespace)
        removed.append(f"namespace {namespace}")
    if access.forget(lab):
        removed.append("SSH key")
    return removed


def _links(container: str) -> list[LinkStatus]:
    proc = podman.exec_in(container, "ip", "-j", "-s", "addr", check=False)
    if proc.returncode != 0:
        return []
    fabric = {name for pair in CX7_PORTS.values() for name in pair}
    links = []
    for entry in json.loads(proc.stdout or "[]"):
        if entry.get("ifname") not in fabric:
            continue
        links.append(
            LinkStatus(
                name=entry["ifname"],
                state=entry.get("operstate", "UNKNOWN"),
                mtu=int(entry.get("mtu", 0)),
                addresses=[
                    f"{a['local']}/{a['prefixlen']}"
                    for a in entry.get("addr_info", [])
                    if a.get("scope") != "link"
                ],
                tx_bytes=int(entry.get("stats64", {}).get("tx", {}).get("bytes", 0)),
            )
        )
    return links


def status(lab: str = DEFAULT_LAB) -> LabStatus:
    nodes = []
    for container in lab_nodes(lab):
        name = container["Names"][0]
        running = container["State"] == "running"
        node = NodeStatus(
            hostname=container["Labels"].get(NODE_LABEL, name),
            container=name,
            state=container["State"],
            image=container["Image"],
        )
        if running:
            networks = podman.inspect(name)["NetworkSettings"]["Networks"]
            node.management_ip = networks.get(lab, {}).get("IPAddress", "")
            node.system_state = podman.exec_in(
                name, "systemctl", "is-system-running", check=False
            ).stdout.strip()
            node.links = _links(name)
        nodes.append(node)
    ssh = access.access_of(lab)
    return LabStatus(
        lab=lab,
        image_current=node_image_ref(),
        nodes=nodes,
        ssh_private_key=str(ssh.private_key) if ssh.private_key.is_file() else "",
        ssh_known_hosts=str(ssh.known_hosts) if ssh.known_hosts.is_file() else "",
    )


def _container_for(lab: str, hostname: str) -> str:
    for container in lab_nodes(lab):
        if container["Labels"].get(NODE_LABEL) == hostname:
            return str(container["Names"][0])
    raise LabError(f"no node {hostname!r} in lab {lab!r}", hint="see `llmfleet lab status`")


def _parse_value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def set_setting(lab: str, hostnames: Sequence[str], key: str, raw_value: str) -> None:
    """Change an emulated-hardware setting (dotted key) on the given nodes."""
    if not hostnames:
        hostnames = [c["Labels"][NODE_LABEL] for c in lab_nodes(lab)]
    value = _parse_value(raw_value)
    for hostname in hostnames:
        container = _container_for(lab, hostname)
        settings = json.loads(podman.exec_in(container, "cat", SETTINGS_FILE).stdout)
        section, _, leaf = key.partition(".")
        if leaf:
            if not isinstance(settings.get(section), dict):
                raise LabError(f"{key}: {section!r} is not a section of the lab settings")
            settings[section][leaf] = value
        else:
            settings[section] = value
        payload = json.dumps(settings, indent=2) + "\n"
        proc = subprocess.run(
            [
                "podman",
                "exec",
                "-i",
                container,
                "sh",
                "-c",
                f"cat > {SETTINGS_FILE}.new && mv {SETTINGS_FILE}.new {SETTINGS_FILE}",
            ],
            input=payload,
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
        if proc.returncode != 0:
            raise LabError(f"{hostname}: could not write {SETTINGS_FILE}", detail=proc.stderr)


def set_link(lab: str, hostname: str, ifname: str, state: str) -> None:
    """Take a fabric link down or up inside a node (real ``ip link set``)."""
    if state not in ("up", "down"):
        raise LabError(f"link state {state!r}: expected up or down")
    podman.exec_in(_container_for(lab, hostname), "ip", "link", "set", ifname, state)
