# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""What the last full run left on a node, and whether it is still so: the logic of the
converged_state module, free of AnsibleModule so unit tests call it directly.

A full ``site.yml`` run that went well records, on each host, the digest of its inputs, the
host's boot ID and the state of what the run managed there (files, systemd units,
containers, Debian packages, kernel settings) and the readiness checks it waited on. A
later ``llmfleet up`` compares: the same inputs, the same boot, every item as it was left
and every check ready again means the run would change nothing, and it stops there.

The state readers take a ``run`` callable (argv -> rc, stdout, stderr) and the paths they
read, so tests drive them with real command output. Standard library only: it runs on the
managed hosts.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat

RECORD_VERSION = 1
# Files above this size (model weights, images) are compared by size and mtime: hashing
# gigabytes would cost the run it saves.
HASH_LIMIT_BYTES = 16 * 1024 * 1024
BOOT_ID = "/proc/sys/kernel/random/boot_id"
# A long-running unit is compared by its invocation: any restart since the run (systemd's,
# the serving probe's heal, a hand's) gives it a new one.
UNIT_PROPERTIES = ("Id", "LoadState", "UnitFileState", "ActiveState", "InvocationID")
ITEM_KINDS = ("files", "units", "containers", "packages", "sysctls")


class RecordError(ValueError):
    """The record cannot be read (absent, not JSON, another version)."""


def file_state(path):
    """A path's type, mode, owner and content: its SHA-256, or its size and mtime above
    :data:`HASH_LIMIT_BYTES` or when it cannot be read; ``{"exists": False}`` when absent.
    Links are not followed."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return {"exists": False}
    state = {
        "exists": True,
        "mode": "%04o" % stat.S_IMODE(info.st_mode),
        "owner": "%d:%d" % (info.st_uid, info.st_gid),
    }
    if stat.S_ISLNK(info.st_mode):
        return {**state, "type": "link", "target": os.readlink(path)}
    if stat.S_ISDIR(info.st_mode):
        return {**state, "type": "directory"}
    by_size = {**state, "type": "file", "size": info.st_size, "mtime": int(info.st_mtime)}
    if info.st_size > HASH_LIMIT_BYTES:
        return by_size
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except PermissionError:  # a file sudo wrote, read by a user that connects without it
        return by_size
    return {**state, "type": "file", "sha256": digest.hexdigest()}


def parse_units(text):
    """``systemctl show -p ... UNIT...`` -> ``{unit: state}``; a unit's invocation counts only
    while it is active (an inactive unit keeps the ID of its last run)."""
    units = {}
    for block in text.strip().split("\n\n"):
        properties = dict(line.partition("=")[::2] for line in block.splitlines() if "=" in line)
        name = properties.get("Id")
        if not name:
            continue
        active = properties.get("ActiveState", "inactive")
        units[name] = {
            "load": properties.get("LoadState", "not-found"),
            "enabled": properties.get("UnitFileState", ""),
            "active": active,
            "invocation": properties.get("InvocationID", "") if active == "active" else "",
        }
    return units


def unit_states(run, names):
    """The state of each systemd unit of ``names`` (one ``systemctl show`` for all)."""
    if not names:
        return {}
    rc, out = run(["systemctl", "show", "-p", ",".join(UNIT_PROPERTIES), "--", *names])[:2]
    found = parse_units(out) if rc == 0 else {}
    absent = {"load": "not-found", "enabled": "", "active": "inactive", "invocation": ""}
    # systemctl names a unit by its full Id (llmfleet-vllm.service for llmfleet-vllm)
    return {name: found.get(name) or found.get(name + ".service") or dict(absent) for name in names}


def container_states(run, containers):
    """The ID, status and restart count of each container (``{"name", "engine"}``), keyed
    ``engine/name``; an engine that is missing or does not know the container: absent."""
    states = {}
    for entry in containers:
        key = "%s/%s" % (entry["engine"], entry["name"])
        try:
            rc, out = run([entry["engine"], "container", "inspect", entry["name"]])[:2]
        except OSError:
            rc, out = 1, ""
        inspected = None
        if rc == 0:
            try:
                inspected = json.loads(out)
            except ValueError:
                inspected = None
        if isinstance(inspected, list):
            inspected = inspected[0] if inspected else None
        if not inspected:
            states[key] = {"exists": False}
            continue
        state = inspected.get("State") or {}
        states[key] = {
            "exists": True,
            "id": inspected.get("Id"),
            "status": state.get("Status"),
            "restarts": inspected.get("RestartCount"),
        }
    return states


def package_states(run, names):
    """The installed version of each Debian package (``dpkg-query``), or None."""
    if not names:
        return {}
    out = run(
        ["dpkg-query", "-W", "-f", "${Package}\t${db:Status-Status}\t${Version}\n", "--", *names]
    )[1]
    versions = {}
    for line in out.splitlines():
        fields = line.split("\t")
        if len(fields) == 3 and fields[1] == "installed":
            versions[fields[0].split(":")[0]] = fields[2]
    return {name: versions.get(name) for name in names}


def sysctl_states(names, proc_sys="/proc/sys"):
    """The value of each kernel setting, or None when it has none. A name is written with dots
    (``net.core.rmem_max``) or, as sysctl(8) also takes it, with slashes, and then a dot is
    part of a name (``net/ipv4/conf/eth0.100/rp_filter``, a VLAN's interface)."""
    states = {}
    for name in names:
        path = os.path.join(proc_sys, *name.split("/" if "/" in name else "."))
        try:
            with open(path, encoding="utf-8") as handle:
                states[name] = " ".join(handle.read().split())
        except OSError:
            states[name] = None
    return states


def read_states(run, items, proc_sys="/proc/sys"):
    """The state of every item the run managed (``items``: lists by kind)."""
    return {
        "files": {path: file_state(path) for path in items.get("files", [])},
        "units": unit_states(run, items.get("units", [])),
        "containers": container_states(run, items.get("containers", [])),
        "packages": package_states(run, items.get("packages", [])),
        "sysctls": sysctl_states(items.get("sysctls", []), proc_sys),
    }


def boot_id(path=BOOT_ID):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def make_record(run_id, *, inputs, boot, items, states, probes, input_parts=None):
    """The record of a full run: what the comparison reads back."""
    return {
        "version": RECORD_VERSION,
        "run": run_id,
        "inputs": inputs,
        "input_parts": input_parts or {},
        "boot_id": boot,
        "items": {kind: items.get(kind, []) for kind in ITEM_KINDS},
        "states": states,
        "probes": probes,
    }


def parse_record(text):
    try:
        record = json.loads(text)
    except ValueError as error:
        raise RecordError("the record is not JSON (%s)" % error) from None
    if not isinstance(record, dict) or record.get("version") != RECORD_VERSION:
        raise RecordError("the record is of another version of the collection")
    return record


def _describe_file(path, before, after):
    if not after.get("exists"):
        return "%s: removed" % path
    if not before.get("exists"):
        return "%s: created" % path
    for key, what in (
        ("type", "type"),
        ("sha256", "content"),
        ("size", "content"),
        ("mtime", "content"),
        ("target", "link target"),
        ("mode", "mode"),
        ("owner", "owner"),
    ):
        if before.get(key) != after.get(key):
            return "%s: its %s changed" % (path, what)
    return "%s: changed" % path


def _describe_unit(name, before, after):
    for key in ("load", "enabled", "active"):
        if after.get(key) != before.get(key):
            return "unit %s: %s, was %s" % (
                name,
                after.get(key) or "no unit file",
                before.get(key) or "no unit file",
            )
    return "unit %s: restarted since" % name


def _describe_container(key, before, after):
    if not after.get("exists"):
        return "container %s: gone" % key
    if not before.get("exists"):
        return "container %s: created since" % key
    if after.get("id") != before.get("id"):
        return "container %s: another container since" % key
    if after.get("status") != before.get("status"):
        return "container %s: %s, was %s" % (key, after.get("status"), before.get("status"))
    return "container %s: restarted since" % key


def _describe_value(kind, name, before, after):
    label = {"packages": "package", "sysctls": "kernel setting"}[kind]
    return "%s %s: %s, was %s" % (label, name, after or "absent", before or "absent")


def differences(before, after):
    """Lines naming each item whose state is not as the record has it."""
    lines = []
    describe = {
        "files": _describe_file,
        "units": _describe_unit,
        "containers": _describe_container,
    }
    for kind in ITEM_KINDS:
        old, new = before.get(kind, {}), after.get(kind, {})
        for name in new:
            if new[name] == old.get(name):
                continue
            if kind in describe:
                lines.append(describe[kind](name, old.get(name) or {}, new[name]))
            else:
                lines.append(_describe_value(kind, name, old.get(name), new[name]))
    return lines


def compare(record, inputs, boot, states, parts=None):
    """Why the host is not as the last full run left it: a list of lines, empty when it is.
    ``states`` is :func:`read_states` of the record's items; ``parts`` the inputs' parts
    (:func:`changed_inputs`), which name what changed. Other inputs are said first; a reboot
    alone after them (every state is another since), else each item whose state differs."""
    changed = inputs_changed(record, inputs, parts)
    lines = [inputs_line(record.get("run"), changed)] if changed else []
    if record.get("boot_id") != boot:
        return [*lines, "rebooted since run %s" % record.get("run")]
    return lines + differences(record.get("states", {}), states)


# How a part of the inputs that is not a variable is named in a line.
PART_NAMES = {
    "files": "the collection's files",
    "groups": "the inventory's groups",
    "group_names": "the host's groups",
    "versions": "the versions of Ansible",
}
NAMES_SHOWN = 6


def inputs_line(run, changed):
    """The line that says the inputs changed, naming what changed (never a value)."""
    if not changed or changed == ["*"]:
        return "the inputs changed since run %s (the collection, a variable or a group)" % run
    names = [PART_NAMES.get(part, part.partition(":")[2] or part) for part in changed]
    more = len(names) - NAMES_SHOWN
    shown = ", ".join(names[:NAMES_SHOWN]) + (" and %d more" % more if more > 0 else "")
    return "the inputs changed since run %s: %s" % (run, shown)


def inputs_changed(record, inputs, parts=None):
    """What changed in the inputs since ``record`` (:func:`changed_inputs`), or nothing
    when its digest is ``inputs``."""
    if record.get("inputs") == inputs:
        return []
    return changed_inputs(record.get("input_parts"), parts or {})


def changed_inputs(recorded, current):
    """The names of the parts of the inputs (``var:<name>``, ``files``, ``groups``...) whose
    digest differs between the record's and these; ``["*"]`` for a record without parts."""
    if not recorded:
        return ["*"]
    names = set(recorded) | set(current)
    return sorted(name for name in names if recorded.get(name) != current.get(name))


def merged_items(kept, items):
    """``kept`` (lists by kind) with the items of ``items`` it lacks added, in order."""
    merged = {}
    for kind in ITEM_KINDS:
        merged[kind] = list(kept.get(kind) or [])
        merged[kind] += [value for value in items.get(kind) or [] if value not in merged[kind]]
    return merged


def unique_probes(probes):
    """Each readiness check once: of the same command and pattern waited on with several
    counts (``ray status`` listing 1 node, then 2), the largest count."""
    kept = {}
    for probe in probes:
        key = json.dumps({k: v for k, v in probe.items() if k != "min_matches"}, sort_keys=True)
        if key not in kept or probe.get("min_matches", 1) > kept[key].get("min_matches", 1):
            kept[key] = probe
    return list(kept.values())


def probe_failures(probes, check):
    """A line for each readiness check of ``probes`` that does not pass now; ``check`` takes
    one and returns ``(ready, what it saw)``."""
    lines = []
    for probe in probes:
        ready, said = check(probe)
        if not ready:
            lines.append("%s: not ready (%s)" % (probe_label(probe), said))
    return lines


def probe_label(probe):
    """How a readiness check is named in a line."""
    if probe.get("url"):
        return probe["url"]
    return " ".join(probe.get("command") or [])
