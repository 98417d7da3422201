# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""The hand-over between the callback converged_record (which gathers, in the controller's
main process, what each host's tasks managed) and the action plugin of converged_state
(which runs in a worker forked for the record's task): one owner-only JSON file per host in
a folder named by :data:`HANDOVER_ENV`."""

from __future__ import annotations

import json
import os

HANDOVER_ENV = "LLMFLEET_CONVERGED_HANDOVER"
# How a play names the record's task (the callback sees the action as written).
RECORD_ACTION = frozenset({"llmfleet.cluster.converged_state", "converged_state"})


def _file(folder, host):
    return os.path.join(folder, "%s.json" % host.replace(os.sep, "_"))


def write_handover(folder, run_id, items, failed_hosts):
    """Write what each host of ``items`` (host -> items by kind) managed, with the run and
    the hosts that failed in it; the folder and files are owner-only."""
    os.chmod(folder, 0o700)
    for host, host_items in items.items():
        fd = os.open(_file(folder, host), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"run": run_id, "failed_hosts": failed_hosts, "items": host_items}, handle)
    fd = os.open(os.path.join(folder, ".run.json"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump({"run": run_id, "failed_hosts": failed_hosts}, handle)


def read_handover(host, environ=None):
    """What the run managed on ``host``: ``{"run", "failed_hosts", "items"}``, or None when no
    callback handed anything over (it is not enabled)."""
    folder = (environ if environ is not None else os.environ).get(HANDOVER_ENV)
    if not folder or not os.path.isdir(folder):
        return None
    try:
        with open(_file(folder, host), encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:  # a host none of whose tasks managed anything known
        with open(os.path.join(folder, ".run.json"), encoding="utf-8") as handle:
            return {**json.load(handle), "items": {}}
