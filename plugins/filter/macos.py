"""Parsers of what macOS prints about the Mac Studio's vllm-mlx (``launchctl print``,
``launchctl list``, ``sysctl vm.swapusage``): read by ``llmfleet status`` and ``llmfleet
doctor`` through the mlx_server role's status entry point, and by the role when it loads,
migrates and removes vllm-mlx's LaunchDaemon."""

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


# launchctl's answer for a service its domain does not have (print, bootout, kickstart):
# "Could not find service "LABEL" in domain for system" (print), "Boot-out failed: 113: Could
# not find specified service" (bootout).
LAUNCHCTL_NOT_FOUND = 113
# "Could not find domain": a user's gui/ domain while nobody is logged in at the screen.
LAUNCHCTL_NO_DOMAIN = 112
# A line of `launchctl print`'s outermost block: "\tstate = running", "\tpid = 4242".
LAUNCHCTL_PRINT_FIELD = re.compile(r"^\s*(?P<key>[a-z][a-z ]*?) = (?P<value>.*?)\s*$")
# "last exit code = 1", "last exit code = 78: EX_CONFIG", "last exit code = (never exited)".
LAUNCHCTL_EXIT_CODE = re.compile(r"^(?P<code>-?\d+)")
# "last terminating signal = Killed: 9": the signal, negative as `launchctl list` shows it.
LAUNCHCTL_SIGNAL = re.compile(r":\s*(?P<signal>\d+)\s*$")


def _launchctl_print_fields(stdout):
    """The ``key = value`` lines of ``launchctl print``'s outermost block: nested blocks
    (``environment = {``, ``endpoints = {``) are skipped, so that nothing inside them (a
    variable named ``pid``, an environment value) is read as the service's own."""
    fields = {}
    depth = 0
    for line in str(stdout).splitlines():
        text = line.strip()
        if text.endswith("{"):
            depth += 1
            continue
        if text.startswith("}"):
            depth = max(depth - 1, 0)
            continue
        match = LAUNCHCTL_PRINT_FIELD.match(text)
        if depth == 1 and match:
            fields.setdefault(match["key"], match["value"])
    return fields


def launchd_service(result, label):
    """``launchctl print <domain>/<label>`` (``result``: the command's registered result) ->
    whether the domain has the service loaded, its state, its PID when it runs and the status
    it last exited with (a negative one is the signal that ended it). Exit 113 is a service
    the domain does not have; any other failure raises with what launchctl said, so that a
    caller never mistakes "could not ask" for "not loaded"."""
    result = result if isinstance(result, dict) else {}
    rc = result.get("rc")
    if rc == LAUNCHCTL_NOT_FOUND:
        return {
            "label": label,
            "loaded": False,
            "running": False,
            "state": None,
            "pid": None,
            "last_exit_status": None,
        }
    if rc != 0:
        said = result.get("stderr") or result.get("stdout") or result.get("msg") or "no output"
        said = " ".join(str(said).split())[:300]
        raise AnsibleFilterError(f"launchctl print for {label} failed (rc {rc}): {said}")
    fields = _launchctl_print_fields(result.get("stdout", ""))
    pid = int(fields["pid"]) if fields.get("pid", "").isdigit() else None
    status = None
    code = LAUNCHCTL_EXIT_CODE.match(fields.get("last exit code", ""))
    signal = LAUNCHCTL_SIGNAL.search(fields.get("last terminating signal", ""))
    if signal:
        status = -int(signal["signal"])
    elif code:
        status = int(code["code"])
    state = fields.get("state")
    return {
        "label": label,
        "loaded": True,
        "running": pid is not None and state in (None, "running"),
        "state": state,
        "pid": pid,
        "last_exit_status": status,
    }


def launchd_loaded(results):
    """The registered results of ``launchctl print`` looped over service targets
    (``gui/501/LABEL``, ``user/501/LABEL``: each result's ``item``) -> the targets whose
    domain has the service loaded, to boot out. A skipped item, a service the domain does not
    have (113) and a domain that does not exist (112) are not loaded; any other failure
    raises (see ``launchd_service``)."""
    loaded = []
    for result in results or []:
        if result.get("skipped") or result.get("rc") == LAUNCHCTL_NO_DOMAIN:
            continue
        target = str(result.get("item", ""))
        if launchd_service(result, target.rsplit("/", 1)[-1])["loaded"]:
            loaded.append(target)
    return loaded


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
            "launchd_loaded": launchd_loaded,
            "launchd_service": launchd_service,
            "macos_swap": macos_swap,
            "python_version_problems": python_version_problems,
        }
