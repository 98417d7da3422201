# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Action plugin of converged_state: the digest of the run's inputs computed on the
controller, and, for a record, what the run managed on the host, handed over by the callback
converged_record.

``mode: inputs`` runs nothing on the host: it returns the digest, which a run's first play
keeps for its last (the roles' own facts, set as the run goes, are not inputs)."""

from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible.utils.vars import merge_hash
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._converged.handover import (
    read_handover,
)
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._converged.inputs import (
    ansible_versions,
    collection_root,
    files_digest,
    input_parts,
    is_input,
    parts_digest,
    role_prefixes,
)
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._converged.items import KINDS

MODULE = "llmfleet.cluster.converged_state"


class ActionModule(ActionBase):
    """Runs converged_state with the inputs' digest and, to record, the run's items."""

    def _input_parts(self, task_vars):
        root = collection_root()
        prefixes = role_prefixes(root)
        templar = self._templar.copy_with_new_env(available_variables=task_vars)
        values = {}
        for name in sorted(task_vars):
            if not is_input(name, prefixes):
                continue
            try:
                values[name] = templar.template(task_vars[name])
            except Exception as error:  # the run reports it where it reads the value
                values[name] = "<%s>" % type(error).__name__
        return input_parts(
            values,
            task_vars.get("groups") or {},
            task_vars.get("group_names") or [],
            files_digest(root),
            ansible_versions(),
        )

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = dict(self._task.args)
        if args.get("mode") != "forget" and not args.get("inputs"):
            args["input_parts"] = self._input_parts(task_vars)
            args["inputs"] = parts_digest(args["input_parts"])
        if args.get("mode") == "inputs":
            return {
                **result,
                "changed": False,
                "converged": False,
                "changes": [],
                "run": "",
                "inputs": args["inputs"],
                "input_parts": args["input_parts"],
            }
        if args.get("mode") == "record":
            handed = read_handover(task_vars.get("inventory_hostname", ""))
            skipped = None
            if handed is None:
                skipped = "no record: the callback llmfleet.cluster.converged_record is not enabled"
            elif handed.get("failed_hosts"):
                skipped = "no record: the run failed on " + ", ".join(handed["failed_hosts"])
            if skipped:
                return {
                    **result,
                    "changed": False,
                    "converged": False,
                    "changes": [skipped],
                    "run": "",
                    "inputs": args["inputs"],
                    "msg": skipped,
                }
            items = handed.get("items") or {}
            args.setdefault("items", {kind: items.get(kind, []) for kind in KINDS})
            args.setdefault("probes", items.get("probes", []))
            args.setdefault("run_id", handed.get("run", ""))
        return merge_hash(
            result, self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars)
        )
