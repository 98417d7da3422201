"""Filters for the containers the roles run: environment files and mounts."""

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError

_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


def env_file_vars(text):
    """The ``KEY=value`` lines of an environment file (systemd EnvironmentFile, docker
    --env-file) as a mapping; comments and blank lines are skipped."""
    variables = {}
    for number, raw in enumerate(str(text or "").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _ASSIGNMENT.match(line)
        if match is None:
            raise AnsibleFilterError(f"environment file line {number} is not KEY=value: {line!r}")
        variables[match[1]] = match[2]
    return variables


def container_volumes(specs):
    """Mount specs for a container: a plain host path is mounted at the same place,
    read-only; a spec with ``:`` (``src:dest[:mode]``) is kept as written."""
    return [spec if ":" in spec else f"{spec}:{spec}:ro" for spec in specs]


class FilterModule:
    """Container filters."""

    def filters(self):
        return {"env_file_vars": env_file_vars, "container_volumes": container_volumes}
