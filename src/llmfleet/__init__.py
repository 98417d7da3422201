"""llmfleet: the CLI over the llmfleet.cluster Ansible collection and its lab."""

from __future__ import annotations

from importlib import metadata

try:
    # One version: the installed package's (pyproject.toml's [project] version).
    __version__ = metadata.version("llmfleet")
except metadata.PackageNotFoundError:  # imported from a checkout that was never installed
    __version__ = "0+unknown"
