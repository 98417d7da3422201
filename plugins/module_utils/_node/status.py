# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""What one node runs, read in one pass for ``llmfleet status``: the state of our systemd units
and containers, the fabric links, the memory and swap, the vLLM launch it is configured for and
what it serves according to its history.

The parsers are pure; the readers take the paths they read (tests point them at a folder).
Standard library only: it runs on the managed hosts.
"""

from __future__ import annotations

import json
import os
import re

from ansible_collections.llmfleet.cluster.plugins.module_utils._container.image_record import (
    read_containers,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._memory.meminfo import (
    page_cache_bytes,
    parse_meminfo,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._node.deployment_history import (
    HistoryError,
    current_state,
    parse_history,
)

UNIT_PROPERTIES = (
    "Id",
    "LoadState",
    "ActiveState",
    "SubState",
    "Result",
    "NRestarts",
    "UnitFileState",
    "ActiveEnterTimestampMonotonic",
)
# The keys of vLLM's serve.yaml that describe the launch (llmfleet.cluster.vllm_serve_config).
LAYOUT_KEYS = (
    "model",
    "served_model_name",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
    "nnodes",
    "node_rank",
    "master_addr",
    "headless",
    "distributed_executor_backend",
    "max_model_len",
    "host",
    "port",
)
_TOP_LEVEL_SCALAR = re.compile(r"^(?P<key>[A-Za-z0-9_-]+):[ \t]+(?P<value>[^#\n]*?)\s*$")


def parse_systemctl_show(text):
    """``systemctl show -p ... UNIT...`` (blocks of ``Key=value`` lines separated by a blank
    line) -> ``{unit id: {property: value}}``."""
    units = {}
    for block in re.split(r"\n\s*\n", text.strip()):
        properties = {}
        for line in block.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                properties[key.strip()] = value.strip()
        if properties.get("Id"):
            units[properties["Id"]] = properties
    return units


def _int_or_none(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def unit_state(name, properties, boot_epoch):
    """One unit's state: installed (a unit file systemd knows), active/sub state, the result of
    its last run, how often systemd restarted it, and since when (epoch seconds) it is active."""
    properties = properties or {}
    load = properties.get("LoadState", "not-found")
    entered = _int_or_none(properties.get("ActiveEnterTimestampMonotonic"))
    active = properties.get("ActiveState", "inactive")
    return {
        "name": name,
        "installed": load not in ("not-found", ""),
        "load": load,
        "active": active,
        "sub": properties.get("SubState", "dead"),
        "result": properties.get("Result") or None,
        "restarts": _int_or_none(properties.get("NRestarts")),
        "enabled": properties.get("UnitFileState") or None,
        "since": round(boot_epoch + entered / 1e6, 3)
        if entered and boot_epoch is not None and active == "active"
        else None,
    }


def boot_epoch(uptime_text, now):
    """The boot time (epoch seconds) from ``/proc/uptime`` and the current time."""
    try:
        return now - float(uptime_text.split()[0])
    except (IndexError, ValueError):
        return None


def container_state(name, inspected):
    """One container from ``ENGINE container inspect NAME`` (docker's or podman's JSON), or
    absent when the engine does not know it."""
    if not inspected:
        return {"name": name, "exists": False}
    entry = inspected[0] if isinstance(inspected, list) else inspected
    state = entry.get("State") or {}
    config = entry.get("Config") or {}
    return {
        "name": name,
        "exists": True,
        "state": state.get("Status"),
        "exit_code": state.get("ExitCode"),
        "restarts": entry.get("RestartCount"),
        "started": state.get("StartedAt"),
        "image": entry.get("ImageName") or config.get("Image"),
        "image_id": entry.get("Image"),
    }


def parse_serve_config(text):
    """vLLM's ``serve.yaml`` as a mapping: PyYAML where the node has it, else its top-level
    scalar lines (``key: value``), which hold every key of the launch."""
    try:
        import yaml  # noqa: PLC0415 - optional on the managed host

        data = yaml.safe_load(text)
        return data if isinstance(data, dict) else {}
    except ImportError:
        pass
    data = {}
    for line in text.splitlines():
        match = _TOP_LEVEL_SCALAR.match(line)
        if match:
            data[match["key"]] = _scalar(match["value"])
    return data


def _scalar(value):
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    lowered = value.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "~", ""):
        return None
    number = _int_or_none(value)
    return number if number is not None else value


def layout(config):
    """The launch a serve.yaml describes (tensor x pipeline parallel, nodes, this node's rank,
    whether it serves the API or is a headless rank); None without a configuration."""
    if not config:
        return None
    picked = {key.replace("-", "_"): value for key, value in config.items()}
    result = {key: picked.get(key) for key in LAYOUT_KEYS}
    result["tensor_parallel_size"] = result["tensor_parallel_size"] or 1
    result["pipeline_parallel_size"] = result["pipeline_parallel_size"] or 1
    result["nnodes"] = result["nnodes"] or 1
    result["node_rank"] = result["node_rank"] or 0
    result["headless"] = bool(result["headless"])
    return result


def read_text(path):
    """A file's text, or None when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def memory(meminfo_text, swaps_text):
    """Memory and swap in bytes from ``/proc/meminfo`` and ``/proc/swaps``: total, free (what
    CUDA reports free on unified memory), available, the page cache ``drop_caches`` would give
    back, swap total/used and the swap devices in use."""
    info = parse_meminfo(meminfo_text or "")
    devices = [line.split()[0] for line in (swaps_text or "").splitlines()[1:] if line.strip()]
    swap_total = info.get("SwapTotal", 0)
    return {
        "total_bytes": info.get("MemTotal"),
        "free_bytes": info.get("MemFree"),
        "available_bytes": info.get("MemAvailable"),
        "page_cache_bytes": page_cache_bytes(info) if "Cached" in info else None,
        "swap_total_bytes": swap_total,
        "swap_used_bytes": swap_total - info.get("SwapFree", swap_total),
        "swap_devices": devices,
    }


def link_state(name, sysfs_root, ethtool_result, addresses):
    """One fabric interface: present, operational state, MTU, speed (ethtool's, the driver's
    figure) and IPv4 addresses (``addr/prefix``)."""
    folder = os.path.join(sysfs_root, "class", "net", name)
    if not os.path.isdir(folder):
        return {"name": name, "present": False}
    mtu = _int_or_none((read_text(os.path.join(folder, "mtu")) or "").strip())
    return {
        "name": name,
        "present": True,
        "operstate": (read_text(os.path.join(folder, "operstate")) or "unknown").strip(),
        "mtu": mtu,
        "speed_mbps": ethtool_result["speed_mbps"],
        "link_detected": ethtool_result["link_detected"],
        "ipv4": addresses,
    }


def ipv4_addresses(ip_json_text):
    """``ip -j -4 address show dev IFACE`` -> ``["addr/prefix", ...]``."""
    try:
        entries = json.loads(ip_json_text or "[]")
    except ValueError:
        return []
    return [
        "{}/{}".format(info["local"], info["prefixlen"])
        for entry in entries
        for info in entry.get("addr_info", [])
        if info.get("family", "inet") == "inet" and "local" in info
    ]


def serving_history(text):
    """What the node's history says it serves (image, profile, model revision), whether the
    newest switch failed (then that is uncertain), and the newest entry's time and action."""
    if text is None:
        return None
    try:
        entries = parse_history(text)
    except HistoryError as exc:
        return {"error": str(exc)}
    current, uncertain = current_state(entries)
    newest = entries[-1] if entries else {}
    return {
        "current": current,
        "uncertain": uncertain,
        "last_change": newest.get("time"),
        "last_action": newest.get("action"),
        "last_outcome": newest.get("outcome"),
    }


PROBE_KEYS = (
    "phase",
    "ready_since",
    "started_at",
    "warmup_seconds",
    "failures",
    "last_failure",
    "last_probe",
    "last_heal",
    "interval",
)


def probe_state(text, now):
    """What the serving probe (llmfleet-vllm-probe, on a group's rank 0) last wrote: its
    phase (``ready`` once this start of vLLM answered its warm-up requests, ``starting``,
    ``failing``, ``healing``, ``down``, ``given up``), since when it is ready, the last failure
    and heal; ``stale`` when it wrote nothing for three of its intervals (it is not running).
    None without a state file, ``error`` for one that cannot be read."""
    if text is None:
        return None
    try:
        document = json.loads(text)
    except ValueError as exc:
        return {"error": f"the probe's state is no JSON ({exc})"}
    if not isinstance(document, dict):
        return {"error": "the probe's state is no mapping"}
    state = {key: document.get(key) for key in PROBE_KEYS}
    written = document.get("written")
    interval = _int_or_none(document.get("interval")) or 10
    state["stale"] = isinstance(written, (int, float)) and now - written > 3 * interval + 30
    return state


def images_running(text):
    """The node's record of the image each container runs (``{name: {reference, image_id,
    repo_digests}}``), empty without one."""
    return read_containers(text) if text is not None else {}


def _read_bytes(path):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def find_processes(pattern, proc, environ_keys, own_pid=None):
    """The processes whose command line contains ``pattern`` (their children left out): pid,
    command line, and of their environment only ``environ_keys`` (an environment holds
    secrets; a key it does not set is left out). Reading another user's environment needs
    root: without it ``environ`` is null."""
    found = []
    for name in sorted(os.listdir(proc), key=lambda entry: (len(entry), entry)):
        if not name.isdigit() or int(name) == own_pid:
            continue
        raw = _read_bytes(os.path.join(proc, name, "cmdline"))
        if not raw:
            continue
        command = raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")
        if pattern not in command:
            continue
        environ = _read_bytes(os.path.join(proc, name, "environ"))
        found.append({
            "pid": int(name),
            "cmdline": command,
            "environ": None if environ is None else environ_subset(environ, environ_keys),
        })  # fmt: skip
    pids = {entry["pid"] for entry in found}
    return [entry for entry in found if _parent(proc, entry["pid"]) not in pids]


def _parent(proc, pid):
    stat = read_text(os.path.join(proc, str(pid), "stat")) or ""
    fields = stat.rpartition(")")[2].split()
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None


def environ_subset(raw, keys):
    """``/proc/PID/environ`` (NUL-separated) -> the ``keys`` it sets."""
    wanted = set(keys)
    values = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.decode("utf-8", "replace").partition("=")
        if sep and key in wanted:
            values[key] = value
    return values


def env_file_subset(text, keys):
    """An environment file (systemd's EnvironmentFile, docker's --env-file: ``KEY=VALUE`` lines,
    ``#`` comments) -> the ``keys`` it sets; None for a file that cannot be read."""
    if text is None:
        return None
    wanted = set(keys)
    values = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        key = key.strip().removeprefix("export ").strip()
        if sep and key in wanted:
            values[key] = value.strip().strip("'\"")
    return values


def package_version(prefix, name):
    """The version of the Python distribution ``name`` installed under the environment
    ``prefix`` (its ``*.dist-info/METADATA``), None when it is not there."""
    lib = os.path.join(prefix, "lib")
    normalized = name.replace("-", "_").lower()
    try:
        pythons = sorted(entry for entry in os.listdir(lib) if entry.startswith("python3"))
    except OSError:
        return None
    for python in pythons:
        site = os.path.join(lib, python, "site-packages")
        try:
            entries = os.listdir(site)
        except OSError:
            continue
        for entry in entries:
            base = entry.lower()
            if base.endswith(".dist-info") and base.split("-")[0] == normalized:
                metadata = read_text(os.path.join(site, entry, "METADATA")) or ""
                match = re.search(r"^Version:\s*(\S+)", metadata, re.M)
                if match:
                    return match[1]
    return None
