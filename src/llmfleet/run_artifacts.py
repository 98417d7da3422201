"""ansible-runner's record of a run, kept in a folder of its own under the artifacts folder,
owner-only and without secrets.

ansible-runner writes, under ``<artifacts>/<run>/``: ``command`` (the command line, its
working directory and the *whole* process environment), ``stdout``, ``stderr``, ``rc``,
``status``, ``job_events/*.json`` (every event with its task result; ansible has already
censored what ``no_log`` hides, and a module's ``no_log`` parameters in ``-vvv`` output) and
``fact_cache/`` (each host's facts, ``ansible_env`` of the controller included when a play
on localhost gathers facts). llmfleet passes ansible-runner no passwords and writes extra
vars to files of its own, removed after the run: the command line only names them.

What can still carry a secret is the environment the CLI runs in (``LLMFLEET_API_KEY``,
cloud tokens...). After the run, ``scrub`` hides in ``command`` every environment value
llmfleet did not set itself, removes the values of environment variables whose names say
they are secret (``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSW*``...) from every file of
the run, and makes the run's folders 0700 and its files 0600.
"""

from __future__ import annotations

import datetime
import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

HIDDEN = "<hidden by llmfleet>"
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)
# Shorter values are not searched for: they would match innocent text everywhere.
MIN_SECRET_CHARS = 6
STAMP_FORMAT = "%Y%m%dT%H%M%SZ"


def run_ident(artifacts: Path, playbook: Path, now: datetime.datetime | None = None) -> str:
    """The name of a run's folder: ``<UTC time>-<playbook>``, e.g. ``20261122T231000Z-site``,
    with ``-2``, ``-3``... when a run of the same second already has it."""
    moment = now or datetime.datetime.now(datetime.UTC)
    base = f"{moment.strftime(STAMP_FORMAT)}-{playbook.stem}"
    ident, number = base, 1
    while (artifacts / ident).exists():
        number += 1
        ident = f"{base}-{number}"
    return ident


def make_private_folder(path: Path) -> Path:
    """Create ``path`` (and its parents) and make it owner-only (0700); return it absolute."""
    path = path.expanduser().resolve()
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def secret_values(environ: Mapping[str, str]) -> list[str]:
    """Values of the environment variables whose names say they hold a secret, longest
    first (a secret that contains another is hidden whole)."""
    values = {
        value
        for name, value in environ.items()
        if SECRET_NAME.search(name) and len(value.strip()) >= MIN_SECRET_CHARS
    }
    return sorted(values, key=len, reverse=True)


def _hide(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        # as written, and as JSON writes it inside a string (quotes, backslashes escaped)
        for form in {secret, json.dumps(secret)[1:-1]}:
            text = text.replace(form, HIDDEN)
    return text


def _scrub_command(path: Path, keep_env: Mapping[str, str]) -> None:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    env = record.get("env")
    if isinstance(env, dict):
        record["env"] = {
            name: value if keep_env.get(name) == value else HIDDEN for name, value in env.items()
        }
        path.write_text(json.dumps(record, ensure_ascii=False), encoding="utf-8")


def scrub(folder: Path, *, keep_env: Mapping[str, str], secrets: Iterable[str]) -> None:
    """Keep no secret in a run's folder (see the module's docstring); 0700 folders, 0600 files.

    ``keep_env`` is the environment llmfleet set for the run (its values stay readable in
    ``command``); ``secrets`` are values to remove from every file."""
    if not folder.is_dir():
        return
    hidden = list(secrets)
    folder.chmod(0o700)
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            continue
        if path.is_dir():
            path.chmod(0o700)
            continue
        path.chmod(0o600)
        if path.name == "command" and path.parent == folder:
            _scrub_command(path, keep_env)
        if hidden:
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            scrubbed = _hide(text, hidden)
            if scrubbed != text:
                path.write_text(scrubbed, encoding="utf-8")
    os.chmod(folder, 0o700)
