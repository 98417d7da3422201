#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Ansible module transfer_progress: a background transfer's bytes, and its result once done."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: transfer_progress
short_description: Follow a transfer run as an async job, with its bytes, to its result
version_added: "0.1.0"
author:
  - llmfleet maintainers (!UNKNOWN)
description:
  - "Waits up to O(wait) seconds for the Ansible async job O(jid) (a task run with C(async) and
    C(poll: 0): a download, an rsync) to finish, then measures what its destination O(path)
    holds: the bytes of every file under it, partial files included, and the rate at which
    they grew during the wait."
  - "Meant for a task that repeats it with C(until) the job finishes, so that every attempt
    says how far the transfer is (RV(progress), e.g. C(41.2 GB of 115.0 GB (36%), 412.0 MB/s)):
    C(llmfleet up) shows that line on each attempt; C(ansible-playbook) shows it with C(-vv)."
  - Once the job is done, the job's own result is RV(job), its C(changed) and C(diff) are this
    task's, and a job that failed fails this task with the job's message and the end of its
    C(stderr).
options:
  jid:
    description:
      - The async job's id (C(ansible_job_id) of the task that started it).
      - Without it, the module only measures (RV(finished) is false), ending the wait early once
        the bytes under O(path) grew to O(total_bytes).
    type: str
  job_on_controller:
    description:
      - The job runs on the controller (a push to this host, started by a task delegated to
        C(localhost)); its status is read there and the bytes here.
    type: bool
    default: false
  async_dir:
    description:
      - Where the job's status file is. Unset, the C(async_dir) shell option of this host
        (C(ansible_async_dir), as M(ansible.builtin.async_status) finds it), or
        C(~/.ansible_async) on the controller for O(job_on_controller).
    type: str
  path:
    description:
      - The file or folder the transfer writes.
    type: path
    required: true
  total_bytes:
    description:
      - The bytes O(path) holds once the transfer is done (the model's size, say). The
        percentage is of this, and stops at 100.
    type: int
    required: true
  wait:
    description:
      - Seconds to wait for the job before measuring and returning (the interval between two
        progress lines).
    type: float
    default: 10
  label:
    description:
      - What the progress line starts with (the transfer's name).
    type: str
    default: ""
  cleanup:
    description:
      - Remove the job's status file once the job is done and its result read.
    type: bool
    default: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
attributes:
  check_mode:
    support: full
    details: Read-only (but for O(cleanup)); follows a job started in check mode the same way.
  action:
    support: full
    details: The action plugin finds the job's status file (on this host or the controller).
  async:
    support: none
  bypass_host_loop:
    support: none
  diff_mode:
    support: full
    details: The finished job's diff, when it made one.
  idempotent:
    description:
      - When run twice in a row, the second run changes nothing.
    support: full
    details: Changes nothing by itself; its C(changed) is the finished job's.
  platform:
    platforms: posix
notes:
  - The bytes counted are all those under O(path), so a folder that already held most of what
    the transfer brings starts near 100%, since the line says how much of the whole is in place.
seealso:
  - module: ansible.builtin.async_status
    description: The job's status alone, without the bytes.
"""

EXAMPLES = r"""
- name: Pull the model with rsync in the background
  ansible.builtin.command:
    argv: [rsync, --archive, --partial, "rsync://source/model/", /srv/models/m/]
  async: 14400
  poll: 0
  register: __copy_job
  changed_when: true

- name: Wait for the copy, saying how far it is every 10 seconds
  llmfleet.cluster.transfer_progress:
    jid: "{{ __copy_job.ansible_job_id }}"
    path: /srv/models/m
    total_bytes: 122406567936
    label: copy from spark-1
  register: __copy
  until: __copy.finished
  retries: 1440
  delay: 0

- name: Push the model from the controller to the first Spark in the background
  ansible.builtin.command:
    argv: [rsync, --archive, --partial, /srv/cache/m/, "nvidia@spark-1:/srv/models/m/"]
  delegate_to: localhost
  async: 14400
  poll: 0
  register: __push_job
  changed_when: true

- name: Wait for the push, with the bytes in place on the Spark
  llmfleet.cluster.transfer_progress:
    jid: "{{ __push_job.ansible_job_id }}"
    job_on_controller: true
    path: /srv/models/m
    total_bytes: 122406567936
    label: push from the controller
  register: __push
  until: __push.finished
  retries: 1440
  delay: 0
"""

RETURN = r"""
finished:
  description: Whether the job is done.
  returned: always
  type: bool
  sample: false
bytes:
  description: The bytes under O(path) when the wait ended.
  returned: always
  type: int
  sample: 44139234816
total_bytes:
  description: O(total_bytes).
  returned: always
  type: int
  sample: 122406567936
percent:
  description: RV(bytes) as a percentage of O(total_bytes), at most 100.
  returned: always
  type: float
  sample: 36.1
rate_bytes_per_s:
  description: How fast the bytes under O(path) grew during this wait.
  returned: always
  type: float
  sample: 412000000.0
progress:
  description: All of the above in one line, starting with O(label).
  returned: always
  type: str
  sample: "copy from spark-1: 44.1 GB of 122.4 GB (36%), 412.0 MB/s"
job:
  description: The job's result (its module's return values, with C(rc), C(stdout) and
    C(stderr) for a command), without its C(diff).
  returned: when finished
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.llmfleet.cluster.plugins.module_utils._node.transfer_progress import (  # noqa: E402
    finish,
    measurement,
    remove_job,
    wait_and_measure,
)

ARGUMENT_SPEC = {
    "jid": {"type": "str"},
    # Read by the action plugin, which runs this module without it.
    "job_on_controller": {"type": "bool", "default": False},
    "async_dir": {"type": "str"},
    "path": {"type": "path", "required": True},
    "total_bytes": {"type": "int", "required": True},
    "wait": {"type": "float", "default": 10},
    "label": {"type": "str", "default": ""},
    "cleanup": {"type": "bool", "default": True},
}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    if params["total_bytes"] < 0 or params["wait"] < 0:
        module.fail_json(
            msg=f"total_bytes ({params['total_bytes']}) and wait ({params['wait']})"
            " must be 0 or more"
        )
    try:
        finished, job, held, rate = wait_and_measure(
            params["async_dir"] or "~/.ansible_async",
            params["jid"],
            params["path"],
            params["wait"],
            total=params["total_bytes"],
        )
    except (LookupError, ValueError) as error:
        module.fail_json(msg=str(error), finished=True)
    result = {
        **measurement(held, params["total_bytes"], rate, params["label"]),
        "finished": finished,
        "changed": False,
    }
    if not finished:
        module.exit_json(**result)
    if params["cleanup"]:
        remove_job(params["async_dir"] or "~/.ansible_async", params["jid"])
    result, failure = finish(result, job, params["label"], with_diff=module._diff)
    if failure:
        module.fail_json(msg=failure, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
