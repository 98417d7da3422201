#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Ansible module container_gpu_support: can the container engine give a container the GPUs."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: container_gpu_support
short_description: Tell whether Docker or Podman can give a container the NVIDIA GPUs
version_added: "0.1.0"
author:
  - llmfleet maintainers (!UNKNOWN)
description:
  - Answers, before a container that asks for every NVIDIA GPU is started, whether the engine
    can give them, the way C(gpu_container) asks for them - Docker by a device request for the
    C(nvidia) driver (C(--gpus all)), Podman by the CDI device C(nvidia.com/gpu=all).
  - Docker can when the NVIDIA Container Toolkit is there - the C(nvidia) runtime registered
    with the daemon (C(Runtimes) of C(docker info), after C(nvidia-ctk runtime configure)),
    C(nvidia-container-runtime-hook) on the PATH (what Docker's C(nvidia) device driver runs),
    or a CDI spec that declares C(nvidia.com/gpu).
  - Podman can when a CDI spec in O(cdi_spec_dirs) declares C(nvidia.com/gpu)
    (C(nvidia-ctk cdi generate)).
  - Read-only; never reports a change, and does not fail when the answer is no - RV(supported)
    and RV(reason) say it, for the caller to refuse with its own message.
options:
  engine:
    description: The container engine.
    type: str
    choices: [docker, podman]
    default: docker
  cdi_spec_dirs:
    description: Where CDI specs are looked for (the engines' defaults).
    type: list
    elements: path
    default: [/etc/cdi, /var/run/cdi]
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Only reads, so check mode gives the same answer as a normal run.
  diff_mode:
    support: none
  idempotent:
    description:
      - When run twice in a row, the second run reports the same state and changes nothing.
    support: full
    details: Read-only; C(changed) is always false.
  platform:
    platforms: posix
notes:
  - An engine that is not installed, or whose C(info) fails (a daemon that is down), is no
    answer either; RV(reason) says which.
seealso:
  - name: NVIDIA Container Toolkit installation
    description: Installing the toolkit, configuring Docker, generating the CDI spec for Podman.
    link: https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html
"""

EXAMPLES = r"""
- name: Ask whether Docker can give a container the GPUs
  llmfleet.cluster.container_gpu_support:
    engine: docker
  register: gpu_support

- name: Refuse before anything starts
  ansible.builtin.assert:
    that: gpu_support.supported
    fail_msg: "{{ inventory_hostname }}: {{ gpu_support.reason }}"
"""

RETURN = r"""
supported:
  description: Whether the engine can give a container every NVIDIA GPU.
  returned: always
  type: bool
  sample: true
reason:
  description: What made the answer - what was found, or what is missing and how to add it.
  returned: always
  type: str
  sample: the nvidia runtime; /usr/bin/nvidia-container-runtime-hook
runtimes:
  description: The runtimes Docker's daemon knows (empty for Podman, or when C(docker info) failed).
  returned: always
  type: list
  elements: str
  sample: [io.containerd.runc.v2, nvidia, runc]
nvidia_hook:
  description: The path of C(nvidia-container-runtime-hook), null when it is not on the PATH.
  returned: always
  type: str
  sample: /usr/bin/nvidia-container-runtime-hook
cdi_specs:
  description: The CDI spec files that declare C(nvidia.com/gpu).
  returned: always
  type: list
  elements: str
  sample: [/var/run/cdi/nvidia.yaml]
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.llmfleet.cluster.plugins.module_utils._container.gpu_support import (  # noqa: E402
    NVIDIA_HOOK,
    cdi_spec_files,
    docker_runtimes,
    engine_info,
    gpu_specs,
    gpu_support,
)

ARGUMENT_SPEC = {
    "engine": {"type": "str", "choices": ["docker", "podman"], "default": "docker"},
    "cdi_spec_dirs": {
        "type": "list",
        "elements": "path",
        "default": ["/etc/cdi", "/var/run/cdi"],
    },
}


def read_text(path):
    """The file's text, or None when it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    engine = module.params["engine"]
    spec_dirs = module.params["cdi_spec_dirs"]
    binary = module.get_bin_path(engine)
    result = {"changed": False, "runtimes": [], "nvidia_hook": None, "cdi_specs": []}
    if binary is None:
        module.exit_json(
            supported=False, reason=f"{engine} is not installed (not on the PATH)", **result
        )
    if engine == "docker":
        rc, out, err = module.run_command([binary, "info", "--format", "{{json .}}"])
        if rc != 0:
            module.exit_json(
                supported=False,
                reason=f"`docker info` failed: {(err or out).strip() or f'exit {rc}'}",
                **result,
            )
        result["runtimes"] = docker_runtimes(engine_info(out))
        result["nvidia_hook"] = module.get_bin_path(NVIDIA_HOOK)
    result["cdi_specs"] = gpu_specs(cdi_spec_files(spec_dirs), read_text)
    answer = gpu_support(
        engine, result["runtimes"], result["nvidia_hook"], result["cdi_specs"], spec_dirs
    )
    module.exit_json(**answer, **result)


if __name__ == "__main__":
    main()
