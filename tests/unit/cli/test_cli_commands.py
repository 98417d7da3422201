"""CLI surface: help, version, argument errors; pure helpers (no ansible run)."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from llmfleet_lab import cluster, node_settings
from rich.text import Text
from typer.testing import CliRunner

from llmfleet import __version__
from llmfleet.bench_progress import progress_line
from llmfleet.cli import app
from llmfleet.cli_options import parse_extra_vars
from llmfleet.declared_variables import DeclaredVariables
from llmfleet.paths import CollectionNotFound, ansible_env, collection_root
from llmfleet.run_display import result_details

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[3]


def _plain(lines: list[Text]) -> str:
    return "\n".join(line.plain for line in lines)


def test_help_explains_the_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    out = result.output
    for needle in ("vLLM", "make demo", "make test", "llmfleet up -i", "Exit codes", "130"):
        assert needle in out
    for command in ("up", "version", "lab"):
        assert command in out


def test_up_help_has_examples_and_exit_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    result = runner.invoke(app, ["up", "--help"])
    assert result.exit_code == 0
    for needle in ("--inventory", "--limit", "--extra-vars", "--plain", "--check", "Exit codes"):
        assert needle in result.output
    assert "llmfleet up -i inventory/sparks" in result.output


def test_version() -> None:
    result = runner.invoke(app, ["version"])
    assert result.exit_code == 0
    assert result.output.splitlines()[0] == f"llmfleet {__version__}"
    assert "ansible-core" in result.output


def test_version_option_prints_the_installed_packages_version() -> None:
    """One version: pyproject.toml's, as the installed package's metadata carries it."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert __version__ == metadata.version("llmfleet") == project["version"]
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout == f"llmfleet {__version__}\n"


def test_missing_inventory_exits_1_and_names_it(fake_collection: object) -> None:
    result = runner.invoke(app, ["up", "-i", "no/such/hosts.yml", "--plain"])
    assert result.exit_code == 1
    assert "no/such/hosts.yml" in result.output
    assert "inventory not found" in result.output


def test_usage_error_exits_1_not_2() -> None:
    result = runner.invoke(app, ["up"])  # -i is required
    assert result.exit_code == 1
    assert "--inventory" in result.output


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--bogus"], "No such option"),
        (["nosuch"], "No such command"),
        (["up", "-i", "hosts.ini", "--bogus"], "No such option"),
        (["bench", "--json"], "--inventory"),
        (["version", "extra"], "unexpected extra argument"),
        (["lab", "nosuch"], "No such command"),
        (["lab", "up", "--nodes", "x"], "--nodes"),
        (["lab", "up", "--nodes", "1"], "--nodes"),
        (["lab", "up", "--ports", "x"], "expected a comma-separated list"),
        (["lab", "set", "novalue"], "expected KEY=VALUE"),
    ],
)
def test_bad_arguments_exit_1_everywhere(
    args: list[str], says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2 means "a host failed"; no bad argument may exit with it. Nothing starts."""

    def must_not_run(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a bad argument must stop the command before it acts")

    for name in ("up", "down", "status"):
        monkeypatch.setattr(cluster, name, must_not_run)
    monkeypatch.setattr(node_settings, "set_setting", must_not_run)
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    assert says in " ".join(result.output.split()), result.output


@pytest.mark.parametrize("command", [[], ["up"], ["bench"], ["lab"], ["lab", "up"]])
def test_help_documents_that_bad_arguments_exit_1(
    command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0
    assert "Exit codes" in result.output
    assert re.search(r"1 +(could not start: )?bad arguments \(any usage error\)", result.output)


def test_unknown_playbook_exits_1(fake_collection: object) -> None:
    result = runner.invoke(app, ["up", "-i", "collection/hosts.ini", "--playbook", "nope"])
    assert result.exit_code == 1
    assert "nope" in result.output


def test_collection_not_found_exits_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMFLEET_HOME", str(tmp_path))
    inv = tmp_path / "hosts.ini"
    inv.write_text("localhost\n")
    result = runner.invoke(app, ["up", "-i", str(inv)])
    assert result.exit_code == 1
    assert "LLMFLEET_HOME" in result.output


def test_collection_root_walks_up(tmp_path: Path) -> None:
    (tmp_path / "galaxy.yml").write_text("x: 1\n")
    (tmp_path / "site.yml").write_text("[]\n")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert collection_root(cwd=deep, environ={}) == tmp_path.resolve()
    assert collection_root(environ={"LLMFLEET_HOME": str(tmp_path)}) == tmp_path.resolve()
    with pytest.raises(CollectionNotFound, match="LLMFLEET_HOME"):
        collection_root(environ={"LLMFLEET_HOME": str(deep)})


def test_ansible_env(tmp_path: Path) -> None:
    env = ansible_env(tmp_path, tty=False)
    assert env["ANSIBLE_CONFIG"] == str(tmp_path / "ansible.cfg")
    assert env["ANSIBLE_NOCOLOR"] == "1"
    assert env["ANSIBLE_FORCE_COLOR"] == "0"
    assert "ANSIBLE_NOCOLOR" not in ansible_env(tmp_path, tty=True)


def test_parse_extra_vars(tmp_path: Path) -> None:
    f = tmp_path / "vars.yml"
    f.write_text("a: 1\n")
    undeclared = DeclaredVariables([], [])
    assert parse_extra_vars(["a=1", "b=x=y z", f"@{f}", '{"c": [1, 2]}'], undeclared) == [
        {"a": "1"},
        {"b": "x=y z"},
        f,
        {"c": [1, 2]},
    ]
    for bad in ("novalue", "1abc=2", "@/no/such/file", "{bad json", "[1]"):
        with pytest.raises(ValueError):
            parse_extra_vars([bad], undeclared)


def test_result_details_never_shows_invocation_or_censored_data() -> None:
    res = {
        "msg": "non-zero return code",
        "rc": 3,
        "stderr": "\n".join(f"line {i}" for i in range(30)),
        "stdout": "",
        "invocation": {"module_args": {"password": "hunter2"}},
    }
    msg, lines = result_details(res)
    text = _plain(lines)
    assert msg == "non-zero return code"
    assert "rc: 3" in text
    assert "line 29" in text and "line 10" in text and "line 9\n" not in text
    assert "last 20 of 30 lines" in text
    assert "hunter2" not in text and "invocation" not in text

    censored = {
        "censored": "the output has been hidden",
        "stderr": "hunter2",
        "_ansible_no_log": True,
    }
    msg, lines = result_details(censored)
    assert msg == "the output has been hidden"
    assert lines == []


def test_result_details_give_a_filters_sentence_without_ansibles_templating_chain() -> None:
    # What ansible-core 2.19 said when a filter refused a value in an assert's message.
    chain = (
        "Task failed: Finalization of task args for 'ansible.builtin.assert' failed: Error while"
        " resolving value for 'fail_msg': "
    )
    sentence = (
        "cluster_firewall_allowed_sources has '10.0.0.0/33'; expected an IPv4/IPv6 address"
        " or network"
    )
    filtered = {
        "msg": chain + "The filter plugin 'llmfleet.cluster.firewall_sources' failed: " + sentence
    }
    assert result_details(filtered)[0] == sentence
    # Another error of the template keeps what it is: it is no filter's sentence.
    rendering = {"msg": chain + "Error rendering template: can only concatenate list"}
    assert result_details(rendering)[0] == "Error rendering template: can only concatenate list"


def test_result_details_loop_items() -> None:
    res = {
        "msg": "One or more items failed",
        "results": [
            {"failed": False, "item": "a"},
            {"failed": True, "item": "b", "msg": "bad b", "stderr": "err-b"},
            {"failed": True, "_ansible_no_log": True, "censored": "hidden", "stderr": "s3cret"},
        ],
    }
    _, lines = result_details(res)
    text = _plain(lines)
    assert "item b: bad b" in text and "err-b" in text
    assert "s3cret" not in text and "hidden" in text


@pytest.mark.parametrize(
    ("content", "line"),
    [
        (
            '{"scenario": "sweep_c64", "scenario_index": 6, "scenarios": 10, "done": 64,'
            ' "requests": 64, "errors": 0, "elapsed_s": 41.6}',
            "bench 6/10 sweep_c64 [########################] 64/64 requests, 0 errors, 42 s",
        ),
        (
            '{"scenario": "warmup", "scenario_index": 1, "scenarios": 2, "done": 0,'
            ' "requests": 0, "errors": 0}',
            "bench 1/2 warmup [........................] 0/0 requests, 0 errors, 0 s",
        ),
        ('{"scenario": "half written', None),
        ('{"done": 1}', None),
    ],
)
def test_bench_progress_line(tmp_path: Path, content: str, line: str | None) -> None:
    path = tmp_path / "progress.json"
    path.write_text(content)
    assert progress_line(path) == line


def test_bench_progress_line_before_the_file_exists(tmp_path: Path) -> None:
    assert progress_line(tmp_path / "missing.json") is None
