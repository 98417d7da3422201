# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""The records our modules keep on a node (container_image_record, deployment_history):
written whole or not at all.

Standard library only: it runs on the managed hosts.
"""

from __future__ import annotations

import os
import tempfile

FOLDER_MODE = 0o755


def write_atomically(module, path, text, folder_mode=FOLDER_MODE):
    """Write ``text`` to ``path`` through a temporary file in the same folder and the
    module's atomic move, creating the missing parent folders with ``folder_mode``."""
    folder = os.path.dirname(path) or "."
    missing = []
    while not os.path.isdir(folder):
        missing.append(folder)
        folder = os.path.dirname(folder)
    for created in reversed(missing):
        os.mkdir(created, folder_mode)
        os.chmod(created, folder_mode)
    fd, tmp = tempfile.mkstemp(
        prefix=f".{os.path.basename(path)}.", dir=os.path.dirname(path) or "."
    )
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    module.atomic_move(tmp, path)


def file_diff(path, before, after):
    """A module result's ``diff`` of a record file's text (``before`` None: no file)."""
    return {
        "before_header": path,
        "after_header": path,
        "before": before or "",
        "after": after,
    }
