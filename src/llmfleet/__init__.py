"""llmfleet: the CLI over the llmfleet.cluster Ansible collection and its lab."""

from __future__ import annotations

__version__ = "0.1.0"
