"""Filters for the containers the roles run: mounts."""

from __future__ import annotations


def container_volumes(specs):
    """Mount specs for a container: a plain host path is mounted at the same place,
    read-only; a spec with ``:`` (``src:dest[:mode]``) is kept as written."""
    return [spec if ":" in spec else f"{spec}:{spec}:ro" for spec in specs]


class FilterModule:
    """Container filters."""

    def filters(self):
        return {"container_volumes": container_volumes}
