# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Load the Jinja filter and test plugins that the roles use once, in the controller, before
Ansible forks a worker per task and host.

ansible-core looks a collection filter up by importing *every* filter file of that
collection (``Jinja2Loader.get_with_context`` walks the package), and it does so in the
worker process forked for the task, whose plugin cache dies with it. A task that templates
one ``llmfleet.cluster`` filter therefore imported all of the collection's filter files and
the module_utils behind them again, on every host: on the lab's two cores that was a third
of the workers' CPU in a no-op ``site.yml`` run. Loaded here, in the process the workers
are forked from, the plugins are inherited and each lookup is a dictionary hit.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: preload_filters
type: aggregate
short_description: Load the collection's filter and test plugins once, before the workers fork
description:
  - ansible-core imports every filter file of a collection to find one of its filters, in
    the worker process of each task and host, and forgets them when that worker exits.
  - This callback loads the filter and test plugins of the collections named in
    O(collections) (and ansible.builtin's) in the controller process when the playbook
    starts, so that every forked worker inherits them.
  - It changes no result and prints nothing; a collection that fails to load is left to
    the task that uses it, which reports the error as before.
author:
  - llmfleet maintainers (!UNKNOWN)
version_added: "0.1.0"
requirements:
  - Enabled in C(callbacks_enabled) (the collection's C(ansible.cfg) does).
options:
  collections:
    description: The collections whose filter and test plugins are loaded.
    type: list
    elements: str
    default: [llmfleet.cluster, community.general]
    ini:
      - section: callback_preload_filters
        key: collections
    env:
      - name: LLMFLEET_PRELOAD_FILTER_COLLECTIONS
"""

# Ansible documents a plugin with the strings above its imports (the modules' layout).
from ansible.plugins.callback import CallbackBase  # noqa: E402
from ansible.plugins.loader import filter_loader, test_loader  # noqa: E402

# A name that is in no collection: looking it up makes the loader import every filter or
# test file of the collection (which is the point) and then find nothing.
_PROBE = "__llmfleet_preload_probe__"


def preload(collections):
    """Import the filter and test plugins of ``collections`` and ansible.builtin's into the
    loaders' caches of this process. Returns the collections that failed, with the reason."""
    failures = {}
    for loader in (filter_loader, test_loader):
        for collection in ["ansible.builtin", *collections]:
            try:
                loader.get(f"{collection}.{_PROBE}")
            except Exception as error:  # the task that uses the plugin reports the error
                failures[f"{loader.type} {collection}"] = str(error)
    return failures


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "llmfleet.cluster.preload_filters"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook):
        for what, reason in preload(self.get_option("collections")).items():
            self._display.vvv(f"preload_filters: {what} not preloaded: {reason}")
