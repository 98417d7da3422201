# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""A background transfer's progress: the state of the Ansible async job that runs it, and the
bytes its destination holds, sampled over a short wait.

The job is Ansible's own (a task with ``async`` and ``poll: 0``): its status file in the
async folder is empty or says ``started`` while it runs and holds the module's result once it
is done, as ``async_status`` reads it. The bytes are those of every file under the
destination, partial ones included (rsync's ``.name.XXXXXX`` beside the file it replaces,
huggingface_hub's ``.cache/huggingface/download/*.incomplete``), so that a transfer of one
large file shows its bytes as they arrive.
"""

from __future__ import annotations

import contextlib
import json
import os
import time

UNITS = ("B", "KB", "MB", "GB", "TB")
# How much of a failed job's stderr its message keeps.
STDERR_LINES = 20


def job_state(async_dir, jid):
    """(finished, result) of async job ``jid``: the module's result once the job is done,
    ``{}`` while it runs. Raises LookupError when the job has no status file, ValueError
    when the file holds something else than a JSON object."""
    path = os.path.join(os.path.expanduser(async_dir), jid)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise LookupError(f"no async job {jid} (no {path})") from None
    if not text.strip():
        # async_wrapper writes the file, then the result over it: empty means running.
        return False, {}
    try:
        data = json.loads(text)
    except ValueError:
        # Read while it was being rewritten: running still (async_status says the same of
        # a file it cannot parse yet).
        return False, {}
    if not isinstance(data, dict):
        raise ValueError(f"async job {jid}'s status file {path} holds {text[:200]!r}")
    if data.get("started") and not data.get("finished"):
        return False, {}
    data.pop("started", None)
    data.pop("finished", None)
    data.pop("ansible_job_id", None)
    return True, data


def remove_job(async_dir, jid):
    """Remove a finished job's status file (as ``async_status`` with ``mode: cleanup``)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(os.path.expanduser(async_dir), jid))


def bytes_under(path):
    """The bytes of the regular files under ``path`` (or of ``path`` itself), links not
    followed; 0 when it does not exist yet. Files that vanish while counted (a partial file
    renamed into place) are skipped."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return 0
    if not os.path.isdir(path):
        return st.st_size if os.path.isfile(path) else 0
    total = 0
    stack = [path]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
            except FileNotFoundError:
                continue
    return total


def human_bytes(n):
    """Bytes in decimal units with 1 decimal (as rsync, curl and huggingface_hub show
    them): ``5242880`` -> ``5.2 MB``."""
    value = float(n)
    for unit in UNITS:
        if abs(value) < 1000 or unit == UNITS[-1]:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")  # pragma: no cover


def _percent(held, total):
    """``held`` as a share of ``total``, stopping at 100 (the destination may hold files the
    transfer does not)."""
    return 100.0 if total <= 0 else min(100.0, 100.0 * held / total)


def progress_line(held, total, rate, what=""):
    """``model.safetensors: 2.1 GB of 5.2 GB (40%), 104.9 MB/s``."""
    percent = _percent(held, total)
    line = f"{human_bytes(held)} of {human_bytes(total)} ({percent:.0f}%), {human_bytes(rate)}/s"
    return f"{what}: {line}" if what else line


def wait_and_measure(
    async_dir, jid, path, wait, *, total=0, clock=time.monotonic, sleep=time.sleep, poll=1.0
):
    """Wait up to ``wait`` seconds for the job to finish, then measure ``path``.

    Without a ``jid`` (a job that runs elsewhere), the wait ends early once the bytes under
    ``path`` grew to ``total``. Returns (finished, job result, bytes held, bytes per second
    over the wait); ``finished`` is False without a ``jid``."""
    start = clock()
    first = held = bytes_under(path)
    finished, job = job_state(async_dir, jid) if jid else (False, {})
    while not finished and clock() - start < wait:
        sleep(min(poll, max(0.0, wait - (clock() - start))))
        if jid:
            finished, job = job_state(async_dir, jid)
            continue
        held = bytes_under(path)
        if held >= total > first:
            break
    if jid:
        held = bytes_under(path)
    elapsed = clock() - start
    rate = (held - first) / elapsed if elapsed > 0 else 0.0
    return finished, job, held, max(0.0, rate)


def measurement(held, total, rate, label):
    """The return values of one measurement (transfer_progress's, but the job's)."""
    return {
        "bytes": held,
        "total_bytes": total,
        "percent": round(_percent(held, total), 1),
        "rate_bytes_per_s": round(rate, 1),
        "progress": progress_line(held, total, rate, label),
    }


def job_failure(job):
    """The message of a finished job that failed (its msg and the end of its stderr), or
    None."""
    rc = job.get("rc")
    if not job.get("failed") and rc in (None, 0):
        return None
    msg = job.get("msg") or (f"exited with {rc}" if rc not in (None, 0) else "failed")
    stderr = "\n".join(str(job.get("stderr") or "").strip().splitlines()[-STDERR_LINES:])
    return f"{msg}: {stderr}" if stderr else str(msg)


def finish(result, job, label, *, with_diff):
    """``result`` (a measurement) completed with the finished job's: the job's result
    without its diff, its ``changed`` and, ``with_diff``, its diff. Returns (result, the
    failure's message or None)."""
    job = dict(job)
    diff = job.pop("diff", None)
    result = {**result, "finished": True, "job": job, "changed": bool(job.get("changed"))}
    if diff and with_diff:
        result["diff"] = diff
    failure = job_failure(job)
    return result, (f"{label or 'the transfer'} failed: {failure}" if failure else None)
