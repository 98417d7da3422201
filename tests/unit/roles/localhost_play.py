"""Run a test playbook of this folder (or one written by a test) on localhost with
ansible-playbook, from the repository root, with this environment's Python."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
ROOT = HERE.parents[2]


def play_on_localhost(
    playbook: Path,
    extra_vars: Mapping[str, Any],
    *options: str,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``ansible-playbook PLAYBOOK -i localhost, -e EXTRA_VARS OPTIONS`` (the extra vars as
    JSON, ``ansible_python_interpreter`` added); never raises on a failed run."""
    variables = {"ansible_python_interpreter": sys.executable, **extra_vars}
    return subprocess.run(
        [
            "ansible-playbook",
            str(playbook),
            "-i",
            "localhost,",
            "-e",
            json.dumps(variables),
            *options,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
        env=None if env is None else dict(env),
    )
