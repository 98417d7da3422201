"""The ``llmfleet`` command line."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from typer.core import TyperGroup

from llmfleet import __version__
from llmfleet.bench_progress import progress_line
from llmfleet.cli_help import (
    APP_HELP,
    BENCH_HELP,
    CHECK_HELP,
    DOCTOR_HELP,
    DOWN_HELP,
    EXIT_CODES_EPILOG,
    LOGS_HELP,
    PLAN_HELP,
    STATUS_HELP,
    TUNE_HELP,
    UP_HELP,
    UPGRADE_HELP,
)
from llmfleet.cli_options import (
    RUNS_FOLDER,
    ArtifactsOption,
    ExtraVarsOption,
    FullOption,
    InventoryOption,
    JsonOption,
    LimitOption,
    PlainOption,
    VerboseOption,
    fail,
)
from llmfleet.command_plugins import add_command_plugins
from llmfleet.converged import run_unless_unchanged
from llmfleet.doctor import doctor
from llmfleet.down import down
from llmfleet.logs import logs
from llmfleet.paths import CollectionNotFound, collection_root
from llmfleet.plan import plan
from llmfleet.playbook_files import start
from llmfleet.run_outcome import ExitCode, result_summary
from llmfleet.runner import RunnerError
from llmfleet.status import status
from llmfleet.tune import TuneError, parse_grid
from llmfleet.tune_run import Sweep


def _usage_error_exits_1(exc: Exception) -> None:
    # duck-typed: typer vendors click (typer._click) in recent versions, plain click in older ones
    if any(klass.__name__ == "UsageError" for klass in type(exc).__mro__):
        err: Any = exc
        err.exit_code = int(ExitCode.NOT_STARTED)


class _Group(TyperGroup):
    """Usage errors exit 1 ("could not start") rather than click's 2, which means "host failed"."""

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().make_context(*args, **kwargs)
        except Exception as exc:
            _usage_error_exits_1(exc)
            raise

    def invoke(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().invoke(*args, **kwargs)
        except Exception as exc:
            _usage_error_exits_1(exc)
            raise


app = typer.Typer(
    name="llmfleet",
    cls=_Group,
    help=APP_HELP,
    epilog=EXIT_CODES_EPILOG,
    rich_markup_mode="rich",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_show_locals=False,
)
add_command_plugins(app)
app.command(help=PLAN_HELP, epilog=EXIT_CODES_EPILOG)(plan)
app.command(help=STATUS_HELP, epilog=EXIT_CODES_EPILOG)(status)
app.command(help=LOGS_HELP, epilog=EXIT_CODES_EPILOG)(logs)
app.command(help=DOWN_HELP, epilog=EXIT_CODES_EPILOG)(down)
app.command(help=DOCTOR_HELP, epilog=EXIT_CODES_EPILOG)(doctor)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"llmfleet {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the llmfleet version and exit.",
        ),
    ] = False,
) -> None:
    """Turn a few machines into a private vLLM backend for coding agents."""


def _playbook_path(root: Path, name: str | None) -> Path:
    if name is None:
        return root / "site.yml"
    stem = name.removesuffix(".yml").removesuffix(".yaml")
    path = root / "playbooks" / f"{stem}.yml"
    if not path.is_file():
        known = sorted(p.stem for p in (root / "playbooks").glob("*.yml"))
        hint = f"; available: {', '.join(known)}" if known else ""
        raise fail(f"playbook {name!r} not found at {path}{hint}")
    return path


@app.command(help=UP_HELP, epilog=EXIT_CODES_EPILOG)
def up(  # noqa: PLR0917 - typer maps parameters to options
    inventory: InventoryOption,
    limit: LimitOption = None,
    tags: Annotated[
        str | None, typer.Option("--tags", "-t", help="Only tasks with these tags (comma list).")
    ] = None,
    skip_tags: Annotated[
        str | None, typer.Option("--skip-tags", help="Skip tasks with these tags (comma list).")
    ] = None,
    extra_vars: ExtraVarsOption = None,
    check: Annotated[
        bool, typer.Option("--check", help="Dry run: report what would change, change nothing.")
    ] = False,
    diff: Annotated[bool, typer.Option("--diff", help="Show the changes made to files.")] = False,
    verbose: VerboseOption = 0,
    plain: PlainOption = False,
    artifacts: ArtifactsOption = None,
    as_json: JsonOption = False,
    playbook: Annotated[
        str | None,
        typer.Option(
            "--playbook",
            "-p",
            metavar="NAME",
            help="Run [cyan]playbooks/NAME.yml[/cyan] instead of [cyan]site.yml[/cyan].",
        ),
    ] = None,
    full: FullOption = False,
) -> None:
    """Bring hosts to their configured state."""
    root = _root()
    _run(
        _playbook_path(root, playbook),
        inventory,
        root=root,
        extra_vars=extra_vars,
        limit=limit,
        tags=tags,
        skip_tags=skip_tags,
        check=check,
        diff=diff,
        verbose=verbose,
        plain=plain,
        artifacts=artifacts or root / RUNS_FOLDER,
        as_json=as_json,
        # A dry run, a run limited by tags or hosts, or another playbook is never skipped.
        stop_if_unchanged=not (full or check or tags or skip_tags or limit or playbook),
    )


def _root() -> Path:
    try:
        return collection_root()
    except CollectionNotFound as exc:
        raise fail(str(exc)) from None


def _run(
    pb: Path,
    inventory: Path,
    *,
    root: Path,
    extra_vars: list[str] | None,
    plain: bool,
    verbose: int,
    status: Callable[[], str | None] | None = None,
    as_json: bool = False,
    strict: bool = False,
    stop_if_unchanged: bool = False,
    **options: Any,
) -> None:
    """Run a playbook with the live display and exit with its exit code; with ``as_json``
    the display goes to stderr and the result, as JSON, to stdout. ``strict`` refuses ``-e``
    and inventory variables nothing declares (:func:`start`). ``stop_if_unchanged`` first
    asks every host whether it is as the last full run left it, and stops there if so."""
    _, extravars = start(inventory, extra_vars, strict=strict)
    console = Console(stderr=as_json)
    try:
        ran = run_unless_unchanged(
            pb,
            inventory,
            ask=stop_if_unchanged,
            extravars=extravars,
            verbosity=verbose,
            console=console,
            plain=True if plain else None,
            root=root,
            status=status,
            **options,
        )
    except RunnerError as exc:
        raise fail(str(exc)) from None
    except KeyboardInterrupt:
        raise fail("interrupted", ExitCode.INTERRUPTED) from None
    if as_json:
        summary = {"playbook": str(ran.playbook), "inventory": str(inventory), "tags": ran.tags}
        typer.echo(json.dumps({**summary, **result_summary(ran.result)}, indent=2))
    raise typer.Exit(int(ran.result.exit_code))


@app.command(help=CHECK_HELP, epilog=EXIT_CODES_EPILOG)
def check(
    inventory: InventoryOption,
    extra_vars: ExtraVarsOption = None,
    verbose: VerboseOption = 0,
    plain: PlainOption = False,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="Refuse (exit 1, before anything runs) a variable of [cyan]-e[/cyan] or of "
            "the inventory's files with the collection's prefix ([cyan]llmfleet_[/cyan]) or a "
            "role's that nothing declares, most likely a typo; without it, a warning names the "
            "closest declared variable.",
        ),
    ] = False,
) -> None:
    """Check an inventory without changing any host."""
    root = _root()
    _run(
        _playbook_path(root, "validate"),
        inventory,
        root=root,
        extra_vars=extra_vars,
        verbose=verbose,
        plain=plain,
        strict=strict,
        quiet=True,
    )


@app.command(help=BENCH_HELP, epilog=EXIT_CODES_EPILOG)
def bench(  # noqa: PLR0917 - typer maps parameters to options
    inventory: InventoryOption,
    extra_vars: ExtraVarsOption = None,
    verbose: VerboseOption = 0,
    plain: PlainOption = False,
    artifacts: ArtifactsOption = None,
    as_json: JsonOption = False,
    llama_benchy: Annotated[
        bool,
        typer.Option(
            "--llama-benchy",
            help="Also run the community's suite, llama-benchy, with Spark Arena's profile "
            "(benchmark_llama_benchy_profile); its results go in the same report.",
        ),
    ] = False,
) -> None:
    """Benchmark the served endpoint."""
    root = _root()
    with tempfile.TemporaryDirectory(prefix="llmfleet-bench-") as tmp:
        progress_file = Path(tmp) / "progress.json"
        ours = [f"benchmark_progress_file={progress_file}"]
        if llama_benchy:
            ours.append('{"benchmark_llama_benchy": true}')
        _run(
            _playbook_path(root, "bench"),
            inventory,
            root=root,
            # Ours first: the user's -e still wins.
            extra_vars=[*ours, *(extra_vars or [])],
            verbose=verbose,
            plain=plain,
            status=lambda: progress_line(progress_file),
            artifacts=artifacts or root / RUNS_FOLDER,
            as_json=as_json,
        )


@app.command(help=TUNE_HELP, epilog=EXIT_CODES_EPILOG)
def tune(  # noqa: PLR0917 - typer maps parameters to options
    inventory: InventoryOption,
    grid: Annotated[
        list[str] | None,
        typer.Option(
            "--grid",
            metavar="KEY=V1,V2",
            help="A vLLM option (or rails, transport, speculative, group_size) and the values"
            " to try; repeatable.",
        ),
    ] = None,
    sessions: Annotated[
        str | None,
        typer.Option(
            "--sessions",
            metavar="N,N",
            help="Sessions at once to measure each point with (default 4,8).",
        ),
    ] = None,
    extra_vars: ExtraVarsOption = None,
    verbose: VerboseOption = 0,
    plain: PlainOption = False,
) -> None:
    """Sweep vLLM's options and keep the best."""
    root, extravars = start(inventory, extra_vars)
    try:
        counts = [int(n) for n in sessions.split(",")] if sessions else []
    except ValueError:
        raise fail(f"--sessions {sessions!r}: expected whole numbers, e.g. 4,8") from None
    sweep = Sweep(
        root,
        inventory,
        extravars=extravars,
        console=Console(),
        plain=True if plain else None,
        verbosity=verbose,
        runs=root / RUNS_FOLDER,
    )
    try:
        code, _report = sweep.run(parse_grid(grid or []), counts)
    except TuneError as exc:
        raise fail(str(exc)) from None
    except RunnerError as exc:
        raise fail(str(exc)) from None
    except KeyboardInterrupt:
        raise fail("interrupted", ExitCode.INTERRUPTED) from None
    raise typer.Exit(int(code))


@app.command(help=UPGRADE_HELP, epilog=EXIT_CODES_EPILOG)
def upgrade(  # noqa: PLR0917 - typer maps parameters to options
    inventory: InventoryOption,
    image: Annotated[
        str | None,
        typer.Option(
            "--image",
            metavar="REF",
            help="vLLM's image (and Ray's), tag and digest: [cyan]repo:tag@sha256:<64 hex>[/cyan].",
        ),
    ] = None,
    profile: Annotated[
        str | None,
        typer.Option("--profile", metavar="NAME", help="The model profile to serve."),
    ] = None,
    model_revision: Annotated[
        str | None,
        typer.Option(
            "--model-revision",
            metavar="REV",
            help="The model's revision on the hub (a commit, branch or tag).",
        ),
    ] = None,
    keep_images: Annotated[
        int,
        typer.Option(
            "--keep-images",
            min=1,
            metavar="N",
            help="Images kept on each host after an upgrade that sticks (the last N that served).",
        ),
    ] = 3,
    bench_gate: Annotated[
        float | None,
        typer.Option(
            "--bench-gate",
            min=0,
            metavar="PCT",
            help="Benchmark before and after the switch, and go back when output tokens/s "
            "drops or TTFT p50 rises by more than PCT percent.",
        ),
    ] = None,
    extra_vars: ExtraVarsOption = None,
    verbose: VerboseOption = 0,
    plain: PlainOption = False,
    artifacts: ArtifactsOption = None,
    as_json: JsonOption = False,
) -> None:
    """Switch the image, profile or model revision, with automatic rollback."""
    target = {
        "llmfleet_upgrade_image": image,
        "llmfleet_upgrade_profile": profile,
        "llmfleet_upgrade_model_revision": model_revision,
    }
    named: dict[str, object] = {
        name: value.strip() for name, value in target.items() if value and value.strip()
    }
    if not named:
        raise fail("nothing to upgrade: give --image, --profile or --model-revision")
    if bench_gate is not None:
        named |= {
            "llmfleet_upgrade_benchmark_gate": True,
            "llmfleet_upgrade_benchmark_allowed_pct": bench_gate,
        }
    root = _root()
    _run(
        _playbook_path(root, "upgrade"),
        inventory,
        root=root,
        # A JSON object each, so that a value is passed as it is written.
        extra_vars=[
            json.dumps({**named, "llmfleet_upgrade_keep_images": keep_images}),
            *(extra_vars or []),
        ],
        verbose=verbose,
        plain=plain,
        artifacts=artifacts or root / RUNS_FOLDER,
        as_json=as_json,
    )


def _dist_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


@app.command(epilog="[bold]Example[/bold]  [cyan]llmfleet version[/cyan]")
def version() -> None:
    """Print the llmfleet version (and the ansible-core / ansible-runner it uses)."""
    typer.echo(f"llmfleet {__version__}")
    typer.echo(f"ansible-core {_dist_version('ansible-core')}")
    typer.echo(f"ansible-runner {_dist_version('ansible-runner')}")
