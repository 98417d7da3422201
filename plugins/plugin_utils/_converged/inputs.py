# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""The digest of what a run is given for one host, computed on the controller: two runs
with the same digest apply the same code to the same values.

It covers the collection's files (roles, playbooks, plugins, its metadata and
``ansible.cfg``), the versions of ansible-core and of the ``ansible`` package (the
collections this one uses), the inventory's groups, and the host's values of the variables
the collection reads: every ``llmfleet_*`` name, every name with a role's prefix, and the
connection's. The values are the templated ones, so a variable that reads a file or the
environment is compared by what it gives.
"""

from __future__ import annotations

import hashlib
import json
import os
from importlib import metadata

from ansible.release import __version__ as ANSIBLE_CORE_VERSION

# What decides what a run does to a host; tests, docs and the CLI's own code do not.
COLLECTION_PARTS = (
    "roles",
    "playbooks",
    "plugins",
    "meta",
    "site.yml",
    "galaxy.yml",
    "ansible.cfg",
)
SKIPPED_NAMES = ("__pycache__",)
CONNECTION_VARIABLES = (
    "ansible_host",
    "ansible_port",
    "ansible_user",
    "ansible_connection",
    "ansible_become",
    "ansible_become_user",
    "ansible_become_method",
    "ansible_python_interpreter",
    "ansible_private_key_file",
    "ansible_ssh_common_args",
    "ansible_ssh_extra_args",
)


def collection_root():
    """The collection's folder (this file is ``plugins/plugin_utils/_converged/inputs.py``)."""
    return os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    )


def files_digest(root):
    """SHA-256 over the relative path and content of every file of the collection's parts."""
    digest = hashlib.sha256()
    for part in COLLECTION_PARTS:
        top = os.path.join(root, part)
        if os.path.isfile(top):
            paths = [top]
        else:
            paths = []
            for folder, dirs, files in os.walk(top):
                dirs[:] = sorted(d for d in dirs if d not in SKIPPED_NAMES)
                paths += [
                    os.path.join(folder, name)
                    for name in sorted(files)
                    if not name.endswith(".pyc")
                ]
        for path in paths:
            digest.update(os.path.relpath(path, root).encode() + b"\0")
            with open(path, "rb") as handle:
                digest.update(hashlib.sha256(handle.read()).digest())
    return digest.hexdigest()


def ansible_versions():
    try:
        package = metadata.version("ansible")
    except metadata.PackageNotFoundError:
        package = ""
    return {"ansible-core": ANSIBLE_CORE_VERSION, "ansible": package}


def is_input(name, role_prefixes):
    """Whether variable ``name`` is one the collection reads (``__`` names are internal)."""
    if name.startswith("_"):
        return False
    return (
        name.startswith("llmfleet_")
        or name in CONNECTION_VARIABLES
        or any(name.startswith(prefix) for prefix in role_prefixes)
    )


def role_prefixes(root):
    """``<role>_`` for each of the collection's public roles."""
    folder = os.path.join(root, "roles")
    return tuple(
        name + "_"
        for name in sorted(os.listdir(folder))
        if not name.startswith("_") and os.path.isdir(os.path.join(folder, name))
    )


def _sha256(value):
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def input_parts(values, groups, group_names, files, versions):
    """The digest of each part of a host's inputs, by name: ``var:<name>`` for each of its
    variables (``values``: name -> templated value), ``groups`` (the inventory's groups,
    name -> hosts), ``group_names``, ``files`` (:func:`files_digest`) and ``versions``. What
    differs between two runs is named by these, never by a value."""
    parts = {"var:%s" % name: _sha256(value) for name, value in values.items()}
    parts["groups"] = _sha256({name: sorted(hosts) for name, hosts in groups.items()})
    parts["group_names"] = _sha256(sorted(group_names))
    parts["files"] = _sha256(files)
    parts["versions"] = _sha256(versions)
    return parts


def parts_digest(parts):
    """One digest of a host's inputs, from its :func:`input_parts`."""
    return _sha256(parts)


def inputs_digest(values, groups, group_names, files, versions):
    """One digest of a host's inputs (of its :func:`input_parts`)."""
    return parts_digest(input_parts(values, groups, group_names, files, versions))
