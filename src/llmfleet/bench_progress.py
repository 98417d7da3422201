"""The benchmark's progress, as `llmfleet bench` shows it while the run goes on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

BAR_WIDTH = 24


def read_progress(path: Path) -> dict[str, Any] | None:
    """The progress file the load generator rewrites after every request, its numbers
    checked; None while there is no readable file."""
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return {
            "done": int(data["done"]),
            "requests": int(data["requests"]),
            "scenario_index": int(data["scenario_index"]),
            "scenarios": int(data["scenarios"]),
            "scenario": str(data["scenario"]),
            "errors": int(data.get("errors", 0)),
            "elapsed_s": float(data.get("elapsed_s", 0.0)),
        }
    except (OSError, ValueError, KeyError, TypeError):
        return None


def bench_fraction(progress: dict[str, Any] | None) -> float:
    """How much of the whole run a progress (``read_progress``) has done, 0 to 1."""
    if progress is None:
        return 0.0
    done = int(progress["done"]) / max(1, int(progress["requests"]))
    return (int(progress["scenario_index"]) - 1 + done) / max(1, int(progress["scenarios"]))


def progress_line(path: Path, progress: dict[str, Any] | None = None) -> str | None:
    """One line from the progress file (or the ``progress`` already read from it), e.g.
    ``bench 3/10 short_c8 [#########...............] 6/16 requests, 0 errors, 12 s``;
    None while there is no readable file."""
    progress = progress or read_progress(path)
    if progress is None:
        return None
    done, total = progress["done"], progress["requests"]
    index, count = progress["scenario_index"], progress["scenarios"]
    scenario, errors, elapsed = progress["scenario"], progress["errors"], progress["elapsed_s"]
    filled = BAR_WIDTH * done // total if total > 0 else 0
    bar = "#" * filled + "." * (BAR_WIDTH - filled)
    return (
        f"bench {index}/{count} {scenario} [{bar}] {done}/{total} requests, "
        f"{errors} error{'s' if errors != 1 else ''}, {elapsed:.0f} s"
    )
