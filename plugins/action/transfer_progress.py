# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Action plugin of transfer_progress: the job's status file found where the job runs.

A job on the target (a copy the target pulls): the module does everything there, with the
async folder of the target's shell (as async_status finds it). A job on the controller
(``job_on_controller``: a push to the target, started by a task delegated to localhost): the
controller reads the job's status, and the module only measures the target's bytes."""

from __future__ import annotations

import os

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible.utils.vars import merge_hash
from ansible_collections.llmfleet.cluster.plugins.module_utils._node.transfer_progress import (
    finish,
    job_state,
    remove_job,
)

MODULE = "llmfleet.cluster.transfer_progress"


class ActionModule(ActionBase):
    """Runs transfer_progress, reading a controller job's status on the controller."""

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        on_controller = boolean(args.pop("job_on_controller", False), strict=False)
        if not on_controller:
            if not args.get("async_dir"):
                async_dir = self.get_shell_option("async_dir", default="~/.ansible_async")
                args["async_dir"] = self._remote_expand_user(async_dir)
            return merge_hash(
                result,
                self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars),
            )
        jid = str(args.pop("jid", "") or "")
        async_dir = os.path.expanduser(str(args.pop("async_dir", "") or "~/.ansible_async"))
        cleanup = boolean(args.pop("cleanup", True), strict=False)
        label = str(args.get("label") or "")
        try:
            finished, job = job_state(async_dir, jid)
        except (LookupError, ValueError) as error:
            return {**result, "failed": True, "finished": True, "msg": f"{error} on the controller"}
        # The bytes on the target: over the interval while the job runs, at once when done.
        measured = self._execute_module(
            module_name=MODULE,
            module_args={**args, "wait": 0} if finished else args,
            task_vars=task_vars,
        )
        if measured.get("failed"):
            return merge_hash(result, measured)
        if not finished:
            finished, job = job_state(async_dir, jid)
        measured = {**result, **measured, "finished": finished, "changed": False}
        if not finished:
            return measured
        if cleanup:
            remove_job(async_dir, jid)
        measured, failure = finish(measured, job, label, with_diff=self._task.diff)
        return {**measured, "failed": True, "msg": failure} if failure else measured
