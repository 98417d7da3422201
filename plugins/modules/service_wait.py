#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Ansible module service_wait: wait until a service is ready, failing fast when it dies."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: service_wait
short_description: Wait until a service answers; fail at once, with the reason, if it exits
version_added: "0.1.0"
author:
  - llmfleet maintainers (!UNKNOWN)
description:
  - Polls a readiness probe - an HTTP URL that must answer 200 (vLLM's C(/health)), or a command
    whose output must hold enough lines matching a pattern (C(ray status) listing every node) -
    until it succeeds or O(timeout) seconds pass.
  - Between polls it watches what supervises the process, a systemd unit (O(unit)) or a
    container (O(container)). When the process exits while the module waits - the unit enters
    C(auto-restart) or C(failed) or its C(NRestarts) grows, the container is C(restarting) or
    stopped or its C(RestartCount) grows - the wait ends at once instead of running into the
    timeout while the supervisor restarts a broken configuration every few seconds.
  - "A wait that does not end ready fails with the end of the process's log since the wait began
    (C(journalctl) or the engine's C(logs)) and, in RV(reason), the line that says why (the last
    C(SomethingError: ...) line, e.g. vLLM's C(ValueError: Total number of attention heads (2)
    must be divisible by tensor parallel size (3)))."
  - Read-only; never reports a change.
options:
  url:
    description:
      - An http(s) URL that answers 200 when the service is ready.
      - Mutually exclusive with O(command).
    type: str
  headers:
    description:
      - Headers sent with every request to O(url) (e.g. an C(Authorization) header).
    type: dict
    default: {}
  command:
    description:
      - A command (argv, no shell) that exits 0 when the service is ready; with O(pattern), its
        output must also hold O(min_matches) lines matching it.
    type: list
    elements: str
  pattern:
    description:
      - A regular expression searched in each line of the output of O(command).
    type: str
  min_matches:
    description:
      - How many lines of the output of O(command) must match O(pattern).
    type: int
    default: 1
  unit:
    description:
      - The systemd unit running the process. Exactly one of O(unit) and O(container).
    type: str
  container:
    description:
      - The container running the process.
    type: str
  container_engine:
    description:
      - The engine of O(container).
    type: str
    choices: [docker, podman]
    default: docker
  timeout:
    description:
      - Seconds to wait for the probe while the process keeps running.
    type: int
    default: 600
  delay:
    description:
      - Seconds between two polls.
    type: float
    default: 2
  restarts_allowed:
    description:
      - How many exits of the process the wait lets its supervisor restart (systemd's
        C(Restart=), the engine's restart policy) before it ends the wait as broken. This is
        for a process whose start can fail for a passing reason, as a Ray node that timed out
        joining a busy head. A unit that systemd gave up on ends the wait at once.
      - The default, 0, ends the wait at the first exit.
    type: int
    default: 0
  log_lines:
    description:
      - How many lines of the log to return when the wait fails (RV(reason) is looked for
        in the last 1000 lines, or in these when there are more).
    type: int
    default: 60
notes:
  - A restart started by hand or by a handler passes through C(deactivating) and C(activating),
    which are not exits; only C(inactive) seen on two polls in a row counts as stopped.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Read-only; it waits in check mode too.
  diff_mode:
    support: none
  idempotent:
    description:
      - When run twice in a row, the second run changes nothing.
    support: full
    details: Read-only; C(changed) is always false.
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Wait until vLLM answers /health, or fail with the reason it exited
  llmfleet.cluster.service_wait:
    url: http://127.0.0.1:8000/health
    unit: llmfleet-vllm.service
    timeout: 1800

- name: Wait until ray status lists both nodes, watching the Ray container
  llmfleet.cluster.service_wait:
    command: [docker, exec, llmfleet-ray, ray, status, --address, "192.168.100.11:6379"]
    pattern: '^\s*1 node_'
    min_matches: 2
    container: llmfleet-ray
    timeout: 300
"""

RETURN = r"""
state:
  description: C(ready), C(broken) (the process exited while waiting) or C(timeout).
  returned: always
  type: str
  sample: broken
elapsed:
  description: Seconds the wait took.
  returned: always
  type: float
  sample: 12.4
attempts:
  description: How many times the probe ran.
  returned: always
  type: int
  sample: 7
restarts:
  description: How many exits of the process the wait saw (see O(restarts_allowed)).
  returned: always
  type: int
  sample: 0
probe:
  description: What the probe said last (an HTTP status, an error, the count of matching lines).
  returned: always
  type: str
  sample: "[Errno 111] Connection refused"
supervisor:
  description: The unit's or container's state when the wait ended without success.
  returned: when state is not ready
  type: str
  sample: "unit llmfleet-vllm.service (activating/auto-restart, last exit status 1, result
    exit-code)"
reason:
  description: The line of the log that says why the process stopped.
  returned: when state is not ready
  type: str
  sample: "ValueError: Total number of attention heads (2) must be divisible by tensor parallel
    size (3)."
log:
  description: The end of the process's log since the wait began.
  returned: when state is not ready
  type: str
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.llmfleet.cluster.plugins.module_utils._node.service_wait import (  # noqa: E402
    Probe,
    Supervisor,
    wait,
)

ARGUMENT_SPEC = {
    "url": {"type": "str"},
    "headers": {"type": "dict", "default": {}, "no_log": True},
    "command": {"type": "list", "elements": "str"},
    "pattern": {"type": "str"},
    "min_matches": {"type": "int", "default": 1},
    "unit": {"type": "str"},
    "container": {"type": "str"},
    "container_engine": {"type": "str", "choices": ["docker", "podman"], "default": "docker"},
    "timeout": {"type": "int", "default": 600},
    "delay": {"type": "float", "default": 2},
    "restarts_allowed": {"type": "int", "default": 0},
    "log_lines": {"type": "int", "default": 60},
}


def main():
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        mutually_exclusive=[("url", "command"), ("unit", "container")],
        required_one_of=[("url", "command"), ("unit", "container")],
        supports_check_mode=True,
    )
    params = module.params
    if params["url"] and not params["url"].startswith(("http://", "https://")):
        module.fail_json(msg=f"url is {params['url']!r}; expected an http:// or https:// URL")
    if params["restarts_allowed"] < 0:
        allowed = params["restarts_allowed"]
        module.fail_json(msg=f"restarts_allowed is {allowed}; expected 0 or more")

    def run(argv):
        return module.run_command(argv)

    result = wait(
        Supervisor(
            unit=params["unit"],
            container=params["container"],
            engine=params["container_engine"],
            log_lines=params["log_lines"],
        ),
        Probe(
            url=params["url"],
            headers=params["headers"],
            command=params["command"],
            pattern=params["pattern"],
            min_matches=params["min_matches"],
        ),
        timeout=params["timeout"],
        delay=params["delay"],
        run=run,
        restarts_allowed=params["restarts_allowed"],
    )
    if result["state"] != "ready":
        times = f" {result['restarts']} times, the last" if result["restarts"] > 1 else ""
        what = (
            f"exited{times} {result['elapsed']} s into the wait"
            if result["state"] == "broken"
            else f"was not ready after {params['timeout']} s"
        )
        module.fail_json(
            msg=f"{result['supervisor']} {what}: {result['reason'] or result['probe']}",
            changed=False,
            **result,
        )
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
