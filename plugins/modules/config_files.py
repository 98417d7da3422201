#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Ansible module config_files: the folders and files of one service, in one call."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: config_files
short_description: Write the folders and configuration files of one service in one call
version_added: "0.2.0"
author:
  - llmfleet maintainers (!UNKNOWN)
description:
  - Makes sure each folder of O(directories) exists with its owner, group and mode, then that
    each file of O(files) holds its content, owner, group and mode, and reports which changed.
  - One module call for what would be a chain of M(ansible.builtin.file) and
    M(ansible.builtin.template) tasks. A template costs two module calls and two more shell
    commands even when nothing changes; on a run with nothing to change, the calls are what
    takes the time.
  - A file's content is given as O(files[].content), or as O(files[].src), a template the
    action plugin renders on the controller as M(ansible.builtin.template) does (the role's
    C(templates) folder, the same Jinja settings, C(ansible_managed)), so that moving a task
    from M(ansible.builtin.template) to this module rewrites no file.
  - A file whose content differs is written to a temporary file beside it, given its owner,
    group and mode, checked by O(files[].validate) when set, and renamed over the old one;
    a reader sees the old file or the new one, never a part, and a secret never lies
    readable by others.
  - The parent folder of a file must exist, or be one of O(directories).
options:
  directories:
    description: Folders to create (with their missing parents) and give these attributes,
      before any file is written.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The folder.
        type: path
        required: true
      owner:
        description: Its owner (name or number); unset leaves it as it is.
        type: str
      group:
        description: Its group (name or number); unset leaves it as it is.
        type: str
      mode:
        description: Its mode, as M(ansible.builtin.file) takes it (C("0700"), C(u=rwx)).
        type: raw
  secret_contents:
    description:
      - What the files that hold a secret hold, by their place in O(files) (V("0") for the
        first), in place of their O(files[].content). Never logged (the module's invocation
        in the host's journal included), never shown.
      - The action plugin moves O(files[].content) here for a file with O(files[].diff=false).
    type: dict
    default: {}
  files:
    description: Files, written in this order.
    type: list
    elements: dict
    default: []
    suboptions:
      dest:
        description: The file.
        type: path
        required: true
      content:
        description:
          - What the file holds. The action plugin leaves it out of the result's
            C(invocation).
          - Required unless the task gives O(files[].src), which the action plugin renders
            into it.
        type: str
      src:
        description: A template, found and rendered on the controller as
          M(ansible.builtin.template) finds and renders its O(ansible.builtin.template#module:src).
          Mutually exclusive with O(files[].content).
        type: str
      owner:
        description: Its owner (name or number); unset leaves it as it is, or makes a new file
          the connecting user's.
        type: str
      group:
        description: Its group (name or number).
        type: str
      mode:
        description: Its mode, as M(ansible.builtin.file) takes it. Unset, a new file gets
          C(0600).
        type: raw
      validate:
        description: A command that checks the new content before it replaces the file, with
          C(%s) where the temporary file's path goes (C(nft --check --file %s)). Run without a
          shell. A failure leaves the old file and fails the task with the command's output.
        type: str
      diff:
        description: Whether diff mode shows this file's content. Set V(false) for a file
          that holds a secret; its content is then passed in O(secret_contents), kept out of
          every log and output.
        type: bool
        default: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reports what would change and writes nothing (a validation does not run).
  diff_mode:
    support: full
    details: One diff per changed file, except those with O(files[].diff=false).
  idempotent:
    description:
      - When run twice in a row, the second run changes nothing.
    support: full
  platform:
    platforms: posix
seealso:
  - module: ansible.builtin.template
  - module: ansible.builtin.file
"""

EXAMPLES = r"""
- name: Write Ray's environment and unit
  llmfleet.cluster.config_files:
    directories:
      - path: /etc/llmfleet/ray
        owner: root
        group: root
        mode: "0755"
    files:
      - src: ray.env.j2
        dest: /etc/llmfleet/ray/ray.env
        owner: root
        group: root
        mode: "0644"
      - src: llmfleet-ray.service.j2
        dest: /etc/systemd/system/llmfleet-ray.service
        owner: root
        group: root
        mode: "0644"
  register: written
  notify: Restart Ray

- name: Write the firewall's rules, checked by nft first
  llmfleet.cluster.config_files:
    files:
      - src: llmfleet.nft.j2
        dest: /etc/nftables.d/llmfleet.nft
        mode: "0644"
        validate: nft --check --file %s

- name: A file that holds a key, kept out of diffs
  llmfleet.cluster.config_files:
    files:
      - content: "API_KEY={{ api_key }}\n"
        dest: /etc/llmfleet/private/api.env
        mode: "0600"
        diff: false
"""

RETURN = r"""
changed_files:
  description: The files whose content or attributes changed (or would, in check mode), in the
    order of O(files).
  returned: always
  type: list
  elements: str
  sample: [/etc/llmfleet/ray/ray.env]
changed_directories:
  description: The folders created or whose attributes changed.
  returned: always
  type: list
  elements: str
  sample: []
"""

import os  # noqa: E402
import shlex  # noqa: E402
import tempfile  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible.module_utils.common.text.converters import to_bytes, to_text  # noqa: E402

ATTRIBUTES = {"owner": {"type": "str"}, "group": {"type": "str"}, "mode": {"type": "raw"}}
ARGUMENT_SPEC = {
    "directories": {
        "type": "list",
        "elements": "dict",
        "default": [],
        "options": {"path": {"type": "path", "required": True}, **ATTRIBUTES},
    },
    "files": {
        "type": "list",
        "elements": "dict",
        "default": [],
        "options": {
            "dest": {"type": "path", "required": True},
            # Not no_log: that would mask it in every diff. The action plugin moves the content
            # of a file with diff false (one that holds a secret) to secret_contents.
            "content": {"type": "str"},
            "src": {"type": "str"},
            **ATTRIBUTES,
            "validate": {"type": "str"},
            "diff": {"type": "bool", "default": True},
        },
    },
    # Top level: the module logs its invocation on the host (the journal) with a no_log
    # option's value left out, where a no_log suboption of a list is only looked for in the
    # list's text, which escapes a newline and so does not find a file's content.
    "secret_contents": {"type": "dict", "default": {}, "no_log": True},
}
NEW_FILE_MODE = "0600"


def file_args(module, path, entry, default_mode=None):
    """The common file arguments of ``path`` as set_fs_attributes_if_different takes them."""
    mode = entry.get("mode")
    return module.load_file_common_arguments(
        {
            "path": path,
            "owner": entry.get("owner"),
            "group": entry.get("group"),
            "mode": default_mode if mode is None else mode,
        }
    )


def ensure_directory(module, entry):
    """Create the folder when missing and set its attributes; whether anything changed."""
    path = entry["path"]
    changed = not os.path.isdir(path)
    if os.path.exists(path) and changed:
        module.fail_json(msg=f"{path} exists and is not a folder")
    if changed and not module.check_mode:
        os.makedirs(path)
    if module.check_mode and changed:
        return True
    return module.set_fs_attributes_if_different(file_args(module, path, entry), changed)


def read_bytes(path):
    """The file's bytes, or None when there is none."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def validate(module, command, path, dest):
    """Run ``command`` on the temporary file ``path``; fail naming ``dest`` if it refuses."""
    if "%s" not in command:
        module.fail_json(
            msg=f"{dest}: validate must contain %s, where the file's path goes: {command}"
        )
    rc, out, err = module.run_command(shlex.split(command.replace("%s", shlex.quote(path))))
    if rc != 0:
        os.unlink(path)
        module.fail_json(
            msg=f"{dest}: the new content fails `{command}` (exit {rc}); the old file is kept:"
            f" {(err or out).strip()}",
            rc=rc,
            stdout=out,
            stderr=err,
        )


def replace(module, entry, content):
    """Write ``content`` beside the file, with its attributes, validated, then rename it over."""
    dest = entry["dest"]
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(dest)}.", dir=os.path.dirname(dest))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
        # A new file without a mode gets NEW_FILE_MODE; one that exists keeps its own.
        mode = None
        if entry.get("mode") is None:
            mode = NEW_FILE_MODE if not os.path.exists(dest) else os.stat(dest).st_mode & 0o7777
        module.set_fs_attributes_if_different(file_args(module, tmp, entry, mode), False)
        if entry.get("validate"):
            validate(module, entry["validate"], tmp, dest)
        os.replace(tmp, dest)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def ensure_file(module, entry, text, created_directories):
    """Make the file hold ``text`` and its attributes; (changed, diff or None)."""
    dest = entry["dest"]
    if text is None:
        module.fail_json(msg=f"{dest}: give the file's content (content, or src with the action)")
    folder = os.path.dirname(dest)
    if not os.path.isdir(folder) and not (module.check_mode and folder in created_directories):
        module.fail_json(msg=f"{dest}: its folder {folder} does not exist")
    if os.path.isdir(dest):
        module.fail_json(msg=f"{dest} is a folder, not a file")
    content = to_bytes(text, errors="surrogate_or_strict")
    before = read_bytes(dest)
    changed = before != content
    if changed and not module.check_mode:
        replace(module, entry, content)
    if before is not None or not module.check_mode:
        changed = module.set_fs_attributes_if_different(file_args(module, dest, entry), changed)
    diff = None
    if changed and entry["diff"] and before != content:
        diff = {
            "before_header": dest,
            "after_header": dest,
            "before": to_text(before or b"", errors="surrogate_or_strict"),
            "after": to_text(content, errors="surrogate_or_strict"),
        }
    return changed, diff


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    changed_directories = [
        entry["path"] for entry in module.params["directories"] if ensure_directory(module, entry)
    ]
    created = {os.path.normpath(path) for path in changed_directories}
    secrets = module.params["secret_contents"]
    changed_files, diffs = [], []
    for index, entry in enumerate(module.params["files"]):
        text = secrets.get(str(index), entry["content"])
        changed, diff = ensure_file(module, entry, text, created)
        if changed:
            changed_files.append(entry["dest"])
        if diff is not None:
            diffs.append(diff)
    result = {
        "changed": bool(changed_files or changed_directories),
        "changed_files": changed_files,
        "changed_directories": changed_directories,
    }
    if module._diff:
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
