# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Action plugin of config_files: each file's ``src`` template rendered on the controller,
as ansible.builtin.template renders it, then one call of the module for every file."""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible.template import trust_as_template
from ansible.utils.vars import merge_hash
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._ansible_internals import (
    template_vars,
)

MODULE = "llmfleet.cluster.config_files"


class ActionModule(ActionBase):
    """Renders the templates, then runs the module once (no temporary folder on the host)."""

    TRANSFERS_FILES = False

    def render(self, src, dest, task_vars):
        """``src`` found in the role's templates and rendered as ansible.builtin.template does
        (its default Jinja settings: trim_blocks, no lstrip_blocks, newline ``\\n``)."""
        try:
            source = self._find_needle("templates", src)
        except AnsibleError as error:
            raise AnsibleActionFail(f"{dest}: {error}") from error
        template_data = trust_as_template(self._loader.get_text_file_contents(source))
        searchpath = list(task_vars.get("ansible_search_path", []))
        searchpath.extend([self._loader.get_basedir(), os.path.dirname(source)])
        searchpath = [
            path for base in searchpath for path in (os.path.join(base, "templates"), base)
        ]
        variables = task_vars.copy()
        variables.update(
            template_vars(
                path=src,
                fullpath=source,
                dest_path=dest,
                include_ansible_managed="ansible_managed" not in variables,
            )
        )
        templar = self._templar.copy_with_new_env(
            searchpath=searchpath, available_variables=variables
        )
        rendered = templar.template(
            template_data,
            escape_backslashes=False,
            overrides={"trim_blocks": True, "lstrip_blocks": False, "newline_sequence": "\n"},
        )
        if rendered is None:
            return ""
        # What ansible.builtin.template writes when the template renders to a value.
        return rendered if isinstance(rendered, str) else str(rendered)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        files, secrets = [], dict(self._task.args.get("secret_contents") or {})
        for index, given in enumerate(self._task.args.get("files") or []):
            entry = dict(given)
            src = entry.pop("src", None)
            if src is not None:
                if entry.get("content") is not None:
                    raise AnsibleActionFail(f"{entry.get('dest')}: give src or content, not both")
                entry["content"] = self.render(src, entry.get("dest"), task_vars)
            # A file kept out of diffs holds a secret: passed where the module never logs it.
            if not boolean(entry.get("diff", True), strict=False) and "content" in entry:
                secrets[str(index)] = entry.pop("content")
            files.append(entry)
        module_args = {**self._task.args, "files": files, "secret_contents": secrets}
        result = merge_hash(
            result,
            self._execute_module(module_name=MODULE, module_args=module_args, task_vars=task_vars),
        )
        # The rendered files are in the diff (those allowed there), not in the invocation.
        invoked = result.get("invocation", {}).get("module_args", {})
        for entry in invoked.get("files") or []:
            if isinstance(entry, dict) and entry.get("content") is not None:
                entry["content"] = f"({len(entry['content'])} characters)"
        return result
