#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Ansible module deployment_history: the history of what a node serves, kept on the node."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: deployment_history
short_description: Keep on the node the history of what it serves (each up, upgrade and rollback)
version_added: "0.1.0"
author:
  - llmfleet maintainers (!UNKNOWN)
description:
  - Reads, and with O(state=recorded) appends to, a JSON file on a serving node that lists every
    switch of what the node serves (C(up), C(upgrade), C(rollback)), oldest first, with its
    outcome, and each C(heal) of the serving probe (role vllm_server's C(llmfleet-vllm-probe),
    which appends it itself; what serves stays the same, the reason says what it healed).
  - 'The file holds C({"version": 1, "entries": [{"time", "action", "from", "to", "outcome",
    "reason"}, ...]}). C(from) and C(to) say what is served, for example C({"image":
    "vllm/vllm-openai:v0.11.0@sha256:<64 hex>", "profile": "qwen3_32b", "model_revision":
    "<commit>"}) (C(image) null for a native deployment); C(from) is null where nothing was
    served before. C(time) is when the entry was written, in UTC (C(2025-11-24T07:13:00Z)).'
  - 'What the node serves now (RV(current)) is read back from the entries, newest first: an entry
    that went V(ok) serves its C(to); one V(rolled back) serves its C(from) again; one that
    V(failed) is passed over, and when it is the newest, what runs is unknown
    (RV(current_uncertain)).'
  - The file is written only when an entry is appended, atomically, mode C(0644), its missing
    parent folders created with mode C(0755). A file that is not such a history fails
    O(state=read) and is replaced, with a warning, by O(state=recorded).
options:
  path:
    description: The history file.
    type: path
    default: /var/lib/llmfleet/history.json
  state:
    description:
      - V(read) reads the history and changes nothing.
      - V(recorded) appends an entry (O(action), O(from_state), O(to_state), O(outcome),
        O(reason)).
    type: str
    choices: [read, recorded]
    default: read
  action:
    description:
      - What switched what the node serves. Required with O(state=recorded).
      - V(heal) is the serving probe's record of a restart that healed what serves.
    type: str
    choices: [up, upgrade, rollback, heal]
  from_state:
    description:
      - What was served before (a mapping of text to text or null, for example C(image),
        C(profile) and C(model_revision)).
      - When omitted, what the history says the node serves (RV(current) before the entry;
        null in the first entry).
    type: dict
  to_state:
    description:
      - What is served after the switch, a mapping like O(from_state). Required with
        O(state=recorded).
    type: dict
  outcome:
    description:
      - How the switch ended. V(rolled back) means O(from_state) runs again; V(failed) that what
        runs is unknown.
    type: str
    choices: [ok, rolled back, failed]
    default: ok
  reason:
    description: Why, in a sentence (what failed, why it was rolled back).
    type: str
  only_if_different:
    description:
      - With O(state=recorded), append nothing when the node already serves O(to_state)
        (RV(current)) and O(outcome=ok); the entry is appended when the newest entry failed (what
        ran was unknown).
      - What C(llmfleet up) sets on every run, so that a second run records nothing.
    type: bool
    default: false
  keep_entries:
    description: The most entries the file keeps; the oldest beyond it are dropped when an entry
      is appended. At least 1.
    type: int
    default: 200
  keep_images:
    description: The most images RV(images_to_keep) lists. At least 1.
    type: int
    default: 3
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reads the file and computes the entry and what it returns as in a normal run, and
      writes nothing.
  diff_mode:
    support: full
    details: The history file's text before and after.
  idempotent:
    description:
      - When run twice in a row, the second run changes nothing.
    support: partial
    details: V(read) never changes anything. V(recorded) appends an entry on each run, unless
      O(only_if_different=true) and the node already serves O(to_state).
  platform:
    platforms: posix
notes:
  - P(llmfleet.cluster.images_to_prune#filter) takes RV(images_to_keep) to find the other images
    of the same repositories, which can be removed.
"""

EXAMPLES = r"""
- name: Record what llmfleet up deployed (nothing when it already runs)
  llmfleet.cluster.deployment_history:
    state: recorded
    action: up
    to_state:
      image: "{{ vllm_server_image }}"
      profile: "{{ vllm_server_profile }}"
      model_revision: "{{ model_revision }}"
    only_if_different: true

- name: Record an upgrade that was rolled back
  llmfleet.cluster.deployment_history:
    state: recorded
    action: upgrade
    from_state: "{{ history.current }}"
    to_state: "{{ upgrade_to }}"
    outcome: rolled back
    reason: the new image did not answer /health in 600 s

- name: Read what the node serves, and which images to keep
  llmfleet.cluster.deployment_history:
  register: history

- name: Show them
  ansible.builtin.debug:
    msg: "{{ history.current }} (keep {{ history.images_to_keep | join(', ') }})"
"""

RETURN = r"""
history:
  description: The entries of the file, oldest first (after the entry appended, if any).
  returned: always
  type: list
  elements: dict
  contains:
    time:
      description: When the entry was written, in UTC, to the second.
      type: str
      sample: "2025-11-24T07:13:00Z"
    action:
      description: V(up), V(upgrade), V(rollback) or V(heal).
      type: str
      sample: upgrade
    from:
      description: What was served before; null where nothing was.
      type: dict
      sample: {"image": "vllm/vllm-openai:v0.10.2@sha256:<64 hex>", "profile": "qwen3_32b",
        "model_revision": "<commit>"}
    to:
      description: What was served after.
      type: dict
      sample: {"image": "vllm/vllm-openai:v0.11.0@sha256:<64 hex>", "profile": "qwen3_32b",
        "model_revision": "<commit>"}
    outcome:
      description: V(ok), V(rolled back) or V(failed).
      type: str
      sample: ok
    reason:
      description: Why, as recorded; null where none was given.
      type: str
      sample: null
entry:
  description: The entry appended; null when none was (O(state=read), or O(only_if_different)
    and nothing changed).
  returned: always
  type: dict
  sample: {"time": "2025-11-24T07:13:00Z", "action": "up", "from": null,
    "to": {"image": null, "profile": "qwen3_32b", "model_revision": "<commit>"},
    "outcome": "ok", "reason": null}
current:
  description: What the node serves, from the newest entry that says (see the description);
    null when the file is missing or empty.
  returned: always
  type: dict
  sample: {"image": "vllm/vllm-openai:v0.11.0@sha256:<64 hex>", "profile": "qwen3_32b",
    "model_revision": "<commit>"}
current_uncertain:
  description: The newest entry failed, so what runs is unknown; RV(current) is what ran before
    it.
  returned: always
  type: bool
  sample: false
images_to_keep:
  description: The distinct images of RV(current), then of the C(to) and C(from) of the entries
    that went ok, newest first; at most O(keep_images). Native deployments (no image) add none.
  returned: always
  type: list
  elements: str
  sample: ["vllm/vllm-openai:v0.11.0@sha256:<64 hex>", "vllm/vllm-openai:v0.10.2@sha256:<64 hex>"]
path:
  description: The history file.
  returned: always
  type: str
  sample: /var/lib/llmfleet/history.json
"""

import os  # noqa: E402
from datetime import datetime, timezone  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.llmfleet.cluster.plugins.module_utils._node.deployment_history import (  # noqa: E402
    ACTIONS,
    EXPECTED,
    OUTCOMES,
    HistoryError,
    appended,
    current_state,
    images_to_keep,
    new_entry,
    parse_history,
    render,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._node.files import (  # noqa: E402
    file_diff,
    write_atomically,
)

ARGUMENT_SPEC = {
    "path": {"type": "path", "default": "/var/lib/llmfleet/history.json"},
    "state": {"type": "str", "choices": ["read", "recorded"], "default": "read"},
    "action": {"type": "str", "choices": list(ACTIONS)},
    "from_state": {"type": "dict"},
    "to_state": {"type": "dict"},
    "outcome": {"type": "str", "choices": list(OUTCOMES), "default": "ok"},
    "reason": {"type": "str"},
    "only_if_different": {"type": "bool", "default": False},
    "keep_entries": {"type": "int", "default": 200},
    "keep_images": {"type": "int", "default": 3},
}
FILE_MODE = "0644"


def utc_now():
    """Now, in UTC: the time of an entry (tests replace it)."""
    return datetime.now(timezone.utc)


def read_text(module, path):
    """``(text, why)``: the file's text (None when there is none), and why it is no text
    (None when it is)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read(), None
    except FileNotFoundError:
        return None, None
    except UnicodeDecodeError as error:
        return "", f"it is not UTF-8 text ({error})"
    except OSError as error:
        module.fail_json(msg=f"cannot read the deployment history {path}: {error}")
    return None, None


def read_entries(module, path, text, unreadable, recording):
    """The entries of the file; a file that is no history fails a read and is replaced when
    recording."""
    try:
        if unreadable:
            raise HistoryError(unreadable)
        return parse_history(text)
    except HistoryError as error:
        if not recording:
            module.fail_json(
                msg=f"{path} is not a deployment history: {error}; expected {EXPECTED}"
            )
        module.warn(f"{path} is not a deployment history ({error}): it is replaced by a new one")
    return []


def record(module, entries):
    """The entry to append, or None when O(only_if_different) finds it already served."""
    params = module.params
    current, uncertain = current_state(entries)
    if (
        params["only_if_different"]
        and params["outcome"] == "ok"
        and not uncertain
        and current == params["to_state"]
    ):
        return None
    try:
        return new_entry(
            utc_now(),
            params["action"],
            current if params["from_state"] is None else params["from_state"],
            params["to_state"],
            outcome=params["outcome"],
            reason=params["reason"],
        )
    except HistoryError as error:
        module.fail_json(msg=f"cannot record in {module.params['path']}: {error}")
    return None


def main():
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        required_if=[("state", "recorded", ("action", "to_state"))],
        supports_check_mode=True,
    )
    params = module.params
    path, recording = params["path"], params["state"] == "recorded"
    for name in ("keep_entries", "keep_images"):
        if params[name] < 1:
            module.fail_json(msg=f"{name} is {params[name]}: it is at least 1")
    before, unreadable = read_text(module, path)
    entries = read_entries(module, path, before, unreadable, recording)
    entry = record(module, entries) if recording else None
    after = before or ""
    if entry is not None:
        entries = appended(entries, entry, params["keep_entries"])
        after = render(entries)
        if not module.check_mode:
            write_atomically(module, path, after)
    changed = entry is not None
    if recording and os.path.exists(path):
        changed = module.set_mode_if_different(path, FILE_MODE, changed)
    current, uncertain = current_state(entries)
    result = {
        "changed": changed,
        "path": path,
        "history": entries,
        "entry": entry,
        "current": current,
        "current_uncertain": uncertain,
        "images_to_keep": images_to_keep(current, entries, params["keep_images"]),
    }
    if module._diff:
        result["diff"] = file_diff(path, before, after)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
