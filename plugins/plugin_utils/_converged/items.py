# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""What a task managed on its host, read from its result: the items the callback
converged_record gathers for llmfleet.cluster.converged_state's record.

A task is read by the module it ran (its resolved FQCN) through :data:`READERS`, one entry a
module: which kind of item its arguments name. Arguments come from the result's
``invocation`` (the values the module ran with) or, for an action plugin that reports none,
from the task's own arguments as the worker templated them (each item's, in a loop). A task
whose result is hidden (``no_log``) is read from those arguments alone.
"""

from __future__ import annotations

KINDS = ("files", "units", "containers", "packages", "sysctls")


def _names(value):
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [name.strip() for name in value.split(",") if name.strip()]
    return [str(name) for name in value if name]


def _path(*keys):
    def read(args, result):
        for key in keys:
            value = args.get(key) or result.get(key)
            if value:
                return {"files": [str(value)]}
        return {}

    return read


def _config_files(args, result):
    files = [str(entry.get("dest")) for entry in args.get("files") or [] if entry.get("dest")]
    folders = [
        str(entry.get("path")) for entry in args.get("directories") or [] if entry.get("path")
    ]
    return {"files": folders + files}


def _unit(args, result):
    name = args.get("name") or result.get("name")
    return {"units": [str(name)]} if name else {}


def _container(engine):
    def read(args, result):
        name = args.get("name")
        return {"containers": [{"name": str(name), "engine": engine}]} if name else {}

    return read


def _packages(args, result):
    # Names with a version (pkg=1.2) or a release (pkg/bookworm) are read by the name alone.
    names = _names(args.get("name") or args.get("pkg"))
    return {"packages": [name.split("=")[0].split("/")[0] for name in names]}


def _sysctl(args, result):
    name = args.get("name")
    return {"sysctls": [str(name)]} if name else {}


def _probe(args, result):
    if args.get("url") and not args.get("headers"):
        return {"probes": [{"url": str(args["url"])}]}
    if args.get("command"):
        probe = {"command": [str(part) for part in args["command"]]}
        if args.get("pattern"):
            probe["pattern"] = str(args["pattern"])
            probe["min_matches"] = int(args.get("min_matches") or 1)
        return {"probes": [probe]}
    return {}  # a check that needs a header (a key) is not stored to be passed again


READERS = {
    "ansible.builtin.copy": _path("dest"),
    "ansible.builtin.template": _path("dest"),
    "ansible.builtin.file": _path("path", "dest"),
    "ansible.builtin.lineinfile": _path("path", "dest"),
    "ansible.builtin.blockinfile": _path("path", "dest"),
    "ansible.builtin.replace": _path("path", "dest"),
    "community.general.ini_file": _path("path", "dest"),
    "llmfleet.cluster.config_files": _config_files,
    "ansible.builtin.systemd_service": _unit,
    "ansible.builtin.systemd": _unit,
    "ansible.builtin.service": _unit,
    "community.docker.docker_container": _container("docker"),
    "containers.podman.podman_container": _container("podman"),
    "ansible.builtin.apt": _packages,
    "ansible.builtin.package": _packages,
    "ansible.posix.sysctl": _sysctl,
    "llmfleet.cluster.service_wait": _probe,
}


def task_items(action, args, result):
    """The items (by kind, and ``probes``) that one result of module ``action`` managed;
    ``args`` the arguments it ran with. Nothing for a module not in :data:`READERS`, or a
    result that was skipped or failed."""
    reader = READERS.get(action)
    if reader is None or not isinstance(result, dict):
        return {}
    if result.get("skipped") or result.get("failed"):
        return {}
    invocation = result.get("invocation")
    if isinstance(invocation, dict) and isinstance(invocation.get("module_args"), dict):
        args = {**(args or {}), **invocation["module_args"]}
    return reader(args or {}, result)


def result_items(action, args, result):
    """:func:`task_items` of a task's result, or of each of its loop's results."""
    if isinstance(result, dict) and isinstance(result.get("results"), list):
        merged = {}
        for each in result["results"]:
            merge(merged, task_items(action, {}, each))  # the loop's own arguments are per item
        return merged
    return task_items(action, args, result)


def merge(into, items):
    """Add ``items`` to ``into`` (lists by kind), keeping each item once, in order."""
    for kind, values in items.items():
        known = into.setdefault(kind, [])
        for value in values:
            if value not in known:
                known.append(value)
    return into
