# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""The state file of llmfleet.cluster.model_manifest: what one host verified in a model
folder (size, mtime and hashes of each file), read leniently and written atomically.

Standard library only: it runs on the managed hosts.
"""

from __future__ import annotations

import json
import os
import tempfile

STATE_VERSION = 1
STATE_MODE = 0o644
FOLDER_MODE = 0o755
RECORD_KEYS = {"size": int, "mtime_ns": int, "sha256": str, "git_sha1": str}


def _clean_record(record):
    """The record with only known keys of the right type, or None when it cannot vouch for
    a file (no size, mtime or sha256)."""
    if not isinstance(record, dict):
        return None
    clean = {}
    for key, kind in RECORD_KEYS.items():
        value = record.get(key)
        if isinstance(value, kind) and not isinstance(value, bool):
            clean[key] = value
    if not {"size", "mtime_ns", "sha256"} <= set(clean):
        return None
    return clean


def read_state(state_file, root):
    """``{"document": the parsed file, "files": {rel: record}}``, or None when the file is
    absent or not a state file of this version. Records are only trusted (``files``) when
    the state was written for the same model folder ``root``."""
    try:
        with open(state_file, encoding="utf-8") as handle:
            document = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict) or document.get("version") != STATE_VERSION:
        return None
    files = {}
    if document.get("path") == root and isinstance(document.get("files"), dict):
        for rel, record in document["files"].items():
            clean = _clean_record(record)
            if clean is not None:
                files[rel] = clean
    return {"document": document, "files": files}


def state_document(root, records, source=None):
    """What the state file holds after this run: the verified files only."""
    return {
        "version": STATE_VERSION,
        "path": root,
        "source": source or {},
        "files": {rel: dict(records[rel]) for rel in sorted(records)},
    }


def _make_parents(folder):
    """Create ``folder`` and its missing parents with mode 0755 whatever the umask."""
    missing = []
    while folder and not os.path.isdir(folder):
        missing.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    for created in reversed(missing):
        os.mkdir(created)
        os.chmod(created, FOLDER_MODE)


def write_state(state_file, document):
    """Write the document atomically: a temporary file in the same folder, fsynced, mode
    0644, then renamed over the state file."""
    folder = os.path.dirname(os.path.abspath(state_file))
    _make_parents(folder)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(state_file)}.", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(document, handle, indent=1, sort_keys=True)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, STATE_MODE)
        os.replace(tmp, state_file)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _listing(document):
    """``sha256sum``-style lines of a state document, for the diff."""
    if not document or not isinstance(document.get("files"), dict):
        return ""
    lines = []
    for rel, record in sorted(document["files"].items()):
        digest = record.get("sha256", "?") if isinstance(record, dict) else "?"
        lines.append(f"{digest}  {rel}\n")
    return "".join(lines)


def state_diff(state_file, before, after, removed=()):
    """Ansible's diff: the state file's verified files before and after, and the files
    removed from the model folder."""
    diff = [
        {
            "before_header": state_file,
            "after_header": state_file,
            "before": _listing(before),
            "after": _listing(after),
        }
    ]
    if removed:
        diff.append(
            {
                "before_header": "removed files",
                "after_header": "removed files",
                "before": "".join(f"{rel}\n" for rel in removed),
                "after": "",
            }
        )
    return diff
