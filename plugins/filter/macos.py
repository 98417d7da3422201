"""Parsers of what macOS prints about the Mac Studio's vllm-mlx (``launchctl list``,
``sysctl vm.swapusage``): read by ``llmfleet status`` and ``llmfleet doctor`` through the
mlx_server role's status entry point."""

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError

# "12345	0	com.llmfleet.vllm-mlx": the PID ("-" when not running), the last exit status (a
# negative number is the signal that ended it), the label.
LAUNCHCTL_LIST_LINE = re.compile(r"^(?P<pid>-|\d+)\s+(?P<status>-?\d+|-)\s+(?P<label>\S+)\s*$")
# "total = 2048.00M  used = 1034.25M  free = 1013.75M  (encrypted)"
SWAPUSAGE = re.compile(
    r"total = (?P<total>[\d.]+)(?P<total_unit>[KMGT])\s+"
    r"used = (?P<used>[\d.]+)(?P<used_unit>[KMGT])"
)
UNITS = {"K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def launchd_job(stdout, label):
    """``launchctl list`` (the three columns) -> whether the job ``label`` is loaded, its PID
    when it runs and the status it last exited with."""
    for line in str(stdout).splitlines():
        match = LAUNCHCTL_LIST_LINE.match(line.strip())
        if match and match["label"] == label:
            pid = None if match["pid"] == "-" else int(match["pid"])
            status = None if match["status"] == "-" else int(match["status"])
            return {
                "label": label,
                "loaded": True,
                "running": pid is not None,
                "pid": pid,
                "last_exit_status": status,
            }
    return {
        "label": label,
        "loaded": False,
        "running": False,
        "pid": None,
        "last_exit_status": None,
    }


def macos_swap(stdout):
    """``sysctl vm.swapusage`` (with or without ``-n``) -> total and used swap in bytes."""
    match = SWAPUSAGE.search(str(stdout))
    if not match:
        raise AnsibleFilterError(f"no swap usage in {str(stdout).strip()!r}")
    return {
        "total_bytes": int(float(match["total"]) * UNITS[match["total_unit"]]),
        "used_bytes": int(float(match["used"]) * UNITS[match["used_unit"]]),
    }


PYTHON_VERSION = re.compile(r"^\s*\(?\s*(?P<major>\d+)\s*[,.]\s*(?P<minor>\d+)\s*\)?\s*$")


def python_version_problems(result, minimum, host, variable, value):
    """What ``<python> -c 'import sys; print(sys.version_info[:2])'`` (``result``: the
    command's registered result) says against ``minimum`` (``"3.10"``): [] when the
    interpreter runs and is recent enough, else one sentence with the host, the variable, its
    value, what was found and what is expected, and how to get such a Python on a Mac."""
    wanted = tuple(int(part) for part in str(minimum).split("."))
    how = (
        f"set {variable} to a Python {minimum} or newer, e.g. Homebrew's (`brew install"
        " python@3.12`, then /opt/homebrew/bin/python3.12) or uv's (`uv python install 3.12`,"
        " then the path `uv python find 3.12` prints); the Xcode command line tools' python3"
        " is 3.9"
    )
    result = result if isinstance(result, dict) else {}
    lines = str(result.get("stdout", "")).strip().splitlines()
    match = PYTHON_VERSION.match(lines[-1]) if lines else None
    if result.get("rc") != 0 or not match:
        said = " ".join(str(result.get("stderr") or result.get("msg") or "no output").split())[:200]
        return [
            f"{host}: {variable} is {value!r}, which did not run there ({said}); expected a"
            f" Python {minimum} or newer for vllm-mlx: {how}"
        ]
    found = (int(match["major"]), int(match["minor"]))
    if found < wanted:
        return [
            f"{host}: {variable} is {value!r}, Python {found[0]}.{found[1]} there; vllm-mlx needs"
            f" Python {minimum} or newer: {how}"
        ]
    return []


class FilterModule:
    """Parsers of macOS tool output."""

    def filters(self):
        return {
            "launchd_job": launchd_job,
            "macos_swap": macos_swap,
            "python_version_problems": python_version_problems,
        }
