"""`llmfleet up` runs site.yml on the lab through ansible-runner."""

from __future__ import annotations

import subprocess

from .conftest import Lab


def run_up(lab: Lab, *args: str) -> subprocess.CompletedProcess[str]:
    return lab.run("llmfleet", "up", "-i", "inventory/lab", "--plain", *args, timeout=1200)


def test_site_runs_on_the_lab(lab: Lab) -> None:
    proc = run_up(lab)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "spark-1 : ok=" in proc.stdout
    assert "spark-2 : ok=" in proc.stdout
    assert "enp1s0f1np1 up mtu" in proc.stdout  # the report play shows the fabric


def test_site_in_check_mode_changes_nothing(lab: Lab) -> None:
    proc = run_up(lab, "--check", "--diff")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "changed=0" in proc.stdout
    assert "changed=1" not in proc.stdout
