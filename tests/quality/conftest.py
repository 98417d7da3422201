"""What the packaging and ansible-test gates share: the collection tarball, built once."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def collection_tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``ansible-galaxy collection build`` of the checkout: what Galaxy users install."""
    out = tmp_path_factory.mktemp("galaxy")
    proc = subprocess.run(
        ["ansible-galaxy", "collection", "build", "--output-path", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (tarball,) = out.glob("llmfleet-cluster-*.tar.gz")
    return tarball
