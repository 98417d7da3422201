"""The benchmark's progress, as `llmfleet bench` shows it while the run goes on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

BAR_WIDTH = 24


def progress_line(path: Path) -> str | None:
    """One line from the progress file the load generator rewrites after every request,
    e.g. ``bench 3/10 short_c8 [#########...............] 6/16 requests, 0 errors, 12 s``;
    None while there is no readable file."""
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        done, total = int(data["done"]), int(data["requests"])
        index, count = int(data["scenario_index"]), int(data["scenarios"])
        scenario, errors = str(data["scenario"]), int(data.get("errors", 0))
        elapsed = float(data.get("elapsed_s", 0.0))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    filled = BAR_WIDTH * done // total if total > 0 else 0
    bar = "#" * filled + "." * (BAR_WIDTH - filled)
    return (
        f"bench {index}/{count} {scenario} [{bar}] {done}/{total} requests, "
        f"{errors} error{'s' if errors != 1 else ''}, {elapsed:.0f} s"
    )
