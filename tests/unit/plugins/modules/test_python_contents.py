"""modules/python_contents: the contents script run for real with a host's Python (here this
one, and a virtualenv-shaped folder whose vLLM is a stand-in package), a Python that cannot
run it reported, never a change."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ansible_collections.llmfleet.cluster.plugins.modules import python_contents

RunModule = Callable[..., tuple[int, dict[str, Any]]]


def test_reads_this_pythons_distributions_and_changes_nothing(run_module: RunModule) -> None:
    rc, result = run_module(python_contents, {"python": sys.executable})
    assert rc == 0, result
    assert result["changed"] is False
    assert result["contents"]["python"] == ".".join(str(n) for n in sys.version_info[:3])
    assert "vllm" in result["contents"]["distributions"]


def test_reads_the_parsers_of_the_vllm_it_finds(tmp_path: Path, run_module: RunModule) -> None:
    # A Python whose path holds a vLLM package (as a virtualenv's site-packages would).
    package = tmp_path / "site" / "vllm"
    (package / "tool_parsers").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "tool_parsers" / "__init__.py").write_text(
        "_TOOL_PARSERS_TO_REGISTER = {'hermes': ('a', 'B')}\n"
    )
    python = tmp_path / "bin" / "python3"
    python.parent.mkdir()
    python.write_text(f'#!/bin/sh\nPYTHONPATH={tmp_path / "site"} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    rc, result = run_module(python_contents, {"python": str(python)})
    assert rc == 0, result
    assert result["contents"]["parsers"] == {"tool-call-parser": ["hermes"]}


def test_a_python_that_cannot_run_the_script_is_reported(
    tmp_path: Path, run_module: RunModule
) -> None:
    rc, result = run_module(python_contents, {"python": str(tmp_path / "absent")})
    assert rc == 0, result
    assert result["contents"] == {"error": f"{tmp_path / 'absent'} is no program to run"}
    broken = tmp_path / "python3"
    broken.write_text("#!/bin/sh\necho 'cannot execute binary file' >&2\nexit 126\n")
    broken.chmod(0o755)
    rc, result = run_module(python_contents, {"python": str(broken)})
    assert result["contents"]["error"] == (
        f"{broken} did not run the script (exit 126): cannot execute binary file"
    )
