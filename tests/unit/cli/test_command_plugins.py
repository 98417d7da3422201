"""Commands other distributions add through the llmfleet.commands entry points."""

from __future__ import annotations

from importlib import metadata

import pytest
import typer
from typer.testing import CliRunner

from llmfleet.cli import app
from llmfleet.command_plugins import GROUP, add_command_plugins

PLUGIN = typer.Typer(help="A plugin's command.")
NOT_AN_APP = object()


@PLUGIN.command()
def hello() -> None:
    typer.echo("hello from the plugin")


def entry(name: str, value: str) -> metadata.EntryPoint:
    return metadata.EntryPoint(name=name, value=value, group=GROUP)


def test_each_entry_point_adds_its_command_by_name() -> None:
    target = typer.Typer()

    @target.command()
    def own() -> None: ...

    here = __name__
    assert add_command_plugins(target, [entry("extra", f"{here}:PLUGIN")]) == ["extra"]
    result = CliRunner().invoke(target, ["extra", "hello"])
    assert result.exit_code == 0, result.output
    assert "hello from the plugin" in result.output


def test_a_plugin_that_does_not_load_is_left_out_with_a_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    target = typer.Typer()
    found = [
        entry("broken", "llmfleet_no_such_module:app"),
        entry("wrong", f"{__name__}:NOT_AN_APP"),
        entry("fine", f"{__name__}:PLUGIN"),
    ]
    assert add_command_plugins(target, found) == ["fine"]
    err = capsys.readouterr().err
    assert "warning: command broken (llmfleet_no_such_module:app) not loaded:" in err
    assert "No module named 'llmfleet_no_such_module'" in err
    assert f"warning: command wrong ({__name__}:NOT_AN_APP) not loaded: not a Typer app" in err


def test_the_checkouts_cli_has_the_labs_command_from_its_distribution() -> None:
    """make venv installs llmfleet-lab (lab/pyproject.toml), whose entry point adds `lab`."""
    (lab,) = [e for e in metadata.entry_points(group=GROUP) if e.name == "lab"]
    assert lab.value == "llmfleet_lab.cli:lab_app"
    assert lab.dist is not None and lab.dist.name == "llmfleet-lab"
    result = CliRunner().invoke(app, ["lab", "--help"])
    assert result.exit_code == 0, result.output
