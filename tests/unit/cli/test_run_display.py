"""run_display: what a module warned of reaches the user, with the host, in both modes."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from llmfleet.run_display import RunProgress


def event(res: dict[str, object]) -> dict[str, object]:
    return {
        "event": "runner_on_ok",
        "event_data": {
            "host": "spark-2",
            "task": "Verify",
            "task_action": "x.y.model_manifest",
            "res": res,
        },
    }


@pytest.mark.parametrize("plain", [True, False])
def test_a_modules_warning_is_shown_with_its_host(plain: bool) -> None:
    out = io.StringIO()
    progress = RunProgress(Console(file=out, width=200), plain=plain, verbosity=0)
    progress.handle(
        event({"changed": True, "warnings": ["model.safetensors: sha256 ab... expected cd..."]})
    )
    progress.handle(event({"changed": False, "warnings": [{"msg": "structured one"}]}))
    progress.handle(event({"censored": "the output has been hidden", "changed": False}))
    text = out.getvalue()
    assert "[spark-2] warning: model.safetensors: sha256 ab... expected cd...\n" in text
    assert "[spark-2] warning: structured one\n" in text


def retry(res: dict[str, object]) -> dict[str, object]:
    return {
        "event": "runner_retry",
        "event_data": {"host": "spark-2", "task": "Wait for the copy", "res": res},
    }


@pytest.mark.parametrize("plain", [True, False])
def test_a_transfers_progress_is_shown_on_each_attempt(plain: bool) -> None:
    out = io.StringIO()
    progress = RunProgress(Console(file=out, width=200), plain=plain, verbosity=0)
    line = "copy from spark-1: 44.1 GB of 122.4 GB (36%), 412.0 MB/s"
    progress.handle(retry({"attempts": 3, "retries": 1441, "progress": line}))
    # In the host's row (the live table), and as a line of its own in plain mode.
    assert progress.hosts["spark-2"].task == f"Wait for the copy: {line}"
    assert (f"[spark-2] {line}\n" in out.getvalue()) is plain
    # A retry of any other task still shows its count.
    progress.handle(retry({"attempts": 2, "retries": 5}))
    assert progress.hosts["spark-2"].task == "Wait for the copy (retry 2/5)"
