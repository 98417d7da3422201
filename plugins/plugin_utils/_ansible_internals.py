# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""The collection's one seam onto ansible-core's private modules (controller side).

Every import of an ansible-core module that is not a public plugin API lives here, with the
ansible-core versions it is known for and a clear error naming the running version when it
is gone (tests/quality/test_gates.py holds that no other plugin imports one). The CLI's own
seam is src/llmfleet/host_access.py (the inventory and variables as ansible-playbook sees
them).
"""

from __future__ import annotations

from ansible.errors import AnsibleError
from ansible.release import __version__ as ANSIBLE_CORE_VERSION

try:  # ansible-core 2.19 (meta/runtime.yml): where ansible.builtin.template takes them from.
    from ansible._internal._templating._template_vars import generate_ansible_template_vars
except ImportError:  # pragma: no cover - only on an ansible-core this collection does not support
    generate_ansible_template_vars = None


def template_vars(path, fullpath, dest_path, include_ansible_managed):
    """The variables ansible.builtin.template adds to a template's (``ansible_managed``,
    ``template_path``, ``template_fullpath``...), so that the collection's templates render
    the same through llmfleet.cluster.config_files."""
    if generate_ansible_template_vars is None:
        raise AnsibleError(
            "llmfleet.cluster.config_files needs ansible-core's template variables"
            " (ansible._internal._templating._template_vars), which ansible-core {0} lacks;"
            " this collection supports ansible-core 2.19 (meta/runtime.yml)".format(
                ANSIBLE_CORE_VERSION
            )
        )
    return generate_ansible_template_vars(
        path=path,
        fullpath=fullpath,
        dest_path=dest_path,
        include_ansible_managed=include_ansible_managed,
    )
