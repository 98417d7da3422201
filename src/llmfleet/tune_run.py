"""The sweep of ``llmfleet tune`` on a cluster: each point served and benchmarked in turn, a
progress bar across the whole sweep, the report written, the winner kept and served."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from llmfleet.bench_progress import BAR_WIDTH, bench_fraction, progress_line, read_progress
from llmfleet.run_outcome import ExitCode, RunResult
from llmfleet.runner import run_playbook
from llmfleet.tune import (
    THROUGHPUT_SLACK,
    TUNED_FILE,
    TuneError,
    choose,
    grid_points,
    grid_problems,
    inventory_settings,
    layout_problems,
    measurements,
    needs_whole_site,
    point_label,
    point_variables,
    session_scenarios,
    sweep_plan,
    tuned_file_text,
)
from llmfleet.tune_report import render_markdown, render_png

SERVE_TAGS = "preflight,vllm_server"
TUNE_FOLDER = Path("artifacts", "tune")


def sweep_line(done: float, total: int, text: str) -> str:
    """``tune [####....] 2/6 <text>``: the bar counts points, a point half done when its
    benchmark starts."""
    filled = min(BAR_WIDTH, int(BAR_WIDTH * done / total)) if total else 0
    return f"tune [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {int(done) + 1}/{total} {text}"


def _failure(result: RunResult) -> str:
    if result.failures:
        first = result.failures[0]
        return f"{first.host}: {first.task}: {first.msg}"
    return f"the run ended with exit code {int(result.exit_code)}"


class Sweep:
    """One ``llmfleet tune`` run (see ``run``)."""

    def __init__(
        self,
        root: Path,
        inventory: Path,
        *,
        extravars: list[dict[str, Any] | Path],
        console: Console,
        plain: bool | None,
        verbosity: int,
        runs: Path,
    ) -> None:
        self.root, self.inventory, self.extravars = root, inventory, extravars
        self.console, self.plain, self.verbosity, self.runs = console, plain, verbosity, runs

    def play(
        self, playbook: Path, extra: list[dict[str, Any]], tags: str | None, status: Any
    ) -> RunResult:
        return run_playbook(
            playbook,
            self.inventory,
            tags=tags,
            extravars=[*self.extravars, *extra],
            verbosity=self.verbosity,
            console=self.console,
            plain=self.plain,
            root=self.root,
            status=status,
            artifacts=self.runs,
        )

    def measure(
        self, number: int, total: int, point: dict[str, Any], folder: Path, scenarios: list[Any]
    ) -> dict[str, Any]:
        """Serve one point and benchmark it: its result entry."""
        label = point_label(point)
        variables = point_variables(point)
        serving = self.play(
            self.root / "site.yml",
            [variables],
            None if needs_whole_site(point) else SERVE_TAGS,
            lambda: sweep_line(number - 1, total, f"{label}: serving"),
        )
        if serving.exit_code != ExitCode.OK:
            return {"point": point, "error": f"not served: {_failure(serving)}"}
        progress = folder / "progress.json"
        bench = {
            "benchmark_scenarios": scenarios,
            "benchmark_results_dir": str(folder),
            "benchmark_progress_file": str(progress),
            "benchmark_plot": False,
            "benchmark_claude_code": False,
            # Counted, not fatal: a point with errors cannot win (choose), the sweep goes on.
            "benchmark_max_errors": 1_000_000,
        }

        def status() -> str:
            read = read_progress(progress)
            return sweep_line(
                number - 1 + 0.5 + 0.5 * bench_fraction(read),
                total,
                f"{label}: {progress_line(progress, read) or 'benchmark starting'}",
            )

        measuring = self.play(
            self.root / "playbooks" / "bench.yml", [variables, bench], None, status
        )
        records = sorted(folder.glob("bench-*.json"))
        if measuring.exit_code != ExitCode.OK or not records:
            return {"point": point, "error": f"not measured: {_failure(measuring)}"}
        record = json.loads(records[-1].read_text(encoding="utf-8"))
        return {
            "point": point,
            "measured": measurements(record["benchmark"]),
            "bench": str(records[-1]),
        }

    def run(self, grid: dict[str, list[Any]], sessions: list[int]) -> tuple[ExitCode, Path]:
        """Sweep, report, keep and serve the winner; the exit code and the report's JSON."""
        settings = inventory_settings(self.root, self.inventory)
        grid, counts, shape = sweep_plan(self.root, settings, grid, sessions)
        problems = grid_problems(grid, self.root) + layout_problems(grid, settings, self.root)
        problems += [f"--sessions has {c!r}; expected whole numbers above 0" for c in counts
                     if not isinstance(c, int) or isinstance(c, bool) or c < 1]  # fmt: skip
        if problems:
            raise TuneError("; ".join(problems))
        points = grid_points(grid)
        scenarios = session_scenarios(shape, counts)
        started = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        folder = self.root / TUNE_FOLDER / f"tune-{started}"
        self.console.print(
            f"tune: {len(points)} points x {len(counts)} session counts; reports in {folder}",
            highlight=False,
            soft_wrap=True,
        )
        results = []
        for number, point in enumerate(points, start=1):
            point_folder = folder / f"point-{number}"
            point_folder.mkdir(parents=True, exist_ok=True)
            results.append(self.measure(number, len(points), point, point_folder, scenarios))
        winner = choose(results)
        tuned = self.inventory_folder() / TUNED_FILE
        sweep = {
            "inventory": str(self.inventory),
            "started": started,
            "grid": grid,
            "sessions": counts,
            "shape": {k: v for k, v in scenarios[-1].items() if k not in ("name", "sessions")},
            "scenarios": [s["name"] for s in scenarios if s.get("kind") == "session"],
            "throughput_slack": THROUGHPUT_SLACK,
            "points": results,
            "winner": winner,
            "tuned_file": str(tuned),
        }
        report = folder.with_suffix(".json")
        report.write_text(json.dumps(sweep, indent=2) + "\n", encoding="utf-8")
        report.with_suffix(".md").write_text(render_markdown(sweep), encoding="utf-8")
        try:
            report.with_suffix(".png").write_bytes(render_png(sweep))
        except ImportError:
            self.console.print("tune: no PNG (matplotlib is not installed)", highlight=False)
        if winner is not None:
            tuned.parent.mkdir(parents=True, exist_ok=True)
            tuned.write_text(tuned_file_text(points[winner], str(report)), encoding="utf-8")
        # The winner (from the file just written), or without one the inventory as it was.
        last = self.play(
            self.root / "site.yml",
            [],
            None if any(needs_whole_site(p) for p in points) else SERVE_TAGS,
            lambda: sweep_line(len(points) - 1, len(points), "serving the winner"),
        )
        self.console.print(render_markdown(sweep), highlight=False, markup=False, soft_wrap=True)
        if winner is None or last.exit_code != ExitCode.OK:
            return ExitCode.HOST_FAILED, report
        return ExitCode.OK, report

    def inventory_folder(self) -> Path:
        """Where the inventory's group_vars are: the inventory itself, or a file's folder."""
        return self.inventory if self.inventory.is_dir() else self.inventory.parent
