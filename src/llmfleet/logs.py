"""``llmfleet logs``: the logs of every vLLM rank, Ray node and watchdog of an inventory,
host-prefixed and merged in time order; ``--follow`` goes on streaming them.

``playbooks/logs.yml`` reads each host's journal (``journalctl --output=json``) and container
output (``ENGINE logs --timestamps``), or a Mac's vllm-mlx log file, and writes one JSON
document per host; this module merges and prints them. Following runs ``journalctl -f`` (from
the last entry's cursor), ``ENGINE logs -f`` and ``tail -F`` on each host over SSH, since
Ansible cannot stream a command's output.
"""

from __future__ import annotations

import queue
import signal
import subprocess
import threading
import time
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from llmfleet.cli_options import ExtraVarsOption, InventoryOption, VerboseOption, fail
from llmfleet.host_access import HostAccess, HostAccessError, host_accesses
from llmfleet.log_entries import (
    Entry,
    container_time,
    format_time,
    journal_entries,
    last_cursor,
    merged,
    parse_since,
)
from llmfleet.playbook_files import print_failures, run_collecting, start
from llmfleet.run_outcome import ExitCode

JOURNAL_FIELDS = "--output-fields=MESSAGE,_SYSTEMD_UNIT,PRIORITY"
HOST_COLOURS = ("cyan", "magenta", "green", "yellow", "blue", "bright_red", "bright_cyan", "white")


class Printer:
    """Prints entries as ``time host source | message``, each host in its own colour."""

    def __init__(self, console: Console, hosts: list[str]) -> None:
        self.console = console
        self.colours = {
            host: HOST_COLOURS[number % len(HOST_COLOURS)]
            for number, host in enumerate(sorted(hosts))
        }
        self.width = max((len(host) for host in hosts), default=0)

    def print(self, entry: Entry) -> None:
        colour = self.colours.get(entry.host, "white")
        self.console.print(
            f"[dim]{format_time(entry.time)}[/dim] "
            f"[{colour}]{escape(entry.host.ljust(self.width))}[/{colour}] "
            f"[bold]{escape(entry.source)}[/bold] | {escape(entry.message)}",
            soft_wrap=True,
            highlight=False,
        )


def follow_commands(
    document: dict[str, Any], entries: list[Entry], access: HostAccess
) -> list[tuple[str, list[str]]]:
    """What streams one host's logs on from where the backlog stopped: ``journalctl -f`` after
    the newest entry's cursor (the journal's own bookmark: nothing lost, nothing twice),
    ``ENGINE logs -f`` since just after each container's newest line, and ``tail -F`` of each
    log file from its end (what a Mac logged in the second between the read and the follow
    is not shown)."""
    host = document["host"]
    commands: list[tuple[str, list[str]]] = []
    # A Mac has no journal (None): its vllm-mlx writes a file, followed from its end.
    if document.get("journal") is not None:
        journal = ["journalctl", "--no-pager", "--output=json", "--follow", JOURNAL_FIELDS]
        cursor = last_cursor(entries, host)
        journal += [f"--after-cursor={cursor}"] if cursor else ["--lines=0"]
        journal += list(document.get("unit_args") or [])
        commands.append(("journal", access.command(journal)))
    for result in document.get("files") or []:
        argv = ["tail", "-n", "0", "-F", str(result["path"])]
        commands.append((str(result["item"]), access.command(argv)))
    for result in document.get("containers") or []:
        if result.get("rc") != 0:
            continue
        name = str(result["item"])
        times = [e.time for e in entries if e.host == host and e.source == name]
        since = f"{max(times) + 1e-6:.6f}" if times else f"{time.time():.6f}"
        engine = str(result["cmd"][0])
        argv = [engine, "logs", "--follow", "--timestamps", "--since", since, name]
        commands.append((name, access.command(argv)))
    return commands


def _pump(
    host: str,
    source: str,
    process: subprocess.Popen[str],
    lines: queue.Queue[tuple[str, str, str | None]],
) -> None:
    """Read one stream line by line into the queue; None as the line when it ends, then the
    last thing it said on stderr."""
    for line in process.stdout or ():
        lines.put((host, source, line.rstrip("\n")))
    stderr = (process.stderr.read() if process.stderr else "").strip().splitlines()
    process.wait()
    if stderr:
        lines.put((host, source + " (ended)", stderr[-1]))
    lines.put((host, source, None))


def follow(
    printer: Printer, streams: list[tuple[str, str, list[str]]], console: Console
) -> ExitCode:
    """Print every stream's new lines as they come until Ctrl-C (0) or until every stream
    ended (3: the hosts went away). The streams' processes end with it."""
    lines: queue.Queue[tuple[str, str, str | None]] = queue.Queue()
    processes = []
    # Ctrl-C, or a TERM from whatever started us (a shell that ignores SIGINT in the
    # background, a supervisor), ends the streams the same way.
    previous = {
        number: signal.signal(number, _interrupt) for number in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        for host, source, argv in streams:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                errors="replace",
            )
            processes.append(process)
            threading.Thread(target=_pump, args=(host, source, process, lines), daemon=True).start()
        running = len(streams)
        while running:
            host, source, line = lines.get()
            if line is None:
                running -= 1
                continue
            entry = _stream_entry(host, source, line)
            if entry is not None:
                printer.print(entry)
    except KeyboardInterrupt:
        return ExitCode.OK
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        for process in processes:
            if process.poll() is None:
                process.terminate()
    console.print("[red]every log stream ended[/red]", highlight=False)
    return ExitCode.UNREACHABLE


def _interrupt(_number: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _stream_entry(host: str, source: str, line: str) -> Entry | None:
    if source == "journal":
        found = journal_entries(host, line)
        return found[0] if found else None
    if source.endswith(" (ended)"):
        return Entry(time.time(), host, source, line)
    stamped = container_time(line)
    if stamped is None:
        return Entry(time.time(), host, source, line)
    return Entry(stamped[0], host, source, stamped[1])


def logs(  # noqa: PLR0917 - typer maps parameters to options
    inventory: InventoryOption,
    host: Annotated[
        list[str] | None,
        typer.Option(
            "--host",
            "-H",
            help="Only this host (repeatable; an ansible pattern works too).",
            show_default=False,
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="Only what was logged since then: a duration ([cyan]10m[/cyan], "
            "[cyan]2h[/cyan], [cyan]1h30m[/cyan], [cyan]1d[/cyan]) or a date/time in UTC "
            "([cyan]2026-11-24T10:00[/cyan]).",
            show_default=False,
        ),
    ] = None,
    lines: Annotated[
        int, typer.Option("--lines", "-n", min=1, help="The newest this many entries per host.")
    ] = 200,
    follow_on: Annotated[
        bool,
        typer.Option(
            "--follow",
            "-f",
            help="Then keep printing new entries as they are logged, until Ctrl-C (over SSH).",
        ),
    ] = False,
    extra_vars: ExtraVarsOption = None,
    verbose: VerboseOption = 0,
) -> None:
    """Show the logs of every rank of an inventory."""
    root, extravars = start(inventory, extra_vars)
    settings: dict[str, Any] = {"llmfleet_logs_lines": lines}
    if since is not None:
        try:
            settings["llmfleet_logs_since"] = f"{parse_since(since, time.time()):.6f}"
        except ValueError as exc:
            raise fail(str(exc)) from None
    result, written = run_collecting(
        root,
        "logs",
        inventory,
        extravars=[*extravars, settings],
        folder_variable="llmfleet_logs_dir",
        limit=",".join(host) if host else None,
        verbosity=verbose,
    )
    documents = list(written.values())
    print_failures(result)
    if not documents:
        raise typer.Exit(int(result.exit_code) or int(ExitCode.NOT_STARTED))
    console = Console()
    entries = merged(documents, float(settings["llmfleet_logs_since"]) if since else None)
    printer = Printer(console, [document["host"] for document in documents])
    for entry in entries:
        printer.print(entry)
    if not follow_on:
        raise typer.Exit(int(result.exit_code))
    try:
        accesses = host_accesses(inventory, [document["host"] for document in documents])
    except HostAccessError as exc:
        raise fail(str(exc)) from None
    streams = [
        (document["host"], source, argv)
        for document in documents
        for source, argv in follow_commands(document, entries, accesses[document["host"]])
    ]
    raise typer.Exit(int(follow(printer, streams, console)))
