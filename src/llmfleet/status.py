"""``llmfleet status``: what every serving host of an inventory runs, on one screen or as JSON.

``playbooks/status.yml`` reads each host (the module ``llmfleet.cluster.node_status``, the GPUs'
free memory, vLLM's health and model, Ray's nodes; on a Mac the mlx_server role's status entry
point: its LaunchDaemon, health, memory and swap) without changing anything and writes one
JSON document per host; this module runs it and lays the documents out side by side, a column per
host.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from llmfleet.cli_options import ExtraVarsOption, InventoryOption, LimitOption, VerboseOption, fail
from llmfleet.playbook_files import run_collecting, start
from llmfleet.run_outcome import RunResult

GIB = 1024**3
# The rows of the table, in order: (title, function of a host's document -> text).
Row = tuple[str, Any]


def run_status_playbook(
    root: Path,
    inventory: Path,
    extravars: list[dict[str, Any] | Path],
    limit: str | None,
    verbosity: int,
) -> tuple[RunResult, dict[str, dict[str, Any]]]:
    """Run playbooks/status.yml; its result and each host's document."""
    return run_collecting(
        root,
        "status",
        inventory,
        extravars=extravars,
        folder_variable="llmfleet_status_dir",
        limit=limit,
        verbosity=verbosity,
    )


def _gib(value: int | float | None) -> str:
    return "?" if value is None else f"{value / GIB:.1f} GiB"


def _ago(epoch: float | None, now: float) -> str:
    if epoch is None:
        return ""
    seconds = max(int(now - epoch), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f" for {seconds // size}{unit}"
    return f" for {seconds}s"


def _colour(ok: bool | None, text: str) -> str:
    colour = {True: "green", False: "red", None: "yellow"}[ok]
    return f"[{colour}]{escape(text)}[/{colour}]"


def units_text(document: dict[str, Any]) -> str:
    """Each installed unit: state, since when, how often systemd restarted it."""
    node = document["node"]
    lines = []
    for unit in node["units"]:
        if not unit["installed"]:
            continue
        # "running" for a service that runs; "active (exited)" for a oneshot that did its work.
        restarts = unit["restarts"]
        text = "{} {}{}".format(
            unit["name"].removesuffix(".service"),
            unit["sub"]
            if unit["sub"] in ("running", unit["active"])
            else f"{unit['active']} ({unit['sub']})",
            _ago(unit["since"], node["time"]),
        )
        if restarts:
            text += f", {restarts} restarts"
        lines.append(_colour(unit["active"] == "active" and not restarts, text))
    for container in node["containers"]:
        if container["exists"]:
            text = "{} (container) {}, {} restarts".format(
                container["name"], container["state"], container["restarts"] or 0
            )
            lines.append(_colour(container["state"] == "running", text))
    return "\n".join(lines) or _colour(None, "nothing of ours")


def vllm_text(document: dict[str, Any]) -> str:
    """vLLM's health and served model on the rank that serves the API, and what the serving
    probe found: whether it answers requests (not only /health), since when, its last heal."""
    vllm, node = document["vllm"], document["node"]
    layout, probe = node["layout"], node.get("probe")
    if layout is None:
        ray = document.get("ray")
        if vllm.get("executor") == "ray" and ray and ray.get("head"):
            where = f"Ray container {ray['container']}" if ray.get("container") else "Ray"
            return f"Ray executor's worker: ranks in {where} (API on {ray['head']})"
        return _colour(None, "not configured")
    if not vllm["serves_api"]:
        return "headless rank {} (API on {})".format(layout["node_rank"], layout["master_addr"])
    models = ", ".join(vllm["models"]) or "no model listed"
    if vllm["health"] != 200:
        text = _colour(False, "not answering: " + (vllm["health_error"] or str(vllm["health"])))
    elif not probe or "error" in probe or probe.get("stale"):
        text = _colour(None, f"healthy: {models} (no probe: requests not tried)")
    elif probe["phase"] == "ready":
        text = _colour(
            True,
            "answers requests: {}{}".format(models, _ago(probe["ready_since"], node["time"])),
        )
    elif probe["phase"] == "starting":
        text = _colour(None, f"warming up: {models}")
    else:
        text = _colour(
            False,
            "answers /health but does not generate: {}".format(probe["last_failure"] or "?"),
        )
    return "\n".join([text, *probe_lines(probe, node["time"])])


def probe_lines(probe: dict[str, Any] | None, now: float) -> list[str]:
    """The probe's own word: a state it could not read or stopped writing, the last heal."""
    if not probe:
        return []
    if "error" in probe:
        return [_colour(False, "probe: " + probe["error"])]
    lines = []
    if probe.get("stale"):
        lines.append(_colour(False, "probe: not running (its state is old)"))
    heal = probe.get("last_heal")
    if heal:
        lines.append(
            _colour(
                None,
                "last heal {} ago: {}".format(
                    _ago(heal.get("epoch"), now).removeprefix(" for ") or "?", heal.get("reason")
                ),
            )
        )
    return lines


def layout_text(document: dict[str, Any]) -> str:
    layout = document["node"]["layout"]
    if layout is None:
        return "-"
    max_model_len = layout["max_model_len"] if layout["max_model_len"] is not None else "model's"
    parallel = "TP {} x PP {}".format(
        layout["tensor_parallel_size"], layout["pipeline_parallel_size"]
    )
    if layout.get("distributed_executor_backend") == "ray":
        ray = document.get("ray") or {}
        where = (
            f"vLLM in the Ray head container {ray['container']}"
            if document["vllm"].get("deployment") == "container" and ray.get("container")
            else "vLLM beside the Ray head"
        )
        return f"{parallel} over Ray's nodes ({where}), max_model_len {max_model_len}"
    return "{}, rank {} of {} node(s), max_model_len {}".format(
        parallel, layout["node_rank"], layout["nnodes"], max_model_len
    )


def serving_text(document: dict[str, Any]) -> str:
    """Image (reference and ID of the running container) and model revision from the history."""
    node = document["node"]
    serving = node["serving"] or {}
    if "error" in serving:
        return _colour(False, "history unreadable: " + serving["error"])
    current = serving.get("current") or {}
    lines = [
        "profile {}".format(current.get("profile") or "?"),
        "image {}".format(current.get("image") or "none (native)"),
        "model revision {}".format(current.get("model_revision") or "-"),
    ]
    for name, record in sorted(node["images"].items()):
        lines.append("{}: {}".format(name, (record.get("image_id") or "?")[:19]))
    if serving.get("uncertain"):
        lines.append(_colour(False, "last switch failed: what runs is uncertain"))
    return "\n".join(escape(line) if not line.startswith("[") else line for line in lines)


def ray_text(document: dict[str, Any]) -> str:
    ray = document["ray"]
    if ray is None:
        return "-"
    if not ray["ok"]:
        return _colour(False, "ray status failed: {}".format(ray["error"]))
    nodes, expected = int(ray["nodes"]), int(ray["expected"])
    return _colour(nodes == expected, f"{nodes} of {expected} nodes alive")


def links_text(document: dict[str, Any]) -> str:
    lines = []
    for link in document["node"]["links"]:
        if not link["present"]:
            lines.append(_colour(False, "{} missing".format(link["name"])))
            continue
        speed = link["speed_mbps"]
        text = "{} {} {} MTU {} {}".format(
            link["name"],
            link["operstate"],
            f"{speed}Mb/s" if speed else "speed ?",
            link["mtu"],
            " ".join(link["ipv4"]) or "no IPv4",
        )
        lines.append(_colour(link["operstate"] == "up", text))
    return "\n".join(lines) or "-"


def memory_text(document: dict[str, Any]) -> str:
    """Swap, and the memory each GPU has free as vLLM's start-up check reads it."""
    memory = document["node"]["memory"]
    lines = []
    if memory["swap_total_bytes"]:
        lines.append(
            _colour(
                False,
                "swap on: {} ({} used) {}".format(
                    _gib(memory["swap_total_bytes"]),
                    _gib(memory["swap_used_bytes"]),
                    " ".join(memory["swap_devices"]),
                ),
            )
        )
    else:
        lines.append(_colour(True, "swap off"))
    for gpu in document["gpus"]:
        text = "GPU {} {}: free {} of {} GiB".format(
            gpu["index"], gpu["name"], gpu["free_gib"], gpu["total_gib"]
        )
        if gpu.get("page_cache_gib"):
            text += ", page cache {} GiB".format(gpu["page_cache_gib"])
        lines.append(escape(text))
    if not document["gpus"]:
        lines.append(
            "no GPU; memory free {} of {}, page cache {}".format(
                _gib(memory["free_bytes"]),
                _gib(memory["total_bytes"]),
                _gib(memory["page_cache_bytes"]),
            )
        )
    return "\n".join(lines)


def mac_agent_text(document: dict[str, Any]) -> str:
    """A Mac's vllm-mlx LaunchDaemon (the status document's ``agent``, the name it had when it
    was a LaunchAgent): running with its PID, or why not."""
    agent = document["mlx"]["agent"]
    name = "{} (launchd)".format(agent["label"])
    if not agent["installed"]:
        return _colour(None, f"{name} not installed")
    if not agent["loaded"]:
        return _colour(False, f"{name} installed, not loaded")
    if not agent["running"]:
        return _colour(
            False, "{} not running, last exit status {}".format(name, agent["last_exit_status"])
        )
    return _colour(True, "{} running, PID {}".format(name, agent["pid"]))


def mac_vllm_text(document: dict[str, Any]) -> str:
    mlx = document["mlx"]
    if mlx["health"] == 200:
        return _colour(True, "vllm-mlx healthy: " + (", ".join(mlx["models"]) or "no model listed"))
    return _colour(False, "vllm-mlx not answering: " + (mlx["health_error"] or str(mlx["health"])))


def mac_memory_text(document: dict[str, Any]) -> str:
    """Unified memory, and swap: macOS always has swap files; swap in use while it serves
    means the model and its cache do not fit."""
    memory = document["mlx"]["memory"]
    swap = memory["swap"]
    text = "swap in use: {} of {}".format(_gib(swap["used_bytes"]), _gib(swap["total_bytes"]))
    return "unified memory {}\n{}".format(
        _gib(memory["total_bytes"]), _colour(not swap["used_bytes"], text)
    )


# A Mac (vllm-mlx, one process, no Ray, no fabric): its rows; the others show "-".
MAC_ROWS: dict[str, Any] = {
    "running": mac_agent_text,
    "vLLM": mac_vllm_text,
    "serves": lambda document: escape("model " + document["mlx"]["served_model_name"]),
    "layout": lambda _document: "one vllm-mlx process (MLX, unified memory)",
    "memory": mac_memory_text,
}


def cell(title: str, render: Any, document: dict[str, Any]) -> str:
    """One host's text for one row: a Mac's from MAC_ROWS, any other host's from ROWS."""
    if document.get("platform") == "macos":
        return str(MAC_ROWS.get(title, lambda _document: "-")(document))
    return str(render(document))


ROWS: tuple[Row, ...] = (
    ("running", units_text),
    ("vLLM", vllm_text),
    ("serves", serving_text),
    ("layout", layout_text),
    ("Ray", ray_text),
    ("fabric", links_text),
    ("memory", memory_text),
)


def status_table(documents: dict[str, dict[str, Any]], missing: dict[str, str]) -> Table:
    """A column per host, a row per aspect; a host that could not be read shows why."""
    table = Table(show_lines=True)
    table.add_column("")
    hosts = sorted({*documents, *missing})
    for host in hosts:
        table.add_column(escape(host))
    for number, (title, render) in enumerate(ROWS):
        cells = [
            cell(title, render, documents[host])
            if host in documents
            else (_colour(False, missing[host]) if number == 0 else "")
            for host in hosts
        ]
        table.add_row(title, *cells)
    return table


def missing_hosts(result: RunResult, documents: dict[str, Any]) -> dict[str, str]:
    """The hosts the run could not read, with the reason (unreachable, or the failed task)."""
    missing = {}
    for failure in result.failures:
        if failure.host not in documents:
            prefix = "unreachable" if failure.unreachable else f"failed: {failure.task}"
            missing[failure.host] = f"{prefix}: {failure.msg}"
    return missing


def print_status(
    console: Console, documents: dict[str, dict[str, Any]], missing: dict[str, str]
) -> None:
    console.print(status_table(documents, missing))
    benchmark = next((doc["benchmark"] for doc in documents.values() if doc.get("benchmark")), None)
    if benchmark:
        console.print(
            "Last benchmark ({}): {}".format(benchmark["started"], benchmark["headline"]),
            soft_wrap=True,
            highlight=False,
        )
    else:
        console.print("Last benchmark: none on this machine (llmfleet bench)", highlight=False)


def status(
    inventory: InventoryOption,
    limit: LimitOption = None,
    extra_vars: ExtraVarsOption = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the status as JSON on stdout: per host what the table shows, in full "
            "(units, containers, links, memory, GPUs, layout, history, vLLM, Ray), the hosts "
            "that could not be read and why, and the last benchmark.",
        ),
    ] = False,
    verbose: VerboseOption = 0,
) -> None:
    """Show what every serving host runs."""
    root, extravars = start(inventory, extra_vars)
    result, documents = run_status_playbook(root, inventory, extravars, limit, verbose)
    missing = missing_hosts(result, documents)
    if not documents and not missing:
        raise fail(
            f"{inventory} has no serving host (no host in the sparks, gh200 or mac_studios group)"
        )
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "inventory": str(inventory),
                    "read_at": time.time(),
                    "hosts": documents,
                    "not_read": missing,
                },
                indent=2,
            )
        )
    else:
        print_status(Console(), documents, missing)
    raise typer.Exit(int(result.exit_code))
