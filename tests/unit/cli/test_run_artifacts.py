"""run_artifacts: the folder of each run, and what is hidden in it (no ansible run)."""

from __future__ import annotations

import datetime
import json
import stat
from pathlib import Path

from llmfleet.run_artifacts import HIDDEN, make_private_folder, run_ident, scrub, secret_values

NOW = datetime.datetime(2026, 11, 22, 23, 10, tzinfo=datetime.UTC)


def test_run_ident_is_the_time_and_the_playbook_and_never_reused(tmp_path: Path) -> None:
    assert run_ident(tmp_path, Path("/x/site.yml"), NOW) == "20261122T231000Z-site"
    (tmp_path / "20261122T231000Z-site").mkdir()
    assert run_ident(tmp_path, Path("/x/site.yml"), NOW) == "20261122T231000Z-site-2"
    (tmp_path / "20261122T231000Z-site-2").mkdir()
    assert run_ident(tmp_path, Path("/x/site.yml"), NOW) == "20261122T231000Z-site-3"
    assert run_ident(tmp_path, Path("playbooks/bench.yml"), NOW) == "20261122T231000Z-bench"


def test_private_folder_is_owner_only_even_when_it_existed(tmp_path: Path) -> None:
    folder = tmp_path / "a" / "runs"
    folder.mkdir(parents=True, mode=0o755)
    folder.chmod(0o755)
    assert make_private_folder(folder) == folder.resolve()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_secret_values_by_name_longest_first() -> None:
    environ = {
        "LLMFLEET_API_KEY": "sk-1234567890",
        "GITHUB_TOKEN": "ghp_abcdefgh",
        "DB_PASSWORD": "sk-1234567890-and-more",
        "MY_SECRET": "short",  # too short to search for
        "HOME": "/home/me",
        "AWS_SESSION_TOKEN": "",
    }
    assert secret_values(environ) == ["sk-1234567890-and-more", "sk-1234567890", "ghp_abcdefgh"]


def test_scrub_hides_the_environment_and_every_secret(tmp_path: Path) -> None:
    run = tmp_path / "20261122T231000Z-site"
    (run / "job_events").mkdir(parents=True)
    secret = 'sk-"quoted"\\key'
    keep = {"ANSIBLE_CONFIG": "/c/ansible.cfg", "PATH": "/venv/bin:/usr/bin"}
    env = {**keep, "HOME": "/home/me", "LLMFLEET_API_KEY": secret}
    (run / "command").write_text(json.dumps({"command": ["ansible-playbook"], "env": env}))
    (run / "job_events" / "1-x.json").write_text(json.dumps({"stdout": f"key={secret}"}))
    (run / "stdout").write_text(f"plain {secret} text\n")
    (run / "stdout").chmod(0o644)
    scrub(run, keep_env=keep, secrets=[secret])
    command = json.loads((run / "command").read_text())
    assert command["env"] == {**keep, "HOME": HIDDEN, "LLMFLEET_API_KEY": HIDDEN}
    assert json.loads((run / "job_events" / "1-x.json").read_text()) == {"stdout": f"key={HIDDEN}"}
    assert (run / "stdout").read_text() == f"plain {HIDDEN} text\n"
    for path in [run, *run.rglob("*")]:
        assert stat.S_IMODE(path.stat().st_mode) == (0o700 if path.is_dir() else 0o600), path


def test_scrub_of_a_run_that_never_started_is_nothing(tmp_path: Path) -> None:
    scrub(tmp_path / "missing", keep_env={}, secrets=["whatever-secret"])
    assert not (tmp_path / "missing").exists()
