# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""The files a model folder gave up at its last change, kept beside it by content, so that
going back to the revision it served before puts them back instead of fetching them again.

The keep folder (``keep_in``, on the model's file system: files move by rename) holds one
generation: the files removed by the last run that removed any, each under
``sha256-<hex>`` and, hard linked, ``git_sha1-<hex>`` (the hub names small files by their
git blob sha1, weights by their sha256). A run first takes back what the reference needs
from the generation kept before, then keeps what it removes as the new generation and drops
the rest of the old one: the folder never holds more than one change's worth of files.

Standard library only: it runs on the managed hosts.
"""

from __future__ import annotations

import contextlib
import os
import shutil

NEXT = ".next"


def _names(sha256, git_sha1):
    names = [f"sha256-{sha256}"] if sha256 else []
    return names + ([f"git_sha1-{git_sha1}"] if git_sha1 else [])


def _keep(full, folder, hash_file):
    """Move ``full`` into ``folder`` under its content's names; False if it could not be."""
    try:
        sha256, git_sha1, _stat = hash_file(full, git_sha1=True)
        first, *others = _names(sha256, git_sha1)
        target = os.path.join(folder, first)
        os.replace(full, target)
        for name in others:
            link = os.path.join(folder, name)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(link)
            os.link(target, link)
    except OSError:
        return False
    return True


def _take_back(root, keep_in, entry):
    """Put the kept file whose content ``entry`` names at its path; True if one was there."""
    names = _names(entry.get("sha256"), entry.get("git_sha1"))
    for folder in (keep_in, os.path.join(keep_in, NEXT)):
        for name in names:
            kept = os.path.join(folder, name)
            if not os.path.isfile(kept):
                continue
            target = os.path.join(root, *entry["path"].split("/"))
            try:
                inode = os.stat(kept)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                os.replace(kept, target)
            except OSError:
                return False
            _forget(keep_in, inode)
            return True
    return False


def _forget(keep_in, inode):
    """Unlink the other names of a file taken back (its other hash's), so that nothing in
    the keep folder shares the model's file."""
    for folder in (keep_in, os.path.join(keep_in, NEXT)):
        with contextlib.suppress(FileNotFoundError), os.scandir(folder) as entries:
            for entry in entries:
                if not entry.is_file(follow_symlinks=False):
                    continue
                st = entry.stat(follow_symlinks=False)
                if (st.st_ino, st.st_dev) == (inode.st_ino, inode.st_dev):
                    os.unlink(entry.path)


def _drop_generation(keep_in):
    """Remove the files directly in ``keep_in`` (the generation kept before)."""
    for entry in os.scandir(keep_in):
        if entry.name != NEXT and (entry.is_file(follow_symlinks=False) or entry.is_symlink()):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)


def keep_and_take_back(root, keep_in, removable, wanted, hash_file):
    """Keep the files at the paths ``removable`` (removing them from ``root``), take back
    into ``root`` the reference entries ``wanted`` that a kept file matches, and make the
    files kept now the only generation. Returns (removed paths, taken-back paths)."""
    next_folder = os.path.join(keep_in, NEXT)
    shutil.rmtree(next_folder, ignore_errors=True)
    os.makedirs(next_folder, mode=0o700, exist_ok=True)
    removed = []
    for rel in removable:
        full = os.path.join(root, *rel.split("/"))
        if not (os.path.islink(full) or os.path.isfile(full)):
            continue
        if os.path.islink(full) or not _keep(full, next_folder, hash_file):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(full)
        removed.append(rel)
    taken = [entry["path"] for entry in wanted if _take_back(root, keep_in, entry)]
    if removed:
        _drop_generation(keep_in)
        for entry in os.scandir(next_folder):
            os.replace(entry.path, os.path.join(keep_in, entry.name))
    shutil.rmtree(next_folder, ignore_errors=True)
    return removed, sorted(taken)
