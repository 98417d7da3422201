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
