# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""A model folder checked against a manifest of its files (path, size, sha256 and/or the git
blob sha1 the Hugging Face hub gives for files outside LFS), cheaply on re-runs: a state file
remembers the size, mtime and hashes of what was verified, and a file whose size and mtime have
not moved since is not read again.

Standard library only: it runs on the managed hosts.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.llmfleet.cluster.plugins.module_utils._model.manifest_keep import (
    keep_and_take_back,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._model.manifest_state import (
    read_state,
    state_diff,
    state_document,
    write_state,
)

MODES = ("inspect", "quick", "full")
CHUNK_BYTES = 8 * 1024 * 1024
# Not part of a model: the hub client's download bookkeeping, a clone's git data.
SKIPPED_FOLDERS = frozenset((".cache", ".git"))
REFERENCE_KEYS = ("path", "size", "sha256", "git_sha1")
HEX_LENGTHS = {"sha256": 64, "git_sha1": 40}
_HEX = re.compile(r"^[0-9a-f]+$")


class ManifestError(Exception):
    """Bad input (a reference entry, the model path); the message says which and why."""


def _hashing_workers():
    # hashlib releases the GIL while it hashes a chunk: a few threads use a few cores.
    return min(4, os.cpu_count() or 1)


def validate_reference(files):
    """The reference entries checked and normalized: sorted by path, each
    ``{path, size[, sha256][, git_sha1]}`` with lower-case hex. Raises ManifestError
    naming the first bad entry."""
    entries = {}
    for index, raw in enumerate(files):
        label = f"files[{index}]"
        if not isinstance(raw, dict):
            raise ManifestError(f"{label} is {raw!r}; expected a dict with path and size")
        label = f"files[{index}] (path {raw.get('path')!r})"
        unknown = sorted(set(raw) - set(REFERENCE_KEYS))
        if unknown:
            raise ManifestError(
                f"{label}: unknown key(s) {', '.join(unknown)}; "
                f"allowed: {', '.join(REFERENCE_KEYS)}"
            )
        path = raw.get("path")
        if not isinstance(path, str) or not path.strip() or "\0" in path:
            raise ManifestError(f"{label}: path must be a non-empty relative path")
        if path.startswith("/") or ".." in path.split("/"):
            raise ManifestError(
                f"{label}: path must be relative to the model folder, without '..' "
                "and without a leading '/'"
            )
        path = posixpath.normpath(path)
        if path == ".":
            raise ManifestError(f"{label}: path names the model folder itself, not a file in it")
        if path in entries:
            raise ManifestError(f"{label}: {path} is listed twice")
        size = raw.get("size")
        if isinstance(size, str) and size.strip().isdigit():
            size = int(size)
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ManifestError(f"{label}: size must be a whole number of bytes, got {size!r}")
        entry = {"path": path, "size": size}
        for key, length in HEX_LENGTHS.items():
            value = raw.get(key)
            if value is None or value == "":
                continue
            value = str(value).strip().lower()
            if len(value) != length or not _HEX.match(value):
                raise ManifestError(
                    f"{label}: {key} must be {length} hex digits, got {raw.get(key)!r}"
                )
            entry[key] = value
        entries[path] = entry
    return [entries[path] for path in sorted(entries)]


def hash_file(path, git_sha1=False):
    """``(sha256, git blob sha1 or None, os.stat_result)`` of the file, read once in
    8 MiB chunks; the stat is the open file's, taken before reading."""
    with open(path, "rb") as handle:
        stat = os.fstat(handle.fileno())
        sha256 = hashlib.sha256()
        sha1 = None
        if git_sha1:
            sha1 = hashlib.sha1(f"blob {stat.st_size}\0".encode(), usedforsecurity=False)
        while True:
            chunk = handle.read(CHUNK_BYTES)
            if not chunk:
                break
            sha256.update(chunk)
            if sha1 is not None:
                sha1.update(chunk)
    return sha256.hexdigest(), sha1.hexdigest() if sha1 else None, stat


def _hash_job(job):
    full, want_sha1 = job
    try:
        sha256, sha1, before = hash_file(full, want_sha1)
        after = os.stat(full)
    except OSError as error:
        return {"error": f"unreadable: {error.strerror or error}"}
    if (before.st_size, before.st_mtime_ns) != (after.st_size, after.st_mtime_ns):
        return {"error": "changed while it was being hashed"}
    record = {"size": before.st_size, "mtime_ns": before.st_mtime_ns, "sha256": sha256}
    if sha1:
        record["git_sha1"] = sha1
    return record


def hash_files(jobs):
    """``{rel: record or {"error": reason}}`` for ``{rel: (full path, want git sha1)}``."""
    names = sorted(jobs)
    if not names:
        return {}
    with ThreadPoolExecutor(max_workers=min(_hashing_workers(), len(names))) as pool:
        return dict(zip(names, pool.map(_hash_job, [jobs[n] for n in names]), strict=True))


def walk_files(root, skip=()):
    """``{relative posix path: os.stat_result}`` of every regular file under ``root``
    (symlinks to files followed; folders named in SKIPPED_FOLDERS and the real paths in
    ``skip`` left out; dangling links ignored)."""
    found = {}
    skip = {os.path.realpath(p) for p in skip}
    for folder, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_FOLDERS)
        for name in filenames:
            full = os.path.join(folder, name)
            if os.path.realpath(full) in skip:
                continue
            try:
                stat = os.stat(full)
            except OSError:
                continue
            if os.path.isfile(full):
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                found[rel] = stat
    return found


def free_bytes(path):
    """Bytes available to unprivileged users on the filesystem that holds (or would hold)
    ``path``: statvfs of ``path`` or of its nearest existing ancestor."""
    probe = os.path.abspath(path)
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    vfs = os.statvfs(probe)
    return vfs.f_bavail * vfs.f_frsize


def _short(value):
    return f"{value[:12]}..." if isinstance(value, str) and len(value) > 12 else value


def _bad(path, reason, expected=None, actual=None):
    return {"path": path, "reason": reason, "expected": expected, "actual": actual}


def _state_matches(entry, record, stat):
    """Whether the state file's record vouches for the file without reading it."""
    if not record or record.get("size") != stat.st_size:
        return False
    if record.get("mtime_ns") != stat.st_mtime_ns or not record.get("sha256"):
        return False
    if "sha256" in entry:
        return record["sha256"] == entry["sha256"]
    if "git_sha1" in entry:
        return record.get("git_sha1") == entry["git_sha1"]
    return True


def _compare(entry, record):
    """A bad-file dict when the hashed ``record`` contradicts the reference ``entry``."""
    path = entry["path"]
    for key in ("sha256", "git_sha1"):
        if key in entry:
            actual = record.get(key)
            if actual != entry[key]:
                return _bad(
                    path,
                    f"{key} {_short(actual)} expected {_short(entry[key])}",
                    entry[key],
                    actual,
                )
            return None
    return None


def _check_reference(root, reference, mode, known, result):
    """Sort the reference files into ok, missing and bad; returns the new state records."""
    records, jobs = {}, {}
    for entry in reference:
        rel = entry["path"]
        full = os.path.join(root, *rel.split("/"))
        try:
            stat = os.stat(full)
        except OSError:
            result["missing"].append(rel)
            continue
        if not os.path.isfile(full):
            result["bad"].append(_bad(rel, "not a regular file"))
            continue
        if stat.st_size != entry["size"]:
            reason = f"size {stat.st_size}, expected {entry['size']}"
            result["bad"].append(_bad(rel, reason, entry["size"], stat.st_size))
            continue
        if mode == "inspect" or (mode == "quick" and _state_matches(entry, known.get(rel), stat)):
            if mode == "quick":
                records[rel] = known[rel]
            result["ok"].append(rel)
            continue
        jobs[rel] = (full, "git_sha1" in entry and "sha256" not in entry)
    by_path = {e["path"]: e for e in reference}
    for rel, record in hash_files(jobs).items():
        result["hashed"].append(rel)
        if "error" in record:
            result["bad"].append(_bad(rel, record["error"]))
            continue
        if record["size"] != by_path[rel]["size"]:
            size = record["size"]
            reason = f"size {size}, expected {by_path[rel]['size']}"
            result["bad"].append(_bad(rel, reason, by_path[rel]["size"], size))
            continue
        problem = _compare(by_path[rel], record)
        if problem:
            result["bad"].append(problem)
            continue
        records[rel] = record
        result["ok"].append(rel)
    return records


def _build_from_content(root, found, mode, known, result):
    """The source host: every file becomes a reference entry; returns the new records."""
    records, jobs = {}, {}
    for rel, stat in found.items():
        record = known.get(rel)
        if mode == "quick" and _state_matches({}, record, stat):
            records[rel] = record
        elif mode != "inspect":
            jobs[rel] = (os.path.join(root, *rel.split("/")), False)
    for rel, record in hash_files(jobs).items():
        result["hashed"].append(rel)
        if "error" in record:
            result["bad"].append(_bad(rel, record["error"]))
        else:
            records[rel] = record
    bad = {b["path"] for b in result["bad"]}
    result["ok"] = sorted(rel for rel in found if rel not in bad)
    return [
        {"path": rel, "size": found[rel].st_size, **_hashes(records.get(rel))}
        for rel in sorted(found)
        if rel not in bad
    ], records


def _hashes(record):
    return {k: record[k] for k in ("sha256", "git_sha1") if record and k in record}


def _remove_bad(root, bad, check_mode):
    removed = []
    for item in bad:
        full = os.path.join(root, *item["path"].split("/"))
        if not (os.path.islink(full) or os.path.isfile(full)):
            continue
        if not check_mode:
            try:
                os.unlink(full)
            except FileNotFoundError:
                continue
        removed.append(item["path"])
    return removed


def _file_above(root):
    """The first folder of ``root``'s path that exists and is no folder, else None."""
    parent = os.path.dirname(root)
    while parent != os.path.dirname(parent):
        if os.path.exists(parent):
            return None if os.path.isdir(parent) else parent
        parent = os.path.dirname(parent)
    return None


def _check_arguments(path, files, mode, state_file):
    """``(normalized reference or None, absolute path, whether it is a folder)``."""
    if mode not in MODES:
        raise ManifestError(f"mode is {mode!r}; expected one of {', '.join(MODES)}")
    if mode != "inspect" and not state_file:
        raise ManifestError(
            f"mode {mode} needs state_file, where this host records what it verified"
        )
    reference = validate_reference(files) if files is not None else None
    root = os.path.abspath(path)
    exists = os.path.isdir(root)
    if os.path.exists(root) and not exists:
        raise ManifestError(f"{path} is a file, not a folder")
    through = _file_above(root)
    if through:
        raise ManifestError(f"{path} goes through a file ({through})")
    if reference is None and not exists and mode != "inspect":
        raise ManifestError(
            f"{path} does not exist; without files the module builds the manifest from the "
            "files under path, so there must be some"
        )
    return reference, root, exists


def _save_state(state_path, document):
    try:
        write_state(state_path, document)
    except OSError as error:
        raise ManifestError(
            f"cannot write the state file {state_path}: "
            f"{error.strerror or error} ({error.filename or state_path})"
        ) from error


def _take_back_and_check(root, reference, keep_in, result, records):
    """Remove the bad files into ``keep_in`` and take back from it what is missing; the
    files taken back are hashed and checked like the others."""
    by_path = {e["path"]: e for e in reference}
    bad = [b["path"] for b in result["bad"]]
    wanted = [by_path[rel] for rel in sorted(set(result["missing"]) | set(bad))]
    if not bad and not (wanted and os.path.isdir(keep_in)):
        return
    os.makedirs(keep_in, mode=0o700, exist_ok=True)
    result["removed"], taken = keep_and_take_back(root, keep_in, bad, wanted, hash_file)
    if not taken:
        return
    again = {"ok": [], "missing": [], "bad": [], "hashed": []}
    records.update(_check_reference(root, [by_path[rel] for rel in taken], "full", {}, again))
    result["taken_back"] = taken
    result["missing"] = [rel for rel in result["missing"] if rel not in taken]
    result["bad"] = [b for b in result["bad"] if b["path"] not in taken] + again["bad"]
    result["ok"] += again["ok"]
    result["hashed"] += again["hashed"]


def check_model(
    path,
    files=None,
    *,
    mode="quick",
    state_file=None,
    source=None,
    remove_bad=False,
    keep_in=None,
    check_mode=False,
):
    """Everything the module returns, ``changed`` and ``diff`` included; raises
    ManifestError for bad input. Writes the state file and removes bad files
    (``remove_bad``; into ``keep_in``, from which missing ones are taken back) unless
    ``check_mode`` or ``mode`` is inspect."""
    reference, root, exists = _check_arguments(path, files, mode, state_file)
    result = {"ok": [], "missing": [], "bad": [], "removed": [], "hashed": [], "taken_back": []}
    state_path = os.path.abspath(state_file) if state_file else None
    old_state = read_state(state_path, root) if state_path and mode != "inspect" else None
    known = old_state["files"] if old_state else {}
    found = walk_files(root, [state_path] if state_path else []) if exists else {}
    # Bad files go into keep_in (and missing ones come back from it) instead of being deleted.
    keeping = bool(remove_bad and keep_in and reference is not None) and mode != "inspect"
    if reference is None:
        manifest, records = _build_from_content(root, found, mode, known, result)
        extra = []
    else:
        records = _check_reference(root, reference, mode, known, result)
        if keeping and not check_mode:
            _take_back_and_check(root, reference, os.path.abspath(keep_in), result, records)
        # The reference's own hashes win; this host only adds those it computed.
        manifest = [{**_hashes(records.get(e["path"])), **e} for e in reference]
        names = {e["path"] for e in reference}
        extra = sorted(rel for rel in found if rel not in names)
    result["bad"].sort(key=lambda item: item["path"])
    for key in ("ok", "missing", "hashed", "taken_back"):
        result[key].sort()
    if reference is None:
        sizes = {rel: st.st_size for rel, st in found.items()}
    else:
        sizes = {e["path"]: e["size"] for e in reference}
    needed = set(result["missing"]) | {b["path"] for b in result["bad"]}
    changed = False
    diff = []
    if mode != "inspect":
        # Without a reference, a bad file is one this host could not read: not for deleting.
        if remove_bad and reference is not None and not (keeping and not check_mode):
            result["removed"] = _remove_bad(root, result["bad"], check_mode)
        before = old_state["document"] if old_state else None
        after = state_document(root, records, source)
        changed = after != before or bool(result["removed"]) or bool(result["taken_back"])
        if after != before and not check_mode:
            _save_state(state_path, after)
        diff = state_diff(state_path, before, after, result["removed"])
    result.update(
        path=root,
        mode=mode,
        files=manifest,
        extra=extra,
        bytes_total=sum(e["size"] for e in manifest),
        bytes_needed=sum(sizes.get(rel, 0) for rel in needed),
        free_bytes=free_bytes(root),
        verified=not result["missing"] and not result["bad"],
        # Where the files this host verified before came from (a new revision shows here).
        previous_source=old_state["document"].get("source") if old_state else None,
        changed=changed,
        diff=diff,
    )
    return result


def describe_problems(result):
    """One line naming every missing or bad file and why, for fail_json."""
    problems = [f"{item['path']}: {item['reason']}" for item in result["bad"]]
    problems += [f"{rel}: missing" for rel in result["missing"]]
    problems.sort()
    total = len(result["ok"]) + len(result["missing"]) + len(result["bad"])
    return (
        f"{len(problems)} of {total} model file(s) in {result['path']} failed verification "
        f"({result['mode']}): " + "; ".join(problems)
    )
