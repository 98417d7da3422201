"""``llmfleet up``'s early stop (llmfleet.converged): the verdict of the comparison's run (every
host as one full run left it, or the reasons, a line each), and what is printed either way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from llmfleet import converged
from llmfleet.converged import (
    REASONS_SHOWN,
    WALK_FROM,
    Walk,
    run_unless_unchanged,
    scope,
    unchanged,
    variables_only,
    verdict,
)
from llmfleet.run_outcome import Failure, HostStats, RunResult


def answer(run: str = "r1", *changes: str, parts: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "converged": not changes,
        "changes": list(changes),
        "changed_inputs": list(parts),
        "run": run,
    }


def variables_changed(run: str = "r1", *names: str, also: tuple[str, ...] = ()) -> dict[str, Any]:
    """A host whose only change since ``run`` is the variables ``names`` (and ``also``)."""
    line = f"the inputs changed since run {run}: {', '.join(names)}"
    return answer(run, line, *also, parts=tuple(f"var:{name}" for name in names))


def result(
    answers: dict[str, dict[str, Any]], *, hosts: tuple[str, ...] | None = None, rc: int = 0
) -> RunResult:
    """The comparison's run: a recap line for each of ``hosts`` (by default those that
    answered), each one's answer."""
    stats = {host: HostStats(ok=1) for host in (answers if hosts is None else hosts)}
    return RunResult(
        rc=rc, status="successful" if rc == 0 else "failed", stats=stats, converged=answers
    )


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        pytest.param(
            result({"spark-1": answer(), "spark-2": answer()}), ("r1", []),
            id="every host as one run left it",
        ),
        pytest.param(
            result({"spark-1": answer("r1"), "spark-2": answer("r2")}),
            (None, ["the hosts' records come from different runs: r1, r2"]),
            id="records of different runs",
        ),
        pytest.param(
            result({"spark-1": answer()}, hosts=("spark-1", "spark-2")),
            (None, ["spark-2: did not answer"]),
            id="a host that did not answer",
        ),
        pytest.param(
            result({"spark-1": answer()}, hosts=()), ("r1", []),
            id="an answer without a recap line still counts",
        ),
        pytest.param(
            result({
                "spark-1": answer("r1", "/etc/a: its content changed", "unit u: restarted since"),
                "spark-2": answer("", "no record of a full run"),
            }),
            (None, ["spark-1: /etc/a: its content changed", "spark-1: unit u: restarted since",
                    "spark-2: no record of a full run"]),
            id="the changes, a line each",
        ),
        pytest.param(
            result({"spark-1": {"converged": False, "changes": [], "run": "r1"}}),
            (None, ["spark-1: not as the last full run left it"]),
            id="not converged without a reason",
        ),
        pytest.param(
            result({"spark-1": {"converged": False}}),
            (None, ["spark-1: not as the last full run left it"]),
            id="an answer with only the verdict",
        ),
        pytest.param(
            result({}), (None, ["no host of the inventory answered the comparison"]),
            id="no host at all",
        ),
        pytest.param(
            result({"spark-1": answer()}, rc=2),
            (None, ["the comparison ended with exit code 2"]),
            id="every host converged but the run failed",
        ),
        pytest.param(
            RunResult(rc=4, status="failed", stats={"spark-1": HostStats(unreachable=1)}),
            (None, ["spark-1: did not answer"]),
            id="an unreachable host",
        ),
    ],
)  # fmt: skip
def test_verdict(run: RunResult, expected: tuple[str | None, list[str]]) -> None:
    assert verdict(run) == expected


def test_different_runs_are_said_only_when_nothing_else_is() -> None:
    run = result({"spark-1": answer("r1"), "spark-2": answer("r2", "/etc/a: removed")})
    assert verdict(run) == (None, ["spark-2: /etc/a: removed"])


def test_a_failed_comparison_with_reasons_gives_the_reasons() -> None:
    run = result({"spark-1": answer("r1", "rebooted since run r1")}, rc=2)
    run.failures.append(Failure(host="spark-2", task="Compare", msg="boom"))
    assert verdict(run) == (None, ["spark-1: rebooted since run r1"])


class Comparison:
    """run_playbook, answering with ``result`` and recording how it was asked."""

    def __init__(self, answer: RunResult) -> None:
        self.answer = answer
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> RunResult:
        self.calls.append((args, kwargs))
        return self.answer


def ask(
    monkeypatch: pytest.MonkeyPatch, answer: RunResult, tmp_path: Path
) -> tuple[RunResult | Walk, str, Comparison]:
    comparison = Comparison(answer)
    monkeypatch.setattr(converged, "run_playbook", comparison)
    console = Console(width=200, record=True, force_terminal=False)
    got = unchanged(
        tmp_path, tmp_path / "hosts", extravars=[{"a": 1}], console=console, plain=True,
        verbosity=0,
    )  # fmt: skip
    return got, console.export_text(), comparison


def test_unchanged_says_so_and_returns_the_comparison(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    answered = result({"spark-2": answer(), "spark-1": answer()})
    answered.elapsed = 1.25
    got, out, comparison = ask(monkeypatch, answered, tmp_path)
    assert got is answered
    assert (
        "Nothing changed since the last full run (r1) on spark-1, spark-2: every file, unit and "
        "container as it left them, every readiness check passing (1.2 s). llmfleet up --full "
        "walks every task." in " ".join(out.split())
    ), out
    ((args, kwargs),) = comparison.calls
    assert args == (tmp_path / "playbooks" / "converged.yml", tmp_path / "hosts")
    assert kwargs["extravars"] == [{"a": 1}]
    assert (kwargs["quiet"], kwargs["recap"], kwargs["root"]) == (True, False, tmp_path)


def test_unchanged_says_why_not_and_returns_a_walk_of_everything(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    changes = [f"/etc/{i}: removed" for i in range(REASONS_SHOWN + 3)]
    got, out, _ = ask(monkeypatch, result({"spark-1": answer("r1", *changes)}), tmp_path)
    assert got == Walk()
    lines = out.splitlines()
    assert lines[0] == "Walking site.yml, since the last full run:"
    assert lines[1 : REASONS_SHOWN + 1] == [f"  spark-1: /etc/{i}: removed" for i in range(8)]
    assert lines[REASONS_SHOWN + 1 :] == ["  and 3 more"]


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        pytest.param(
            {"spark-1": variables_changed("r1", "a"), "spark-2": variables_changed("r1", "b")},
            ("r1", ["a", "b"]), id="variables on each host",
        ),
        pytest.param(
            {"spark-1": variables_changed("r1", "a"), "spark-2": answer("r1")},
            ("r1", ["a"]), id="a host that did not change",
        ),
        pytest.param(
            {"spark-1": variables_changed("r1", "a", also=("/etc/a: removed",))},
            None, id="something else changed too",
        ),
        pytest.param(
            {"spark-1": answer("r1", "the inputs changed since run r1: x", parts=("files",))},
            None, id="the collection's files",
        ),
        pytest.param(
            {"spark-1": variables_changed("r1", "a"), "spark-2": variables_changed("r2", "a")},
            None, id="records of different runs",
        ),
        pytest.param({"spark-1": answer("r1")}, None, id="nothing changed"),
        pytest.param({"spark-1": answer("", "no record of a full run")}, None, id="no record"),
    ],
)  # fmt: skip
def test_variables_only(answers: dict[str, dict[str, Any]], expected: object) -> None:
    assert variables_only(result(answers)) == expected


def test_variables_only_needs_every_host_to_answer() -> None:
    answered = result({"spark-1": variables_changed("r1", "a")}, hosts=("spark-1", "spark-2"))
    assert variables_only(answered) is None
    assert variables_only(result({"spark-1": variables_changed("r1", "a")}, rc=2)) is None


def test_scope_walks_the_tags_the_variables_reach(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[list[str]] = []

    def tags(root: Path, names: list[str]) -> list[str] | None:
        asked.append(list(names))
        return None if "ansible_host" in names else ["claude_code"]

    monkeypatch.setattr(converged, "walk_tags", tags)
    run = result({"spark-1": variables_changed("r1", "claude_code_version")})
    assert scope(Path("."), run) == Walk(["claude_code"], "r1", ["claude_code_version"])
    run = result({"spark-1": variables_changed("r1", "ansible_host")})
    assert scope(Path("."), run) == Walk(None, "", ["ansible_host"])
    assert asked == [["claude_code_version"], ["ansible_host"]]
    assert scope(Path("."), result({"spark-1": answer("r1", "/etc/a: removed")})) == Walk()


def test_a_limited_walk_runs_site_with_its_tags_and_the_run_it_extends(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[tuple[Path, dict[str, Any]]] = []
    compared = result({"spark-1": variables_changed("r1", "claude_code_version")})

    def run_playbook(playbook: Path, inventory: Path, **kwargs: Any) -> RunResult:
        calls.append((playbook, kwargs))
        return compared if playbook.name == "converged.yml" else result({})

    monkeypatch.setattr(converged, "run_playbook", run_playbook)
    monkeypatch.setattr(converged, "walk_tags", lambda root, names: ["claude_code"])
    console = Console(width=300, record=True, force_terminal=False)
    played, _, tags = run_unless_unchanged(
        tmp_path / "site.yml", tmp_path / "hosts", ask=True, extravars={"a": 1},
        console=console, plain=True, verbosity=0, root=tmp_path,
    )  # fmt: skip
    assert (played, tags) == (tmp_path / "site.yml", "claude_code")
    (_, first), (_, walk) = calls
    assert first["extravars"] == {"a": 1} and "tags" not in first
    assert walk["tags"] == "claude_code"
    assert walk["extravars"] == [{"a": 1}, {WALK_FROM: "r1"}]
    out = " ".join(console.export_text().split())
    assert (
        "Only variables changed, and nothing else since run r1: walking the tasks they reach "
        "(--tags claude_code), the checks of the whole inventory included." in out
    ), out
