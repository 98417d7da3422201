"""The lab cluster: systemd node containers joined by CX7-named veth links.

Each node is a privileged podman container booting systemd (hostname ``spark-N``) on a
management network. The fabric is built from real veth pairs named like the two halves of
a ConnectX-7 port (``fabric``). ``up`` starts and wires it, ``down`` removes every trace
of it, ``status`` reports it; ``node_settings`` changes its emulated hardware.
"""

from __future__ import annotations

import ipaddress
import json
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from rich.console import Console

from llmfleet_lab import access, hub, podman
from llmfleet_lab.errors import LabError
from llmfleet_lab.fabric import (
    CX7_PORTS,
    fabric_namespace,
    host_command,
    namespace_exists,
    wait_emulated_hardware,
    wire_fabric,
)
from llmfleet_lab.image import (
    NODE_RUNTIME_ARCHIVE,
    ensure_image,
    host_ca_bundle,
    hub_image_ref,
    node_image_ref,
    runtime_archive,
)
from llmfleet_lab.nodes import (
    DEFAULT_LAB,
    GATEWAY_LABEL,
    LAB_LABEL,
    NODE_LABEL,
    PATH_LABEL,
    SERVING_PATHS,
    Node,
    default_path,
    lab_gateway,
    lab_nodes,
    lab_path,
)

# Where a node keeps its trust bundle (Debian); the lab mounts this machine's over it.
NODE_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
BOOT_TIMEOUT_S = 180
# Nodes take fixed addresses from .101 on (spark-1: .101); podman's pool gives the lab's Hub
# and anything else the low ones.
NODE_ADDRESS_OFFSET = 100


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
    # The lab's Hub (the model's source) on the lab network ("" when it does not run).
    hub_url: str = ""
    # How `llmfleet up` serves on it (nodes.SERVING_PATHS; "" without nodes).
    serving_path: str = ""
    # Whether its first node was made to run the serving gateway (`up --gateway`).
    gateway: bool = False

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


def node_address(subnet: str, index: int) -> str:
    """Node ``index``'s fixed address on the lab network: a Spark keeps its management
    address across a reboot, and so does a lab node restarted by podman (which would give it
    a new one from the network's pool)."""
    network = ipaddress.ip_network(subnet)
    return str(network.network_address + NODE_ADDRESS_OFFSET + index)


def _create_node(
    lab: str, node: Node, image: str, ssh: access.LabAccess, *, serving_path: str, gateway: bool
) -> None:
    podman.run(
        "run",
        "-d",
        "--name",
        node.container,
        "--hostname",
        node.hostname,
        "--network",
        lab,
        "--ip",
        node_address(podman.network_subnet(lab), node.index),
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
        "--label",
        f"{PATH_LABEL}={serving_path}",
        "--label",
        f"{GATEWAY_LABEL}={'yes' if gateway else 'no'}",
        # Where the inventory finds the key and known hosts that reach this node.
        "--label",
        f"{access.SSH_LABEL}={ssh.folder}",
        "-v",
        f"{node.storage_volume}:/var/lib/containers",
        *_runtime_image_options(),
        *_trust_options(),
        image,
        "/sbin/init",
    )


def _runtime_image_options() -> list[str]:
    """The runtime image's archive, which the node loads into its Docker at boot (the
    container path's image, as a registry gives it to a Spark)."""
    archive = runtime_archive()
    return ["-v", f"{archive}:{NODE_RUNTIME_ARCHIVE}:ro"] if archive.is_file() else []


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


def _refuse_another_shape(
    lab: str,
    existing: list[dict[str, Any]],
    nodes: int,
    serving_path: str | None,
    *,
    gateway: bool,
) -> None:
    """A running lab is changed by `down` then `up`: asked for another size, serving path or
    a gateway it was made without, `up` says so."""
    if not existing:
        return
    if len(existing) != nodes:
        raise LabError(
            f"lab {lab!r} already runs {len(existing)} nodes, not {nodes}",
            hint="`llmfleet lab down` first to change its size",
        )
    running_path = lab_path(existing)
    if serving_path is not None and running_path != serving_path:
        raise LabError(
            f"lab {lab!r} serves on the {running_path} path, not {serving_path}",
            hint="`llmfleet lab down` first to change its path",
        )
    if gateway and not lab_gateway(existing):
        raise LabError(
            f"lab {lab!r} was made without a gateway",
            hint="`llmfleet lab down` first to give it one",
        )


def up(
    console: Console,
    *,
    nodes: int = 2,
    ports: Sequence[int] = (1,),
    lab: str = DEFAULT_LAB,
    rebuild: bool = False,
    serving_path: str | None = None,
    gateway: bool = False,
) -> LabStatus:
    """Build the image if needed, start ``nodes`` nodes and wire the fabric (idempotent).
    ``serving_path``: how the lab serves (SERVING_PATHS; None: the running lab's, or the
    default for its size); ``gateway``: the first node runs the serving gateway (in front of
    one group, or of the groups a smaller group size cuts)."""
    if nodes < 2:
        raise LabError(f"--nodes {nodes}: a lab needs at least 2 nodes")
    if serving_path is not None and serving_path not in SERVING_PATHS:
        raise LabError(f"--path {serving_path}: expected one of {', '.join(SERVING_PATHS)}")
    unknown = sorted(set(ports) - set(CX7_PORTS))
    if unknown:
        raise LabError(f"--ports {unknown}: a Spark has CX7 ports 0 and 1")
    existing = lab_nodes(lab)
    _refuse_another_shape(lab, existing, nodes, serving_path, gateway=gateway)
    serving_path = (lab_path(existing) if existing else None) or serving_path or default_path(nodes)
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
                _create_node(lab, node, image, ssh, serving_path=serving_path, gateway=gateway)
            elif current["State"] != "running":
                podman.run("start", node.container)
    # A Spark's CX7 ports are there from power-on: a node (re)started here gets its links
    # before its systemd finishes starting, not after. Cabled after the boot, a rebooted Ray
    # head waited for its peers over links that did not exist yet, and its boot with it (vLLM's
    # unit waits for the Ray cluster before it starts): `llmfleet lab faults` gave up on the
    # head's reboot on the Ray path (2026-11-28).
    created = wire_fabric(lab, members, ports)
    if created:
        console.print(f"fabric: {created} CX7 link(s) wired")
    with console.status("starting the lab's Hub"):
        hub.ensure(lab, hub_image_ref())
    _wait_booted(members, console)
    with console.status("installing the lab's SSH key"):
        addresses = access.management_addresses([node.container for node in members], lab)
        access.authorize(ssh, addresses)
        access.wait_reachable(ssh, list(addresses.values()))
    wait_emulated_hardware(members, ports)
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
    if hub.remove(lab):
        removed.append(hub.container_name(lab))
    if podman.network_exists(lab) and _lab_network(lab):
        podman.run("network", "rm", "-f", lab)
        removed.append(f"network {lab}")
    namespace = fabric_namespace(lab)
    if namespace_exists(namespace):
        host_command("ip", "netns", "del", namespace)
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
    containers = lab_nodes(lab)
    for container in containers:
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
    hub_address = hub.address(lab)
    return LabStatus(
        lab=lab,
        image_current=node_image_ref(),
        nodes=nodes,
        ssh_private_key=str(ssh.private_key) if ssh.private_key.is_file() else "",
        ssh_known_hosts=str(ssh.known_hosts) if ssh.known_hosts.is_file() else "",
        hub_url=f"http://{hub_address}:{hub.HUB_PORT}" if hub_address else "",
        serving_path=lab_path(containers) if containers else "",
        gateway=lab_gateway(containers),
    )
