"""`llmfleet lab ...`: the lab cluster the demo and the tests run on."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from llmfleet_lab import cluster, fabric, faults, image, node_settings, orchestration
from llmfleet_lab.errors import LabError
from llmfleet_lab.nodes import DEFAULT_LAB, Node, hostname_of

LAB_EXIT_CODES_EPILOG = (
    "[bold]Exit codes[/bold]\n"
    "  [green]0[/green]    success\n"
    "  [red]1[/red]    bad arguments (any usage error), not root, or the lab failed (the "
    "message says why)\n"
    "  [cyan]lab shell[/cyan] exits with the shell's own exit code."
)

lab_app = typer.Typer(
    help=(
        "The lab: systemd node containers (spark-1..N) standing in for DGX Sparks, joined by "
        "veth links named like ConnectX-7 ports, with emulated RDMA tools and real vLLM (CPU "
        "build). Needs root and podman (`make lab-deps` installs them).\n\n"
        "Typical use: [bold]llmfleet lab up[/], then "
        "[bold]ansible-playbook site.yml -i inventory/lab[/], then [bold]llmfleet lab down[/]."
    ),
    rich_markup_mode="rich",
    no_args_is_help=True,
    epilog=LAB_EXIT_CODES_EPILOG,
)
console = Console()
err_console = Console(stderr=True)

T = TypeVar("T")

LabOption = Annotated[
    str,
    typer.Option("--name", envvar="LLMFLEET_LAB", help="Lab name (prefix of its containers)."),
]


def _guard(action: Callable[[], T]) -> T:
    """Run a lab action; a LabError becomes a red message, its evidence, a hint, exit 1."""
    if os.geteuid() != 0:
        err_console.print("[red]the lab needs root (rootful podman, veth links, namespaces)[/]")
        raise typer.Exit(1)
    try:
        return action()
    except LabError as error:
        err_console.print(f"[bold red]lab error:[/] {error.message}")
        if error.detail:
            err_console.print(error.detail, markup=False, highlight=False)
        if error.hint:
            err_console.print(f"[yellow]hint:[/] {error.hint}")
        raise typer.Exit(1) from error


def _parse_ports(ports: str) -> list[int]:
    try:
        return [int(p) for p in ports.split(",") if p.strip()]
    except ValueError:
        err_console.print(f"[red]--ports {ports!r}: expected a comma-separated list like 0,1[/]")
        raise typer.Exit(1) from None


def _print_status(status: cluster.LabStatus) -> None:
    if not status.nodes:
        console.print(f"lab {status.lab!r}: no nodes (start it with `llmfleet lab up`)")
        return
    table = Table(
        title=f"lab {status.lab} (serving path: {status.serving_path}"
        f"{', gateway on the first node' if status.gateway else ''})",
        title_justify="left",
    )
    for column in ("node", "container", "state", "systemd", "management", "CX7 links"):
        table.add_column(column)
    for node in status.nodes:
        links = "\n".join(
            f"{link.name} {link.state} mtu {link.mtu} {' '.join(link.addresses)}".rstrip()
            for link in node.links
        )
        table.add_row(
            node.hostname,
            node.container,
            node.state,
            node.system_state,
            node.management_ip,
            links or "-",
        )
    console.print(table)
    if status.ssh_private_key:
        first = status.nodes[0].management_ip or "NODE-ADDRESS"
        console.print(
            f"ssh: ssh -i {status.ssh_private_key}"
            f" -o UserKnownHostsFile={status.ssh_known_hosts} root@{first}",
            soft_wrap=True,
        )
    if status.hub_url:
        console.print(
            f"hub: {status.hub_url} (the model's source, on the lab network)", highlight=False
        )
    stale = {node.image for node in status.nodes} - {status.image_current}
    if stale:
        console.print(f"[yellow]image differs from the current recipe {status.image_current}[/]")


@lab_app.command(epilog=LAB_EXIT_CODES_EPILOG)
def build(
    rebuild: Annotated[bool, typer.Option(help="Rebuild even if the image is cached.")] = False,
    prune: Annotated[bool, typer.Option(help="Remove images of older recipes.")] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Print only the image reference.")
    ] = False,
) -> None:
    """Build the node image (debootstrap + Containerfile), or reuse the cached one.

    Example: [bold]export LLMFLEET_LAB_IMAGE=$(llmfleet lab build -q)[/] (molecule uses it)
    """

    def action() -> None:
        ref = image.ensure_image(err_console if quiet else console, rebuild=rebuild)
        if quiet:
            print(ref)
        else:
            console.print(f"node image: [bold]{ref}[/]")
        if prune:
            for old in image.prune_old_images(console):
                console.print(f"removed {old}")

    _guard(action)


@lab_app.command(epilog=LAB_EXIT_CODES_EPILOG)
def up(  # noqa: PLR0917 - typer maps parameters to options
    nodes: Annotated[int, typer.Option("--nodes", "-n", min=2, max=8, help="Node count.")] = 2,
    ports: Annotated[
        str, typer.Option(help="CX7 ports to cable, comma-separated: 1, or 0,1.")
    ] = "1",
    rebuild: Annotated[bool, typer.Option(help="Rebuild the node image first.")] = False,
    serving_path: Annotated[
        str | None,
        typer.Option(
            "--path",
            help="How `llmfleet up` serves on this lab: ray-container (the Spark sample's"
            " path: vLLM in the Ray head container, Ray executor) or native (vLLM under"
            " systemd, mp executor: the GH200 box's path). Default: ray-container for 2-3"
            " nodes, native for the gateway's groups of two (4+ nodes).",
        ),
    ] = None,
    gateway: Annotated[
        bool,
        typer.Option(
            "--gateway",
            help="Run the serving gateway on the first node of a 2- or 3-node lab too (4+"
            " nodes always have one), so that `llmfleet tune --grid group_size=all,1` can"
            " measure its layouts through one endpoint.",
        ),
    ] = False,
    name: LabOption = DEFAULT_LAB,
) -> None:
    """Start the lab (build the image if needed) and wire the CX7 fabric. Idempotent.

    Example: [bold]llmfleet lab up --nodes 3 --ports 0,1[/]
    """
    port_list = _parse_ports(ports)
    status = _guard(
        lambda: cluster.up(
            console,
            nodes=nodes,
            ports=port_list,
            lab=name,
            rebuild=rebuild,
            serving_path=serving_path,
            gateway=gateway,
        )
    )
    _print_status(status)
    console.print("next: [bold]ansible all -i inventory/lab -m ansible.builtin.ping[/]")


@lab_app.command(epilog=LAB_EXIT_CODES_EPILOG)
def down(name: LabOption = DEFAULT_LAB) -> None:
    """Remove every container, volume, network and link of the lab."""
    removed = _guard(lambda: cluster.down(console, lab=name))
    console.print(f"removed: {', '.join(removed)}" if removed else "nothing to remove")


@lab_app.command(epilog=LAB_EXIT_CODES_EPILOG)
def status(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    name: LabOption = DEFAULT_LAB,
) -> None:
    """Show the nodes, their state and their CX7 links."""
    current = _guard(lambda: cluster.status(name))
    if as_json:
        print(current.to_json())
    else:
        _print_status(current)


@lab_app.command("set", epilog=LAB_EXIT_CODES_EPILOG)
def set_(
    assignment: Annotated[
        str,
        typer.Argument(
            help="KEY=VALUE, e.g. ib_write_bw_gbits.rocep1s0f1=40 or "
            "link_speed_mbps.enp1s0f1np1=100000"
        ),
    ],
    node: Annotated[
        list[str] | None, typer.Option(help="Node hostname (repeatable); default: every node.")
    ] = None,
    name: LabOption = DEFAULT_LAB,
) -> None:
    """Change an emulated-hardware setting, to exercise pass and fail paths."""
    key, sep, value = assignment.partition("=")
    if not sep or not key:
        err_console.print(f"[red]{assignment!r}: expected KEY=VALUE[/]")
        raise typer.Exit(1)
    _guard(lambda: node_settings.set_setting(name, node or [], key, value))
    console.print(f"{key} = {value} on {', '.join(node) if node else 'every node'}")


@lab_app.command(epilog=LAB_EXIT_CODES_EPILOG)
def link(
    node: Annotated[str, typer.Argument(help="Node hostname, e.g. spark-1.")],
    interface: Annotated[str, typer.Argument(help="Fabric interface, e.g. enp1s0f1np1.")],
    state: Annotated[str, typer.Argument(help="up or down.")],
    name: LabOption = DEFAULT_LAB,
) -> None:
    """Take a fabric link down (a pulled cable) or back up."""
    _guard(lambda: node_settings.set_link(name, node, interface, state))
    console.print(f"{node} {interface} {state}")


@lab_app.command(epilog=LAB_EXIT_CODES_EPILOG)
def wire(
    containers: Annotated[
        list[str], typer.Argument(help="Node containers (running, from the lab image), in order.")
    ],
    ports: Annotated[str, typer.Option(help="CX7 ports to cable: 1, or 0,1.")] = "1",
    name: LabOption = DEFAULT_LAB,
) -> None:
    """Cable CX7 links between containers made by another tool (molecule). Idempotent."""
    port_list = _parse_ports(ports)

    def action() -> int:
        nodes = [
            Node(container=c, hostname=hostname_of(c), index=i)
            for i, c in enumerate(containers, start=1)
        ]
        created = fabric.wire_fabric(name, nodes, port_list)
        fabric.wait_emulated_hardware(nodes, port_list)
        return created

    console.print(f"{_guard(action)} link(s) wired")


@lab_app.command(epilog=LAB_EXIT_CODES_EPILOG)
def shell(
    node: Annotated[str, typer.Argument(help="Node hostname, e.g. spark-1.")] = "spark-1",
    name: LabOption = DEFAULT_LAB,
) -> None:
    """Open a shell on a node."""
    container = f"{name}-{node}"
    raise typer.Exit(subprocess.call(["podman", "exec", "-it", container, "bash", "-l"]))


@lab_app.command("faults", epilog=LAB_EXIT_CODES_EPILOG)
def faults_(
    output: Annotated[
        str, typer.Option(help="Folder of the JSON and markdown results.")
    ] = "artifacts/bench",
    case: Annotated[
        list[str] | None,
        typer.Option("--case", help="Run only this case (repeatable); all by default."),
    ] = None,
    name: LabOption = DEFAULT_LAB,
) -> None:
    """Break the served lab one way at a time (reboots, a killed rank, a wedged engine, a
    link down, Ray's head killed) during a stream of requests; measure how long until the
    group serves again and which requests failed. Writes faults-<time>.json and .md under
    --output.

    Example: [bold]llmfleet lab faults[/] after [bold]llmfleet up -i inventory/lab[/] (part of
    `make bench`)
    """

    def action() -> Path:
        path, _ = faults.run(console, lab=name, output_dir=Path(output), cases=case or ())
        return path

    path = _guard(action)
    # The markdown quotes vLLM's log lines, whose brackets are no markup.
    console.print(path.with_suffix(".md").read_text(), markup=False, highlight=False)
    console.print(f"results: {path} and {path.with_suffix('.md')}")


@lab_app.command("bench", epilog=LAB_EXIT_CODES_EPILOG)
def bench(
    output: Annotated[
        str, typer.Option(help="Folder of the JSON and markdown results.")
    ] = "artifacts/bench",
    nodes: Annotated[int, typer.Option("--nodes", "-n", min=2, max=8, help="Node count.")] = 2,
    name: LabOption = DEFAULT_LAB,
) -> None:
    """Benchmark the orchestration on a fresh lab (the lab is removed and started again).

    Measures the fresh converge and, during it, the time until vLLM first answers; vLLM's
    own start on the same lab; a no-op re-run (time, tasks per host); a profile change
    (the tags it reaches) against another walked with --full.
    Writes orchestration-<time>.json and .md under --output.

    Example: [bold]llmfleet lab bench[/] (part of `make bench`)
    """

    def action() -> Path:
        path, _ = orchestration.run(
            console, lab=name, root=Path.cwd(), output_dir=Path(output), nodes=nodes
        )
        return path

    path = _guard(action)
    console.print(path.with_suffix(".md").read_text())
    console.print(f"results: {path} and {path.with_suffix('.md')}")
