# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Gather, from a run's own task results, what each host's tasks managed, for the record
llmfleet.cluster.converged_state writes at the end of a full run.

No role lists its files, units or containers a second time: the callback reads each result
of the modules it knows (plugins/plugin_utils/_converged/items.py) as the run goes. When the
record's task starts, it hands each host's items over to it: a JSON file per host in an
owner-only temporary folder named by an environment variable, which the workers forked for
that task inherit. The folder is removed when the run ends.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: converged_record
type: aggregate
short_description: Gather what a run managed on each host, for llmfleet.cluster.converged_state
description:
  - Reads the result of each task of a known module (files written, systemd units, containers,
    Debian packages, kernel settings, readiness checks waited on) and keeps, per host, what
    it managed, and which hosts failed or were unreachable.
  - When a task of M(llmfleet.cluster.converged_state) with C(mode=record) starts, writes one
    owner-only file per host into a temporary folder and names that folder in the environment
    variable C(LLMFLEET_CONVERGED_HANDOVER), which the task's action plugin reads; the folder
    is removed when the playbook ends.
  - Prints nothing and changes no result.
options:
  record:
    description:
      - Hand what the run managed over to the record's task. Off, no run records, and
        C(llmfleet up) walks every task each time (as without this callback).
    type: bool
    default: true
    ini:
      - section: callback_converged_record
        key: record
    env:
      - name: LLMFLEET_CONVERGED_RECORD
author:
  - llmfleet maintainers (!UNKNOWN)
version_added: "0.3.0"
requirements:
  - Enabled in C(callbacks_enabled) (the collection's C(ansible.cfg) does). Without it, no
    run records, and C(llmfleet up) walks every task each time.
"""

# Ansible documents a plugin with the strings above its imports (the modules' layout).
import os  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

from ansible.plugins.callback import CallbackBase  # noqa: E402
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._converged.handover import (  # noqa: E402
    HANDOVER_ENV,
    RECORD_ACTION,
    write_handover,
)
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._converged.items import (  # noqa: E402
    merge,
    task_items,
)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "llmfleet.cluster.converged_record"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._run_id = ""
        self._items = {}
        self._failed = set()
        self._handover = None

    def v2_playbook_on_start(self, playbook):
        self._run_id = "%s-%d" % (time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()), os.getpid())

    def _host_of(self, result):
        delegated = (result.result or {}).get("_ansible_delegated_vars") or {}
        return delegated.get("ansible_delegated_host") or result.host.get_name()

    def _gather(self, result, action):
        if action is None:
            return
        args = result.task_fields.get("args") or {}
        merge(
            self._items.setdefault(self._host_of(result), {}),
            task_items(action, args, result.result),
        )

    def v2_runner_on_ok(self, result):
        if isinstance(result.result.get("results"), list):
            return  # a loop: its items were read one by one (v2_runner_item_on_ok)
        self._gather(result, result.task.resolved_action)

    def v2_runner_item_on_ok(self, result):
        self._gather(result, result.task.resolved_action)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if not ignore_errors:
            self._failed.add(result.host.get_name())

    def v2_runner_on_unreachable(self, result):
        self._failed.add(result.host.get_name())

    def v2_playbook_on_task_start(self, task, is_conditional):
        if task.action not in RECORD_ACTION or self._handover is not None:
            return
        if not self.get_option("record"):
            return
        if str(task.args.get("mode", "")) != "record":
            return
        self._handover = tempfile.mkdtemp(prefix="llmfleet-converged-")
        write_handover(self._handover, self._run_id, self._items, sorted(self._failed))
        os.environ[HANDOVER_ENV] = self._handover

    def v2_playbook_on_stats(self, stats):
        if self._handover is not None:
            shutil.rmtree(self._handover, ignore_errors=True)
            os.environ.pop(HANDOVER_ENV, None)
            self._handover = None
