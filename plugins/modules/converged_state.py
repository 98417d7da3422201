#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Ansible module converged_state: record what a full run left on a host, or tell whether
the host is still so."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: converged_state
short_description: Record what a full run left on a host, or say whether it is still so
version_added: "0.3.0"
author:
  - llmfleet maintainers (!UNKNOWN)
description:
  - "With O(mode=record) (the last play of a C(site.yml) run that went well): writes O(path),
    owner-only, with the digest of the run's inputs (O(inputs)), the host's boot ID, the state
    of every item the run managed (O(items): each file's type, mode, owner and SHA-256, or
    size and mtime above 16 MiB; each systemd unit's load, unit-file and active state and,
    while active, its invocation ID; each container's ID, status and restart count; each
    Debian package's version; each kernel setting's value) and the readiness checks the run
    waited on (O(probes))."
  - "With O(mode=compare) (C(llmfleet up) before it walks C(site.yml)): reads the record back
    and says, in RV(changes), each reason the host is not as that run left it - other inputs,
    a reboot, an item whose state differs, a readiness check that does not pass now. No
    change and RV(converged) true means a full run would change nothing here."
  - "With O(mode=compare) and other inputs, the lines after the inputs' line say what else
    changed (a reboot, an item's state, a readiness check): without them, a walk limited to
    what the changed variables reach (O(extends)) is sound."
  - A record made with the same O(inputs) as the one it replaces keeps that one's items too,
    since the same code given the same values manages the same things, though a task that
    found its work done skipped this time (what a first run installs); so a second full run
    with nothing to do leaves the record as it was.
  - The action plugin computes O(inputs) on the controller and, with O(mode=record), takes
    O(items) and O(probes) from the run's own task results (the callback
    C(llmfleet.cluster.converged_record)), so that no role lists what it manages twice.
  - Standard library only on the host; C(systemctl), the container engines and
    C(dpkg-query) are asked only for the items of their kind, and a tool that is missing
    reads as the item being absent.
options:
  mode:
    description:
      - Write the record, or compare the host with it.
      - V(inputs) only computes the digest of the run's inputs on the controller and returns it
        (the first play of C(site.yml)); nothing runs on the host.
      - V(forget) removes the record (C(llmfleet down)), since what it recorded is gone.
    type: str
    choices: [inputs, record, compare, forget]
    required: true
  path:
    description:
      - The record's file.
      - Unset, C(/var/lib/llmfleet/converged.json) for root, and for another user (a client
        host reached without sudo, a Mac) C(llmfleet/converged.json) in its
        C($XDG_STATE_HOME), by default C(~/.local/state).
    type: path
  inputs:
    description:
      - The digest of what the run was given for this host (the collection's files, the
        versions of Ansible, the host's variables and groups). The action plugin computes it
        when it is not given.
    type: str
  input_parts:
    description:
      - The digest of each part of O(inputs) by name (C(var:<name>) for each variable,
        C(files), C(groups), C(group_names), C(versions)), so that a comparison names the
        parts that changed (RV(changed_inputs)) without a value. The action plugin computes it
        with O(inputs).
    type: dict
    default: {}
  run_id:
    description: The run that recorded (its start time, and the controller's process).
    type: str
  extends:
    description:
      - With O(mode=record), the run whose record this one extends. C(llmfleet up) walks only
        the tags a change of variables reaches when the comparison found nothing else changed
        on any host since that run; the record then keeps that run's items and readiness
        checks too (what the walk skipped is as that run left it). A record of another run is
        not extended.
    type: str
  items:
    description:
      - What the run managed on the host, by kind; the action plugin takes it from the run's
        results when not given. Only with O(mode=record).
    type: dict
    default: {}
    suboptions:
      files:
        description: Paths the run wrote (or removed).
        type: list
        elements: str
        default: []
      units:
        description: systemd units the run installed, enabled or started.
        type: list
        elements: str
        default: []
      containers:
        description: Containers the run created (C(name) and C(engine)).
        type: list
        elements: dict
        default: []
      packages:
        description: Debian packages the run installed or removed.
        type: list
        elements: str
        default: []
      sysctls:
        description: Kernel settings the run set.
        type: list
        elements: str
        default: []
  probes:
    description:
      - Readiness checks the run waited on (M(llmfleet.cluster.service_wait)'s C(url), or
        its C(command), C(pattern) and C(min_matches)), passed again by O(mode=compare).
    type: list
    elements: dict
    default: []
  proc_sys:
    description: Where the kernel settings are read (tests point it at a folder).
    type: path
    default: /proc/sys
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: With O(mode=record), reports whether the record would change and writes nothing.
  diff_mode:
    support: none
  idempotent:
    description:
      - When run twice in a row, the second run changes nothing.
    support: full
    details: A record is reported changed only when what it says of the host changes, not
      for a new run's ID.
  platform:
    platforms: posix
notes:
  - What this cannot see is listed in the collection's C(docs/operate.md) (a Hub branch or an
    image tag that moved upstream, a hand's change to what a role sets with a command).
seealso:
  - module: llmfleet.cluster.service_wait
"""

EXAMPLES = r"""
- name: Record what this run left on the host
  llmfleet.cluster.converged_state:
    mode: record

- name: Tell whether the host is as the last full run left it
  llmfleet.cluster.converged_state:
    mode: compare
  register: converged

- name: Forget the record (what it recorded is gone)
  llmfleet.cluster.converged_state:
    mode: forget
"""

RETURN = r"""
converged:
  description: Whether the host is as the last full run left it (O(mode=compare)), or whether
    a record was written (O(mode=record)).
  returned: always
  type: bool
  sample: true
changes:
  description: Why the host is not as the last full run left it, a line each.
  returned: always
  type: list
  elements: str
  sample:
    - "/etc/llmfleet/firewall.nft: its content changed"
    - "unit llmfleet-vllm.service: restarted since"
changed_inputs:
  description: With O(mode=compare), the parts of the inputs that differ from the record's
    (C(var:<name>), C(files), C(groups), C(group_names), C(versions); C(*) for a record that
    has no parts); empty when the inputs are the same.
  returned: always
  type: list
  elements: str
  sample: ["var:vllm_server_profile_overrides"]
run:
  description: The run the record comes from (empty without a record).
  returned: always
  type: str
  sample: 20261201T190512Z-4242
inputs:
  description: The digest of the run's inputs that was compared or recorded.
  returned: always
  type: str
  sample: 3f0c2a...
"""

import json  # noqa: E402
import os  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.llmfleet.cluster.plugins.module_utils._node.converged import (  # noqa: E402
    ITEM_KINDS,
    RecordError,
    boot_id,
    compare,
    inputs_changed,
    make_record,
    merged_items,
    parse_record,
    probe_failures,
    read_states,
    unique_probes,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._node.files import (  # noqa: E402
    write_atomically,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._node.service_wait import (  # noqa: E402
    Probe,
)

ARGUMENT_SPEC = {
    "mode": {
        "type": "str",
        "choices": ["inputs", "record", "compare", "forget"],
        "required": True,
    },
    "path": {"type": "path"},
    "inputs": {"type": "str"},
    "input_parts": {"type": "dict", "default": {}},
    "run_id": {"type": "str"},
    "extends": {"type": "str"},
    "items": {
        "type": "dict",
        "default": {},
        "options": {
            **{
                kind: {"type": "list", "elements": "str", "default": []}
                for kind in ITEM_KINDS
                if kind != "containers"
            },
            "containers": {"type": "list", "elements": "dict", "default": []},
        },
    },
    "probes": {"type": "list", "elements": "dict", "default": []},
    "proc_sys": {"type": "path", "default": "/proc/sys"},
}
PROBE_KEYS = ("url", "command", "pattern", "min_matches")
ROOT_RECORD = "/var/lib/llmfleet/converged.json"


def _record_path(params):
    if params["path"]:
        return params["path"]
    if os.geteuid() == 0:
        return ROOT_RECORD
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.environ.get("HOME") or "/", ".local", "state"
    )
    return os.path.join(state, "llmfleet", "converged.json")


def _forget(module, path):
    if not os.path.exists(path):
        return False
    if not module.check_mode:
        os.remove(path)
    return True


def _runner(module):
    def run(argv):
        if module.get_bin_path(argv[0]) is None:
            return 127, "", "%s: not found" % argv[0]
        return module.run_command(argv, environ_update={"LC_ALL": "C"})

    return run


def _read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return parse_record(handle.read())
    except FileNotFoundError:
        return None


def _probe_spec(spec):
    """A readiness check as the record keeps it: the keys a Probe takes, those set."""
    return {key: spec[key] for key in PROBE_KEYS if spec.get(key) is not None}


def _compare(module, run):
    params = module.params
    try:
        record = _read(params["path"])
    except (RecordError, OSError) as error:
        return {
            "converged": False,
            "changes": ["%s: %s" % (params["path"], error)],
            "changed_inputs": [],
            "run": "",
        }
    if record is None:
        return {
            "converged": False,
            "changes": ["no record of a full run"],
            "changed_inputs": [],
            "run": "",
        }
    states = read_states(run, record.get("items", {}), params["proc_sys"])
    changes = compare(record, params["inputs"], boot_id(), states, params["input_parts"])
    changed_inputs = inputs_changed(record, params["inputs"], params["input_parts"])
    # The checks take seconds: only when the rest is as it was (other inputs aside).
    if len(changes) == bool(changed_inputs):
        changes += probe_failures(
            record.get("probes", []), lambda spec: Probe(**_probe_spec(spec)).check(run)
        )
    return {
        "converged": not changes,
        "changes": changes,
        "changed_inputs": changed_inputs,
        "run": record.get("run", ""),
    }


def _record(module, run):
    params = module.params
    try:
        before = _read(params["path"])
    except (RecordError, OSError):
        before = None
    items = {kind: params["items"].get(kind) or [] for kind in ITEM_KINDS}
    probes = [_probe_spec(spec) for spec in params["probes"]]
    if before is not None and (
        before.get("inputs") == params["inputs"]
        or (params["extends"] and before.get("run") == params["extends"])
    ):
        # The same inputs, the same code: what an earlier run of them managed is managed
        # still, though a task that found it done skipped this time (a first run's install).
        # Or a walk of what a change of variables reaches, from that run's state: what it
        # did not walk is as that run left it.
        items = merged_items(before.get("items") or {}, items)
        probes = (before.get("probes") or []) + probes
    probes = unique_probes(probes)
    record = make_record(
        params["run_id"] or "",
        inputs=params["inputs"],
        boot=boot_id(),
        items=items,
        states=read_states(run, items, params["proc_sys"]),
        probes=probes,
        input_parts=params["input_parts"],
    )
    changed = before is None or {**before, "run": ""} != {**record, "run": ""}
    if not module.check_mode:
        write_atomically(module, params["path"], json.dumps(record, indent=1, sort_keys=True))
        module.set_mode_if_different(params["path"], "0600", False)
    return changed, {"converged": True, "changes": [], "changed_inputs": [], "run": record["run"]}


def main():
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        required_if=[("mode", "record", ["inputs"]), ("mode", "compare", ["inputs"])],
        supports_check_mode=True,
    )
    run = _runner(module)
    module.params["path"] = _record_path(module.params)
    if module.params["mode"] == "inputs":
        module.fail_json(msg="mode=inputs is computed by the action plugin, on the controller")
    if module.params["mode"] == "forget":
        changed = _forget(module, module.params["path"])
        module.exit_json(
            changed=changed, converged=False, changes=[], changed_inputs=[], run="", inputs=""
        )
    if module.params["mode"] == "record":
        changed, result = _record(module, run)
    else:
        changed, result = False, _compare(module, run)
    module.exit_json(changed=changed, inputs=module.params["inputs"], **result)


if __name__ == "__main__":
    main()
