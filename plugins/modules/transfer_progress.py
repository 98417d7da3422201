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
  - Waits up to O(wait) seconds for the Ansible async job O(jid) (a task run with C(async) and
    C(poll: 0): a download, an rsync) to finish, then measures what its destination O(path)
    holds: the bytes of every file under it, partial files included, and the rate at which
    they grew during the wait.
  - Meant for a task that repeats it with C(until) the job finishes, so that every attempt
    says how far the transfer is (RV(progress), e.g. C(41.2 GB of 115.0 GB (36%), 412.0 MB/s)):
    C(llmfleet up) shows that line on each attempt; C(ansible-playbook) shows it with C(-vv).
  - Once the job is done, the job's own result is RV(job), its C(changed) and C(diff) are this
    task's, and a job that failed fails this task with the job's message and the end of its
    C(stderr).
options:
  jid:
    description:
      - The async job's id (C(ansible_job_id) of the task that started it).
    type: str
    required: true
  async_dir:
    description:
      - Where Ansible keeps the async jobs' status files on this host (the C(async_dir) shell
        option; C(~/.ansible_async) unless the inventory sets C(ansible_async_dir)).
    type: str
    default: ~/.ansible_async
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
attributes:
  check_mode:
    support: full
    details: Read-only (but O(cleanup)); it follows a job started in check mode the same way.
  diff_mode:
    support: full
    details: The finished job's diff, when it made one.
  idempotent:
    description:
      - When run twice in a row, the second run changes nothing.
    support: full
    details: Changes nothing by itself; C(changed) is the finished job's.
  platform:
    platforms: posix
notes:
  - The bytes counted are all those under O(path), so a folder that already held most of what
    the transfer brings starts near 100%: the line says how much of the whole is in place.
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
from ansible_collections.llmfleet.cluster.plugins.module_utils._transfer_progress import (  # noqa: E402
    progress_line,
    remove_job,
    wait_and_measure,
)

ARGUMENT_SPEC = {
    "jid": {"type": "str", "required": True},
    "async_dir": {"type": "str", "default": "~/.ansible_async"},
    "path": {"type": "path", "required": True},
    "total_bytes": {"type": "int", "required": True},
    "wait": {"type": "float", "default": 10},
    "label": {"type": "str", "default": ""},
    "cleanup": {"type": "bool", "default": True},
}
STDERR_LINES = 20


def job_failure(job):
    """The message of a finished job that failed, or None."""
    rc = job.get("rc")
    if not job.get("failed") and rc in (None, 0):
        return None
    msg = job.get("msg") or (f"exited with {rc}" if rc not in (None, 0) else "failed")
    stderr = "\n".join(str(job.get("stderr") or "").strip().splitlines()[-STDERR_LINES:])
    return f"{msg}: {stderr}" if stderr else str(msg)


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
            params["async_dir"], params["jid"], params["path"], params["wait"]
        )
    except (LookupError, ValueError) as error:
        module.fail_json(msg=str(error), finished=True)
    total = params["total_bytes"]
    result = {
        "finished": finished,
        "bytes": held,
        "total_bytes": total,
        "percent": round(100.0 if total <= 0 else min(100.0, 100.0 * held / total), 1),
        "rate_bytes_per_s": round(rate, 1),
        "progress": progress_line(held, total, rate, params["label"]),
        "changed": False,
    }
    if not finished:
        module.exit_json(**result)
    diff = job.pop("diff", None)
    result["job"] = job
    result["changed"] = bool(job.get("changed"))
    if diff and module._diff:
        result["diff"] = diff
    if params["cleanup"]:
        remove_job(params["async_dir"], params["jid"])
    failure = job_failure(job)
    if failure:
        module.fail_json(msg=f"{params['label'] or 'the transfer'} failed: {failure}", **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
