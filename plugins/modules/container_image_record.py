#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Ansible module container_image_record: record on the node which image a container runs."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: container_image_record
short_description: Record on the node which image a container runs (its ID and registry digests)
version_added: "0.1.0"
author:
  - llmfleet maintainers (!UNKNOWN)
description:
  - Asks the engine (C(docker) or C(podman)) which image the container O(name) runs
    (C(container inspect)), then that image's ID and registry digests (C(image inspect) of that
    ID), and records them with the reference the container was started from (O(reference)) in a
    JSON file on the node, one entry per container name.
  - 'The file holds C({"version": 1, "containers": {NAME: {"reference", "image_id",
    "repo_digests"}}}); the entries of other containers are kept. It is written only when its
    content changes, atomically, mode C(0644), its missing parent folders created with mode
    C(0755); a file that is not such a record is replaced.'
  - O(state=absent) forgets a container (one that was removed), without asking the engine.
  - An image built or imported locally has no registry digest (RV(record.repo_digests) is
    empty); one pulled from a registry lists the digest it was pulled by.
options:
  name:
    description: The container's name.
    type: str
    required: true
  reference:
    description:
      - The image reference the container was started from, as configured (for example
        C(vllm/vllm-openai:v0.11.0@sha256:<64 hex>)). Recorded as given.
      - Required with O(state=present).
    type: str
  engine:
    description: The container engine that runs it.
    type: str
    choices: [docker, podman]
    default: docker
  path:
    description: The record file.
    type: path
    default: /var/lib/llmfleet/images.json
  state:
    description: V(present) records what the container runs; V(absent) forgets the container.
    type: str
    choices: [present, absent]
    default: present
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Asks the engine as in a normal run and writes nothing; a container that does not
      exist yet (its creation was only predicted) is reported as a change with no record.
  diff_mode:
    support: full
    details: The record file's text before and after.
  idempotent:
    description:
      - When run twice in a row, the second run changes nothing.
    support: full
    details: The file is rewritten only when its content changes; the record holds no time.
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Record the image the vLLM container runs
  llmfleet.cluster.container_image_record:
    name: llmfleet-vllm
    reference: "{{ vllm_server_image }}"
    engine: docker
  register: recorded

- name: Forget a container that was removed
  llmfleet.cluster.container_image_record:
    name: llmfleet-vllm
    state: absent
"""

RETURN = r"""
record:
  description: What was recorded for O(name); null with O(state=absent), and in check mode for a
    container that does not exist yet.
  returned: always
  type: dict
  contains:
    reference:
      description: The reference the container was started from (O(reference)).
      type: str
      sample: vllm/vllm-openai:v0.11.0@sha256:<64 hex>
    image_id:
      description: The ID of the image it runs, as Docker writes it (C(sha256:) and 64 hex digits).
      type: str
      sample: sha256:<64 hex>
    repo_digests:
      description: The image's registry digests (C(name@sha256:...)), sorted; empty for a local
        build.
      type: list
      elements: str
      sample: ["vllm/vllm-openai@sha256:<64 hex>"]
images:
  description: Every container the file records after this run, by name (what the file's
    C(containers) holds).
  returned: always
  type: dict
  sample:
    llmfleet-vllm:
      reference: llmfleet-lab/vllm-runtime:1
      image_id: sha256:<64 hex>
      repo_digests: []
path:
  description: The record file.
  returned: always
  type: str
  sample: /var/lib/llmfleet/images.json
"""

import os  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.llmfleet.cluster.plugins.module_utils._container.image_record import (  # noqa: E402
    InspectError,
    container_image_id,
    image_entry,
    read_containers,
    render,
    updated,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._node.files import (  # noqa: E402
    file_diff,
    write_atomically,
)

ARGUMENT_SPEC = {
    "name": {"type": "str", "required": True},
    "reference": {"type": "str"},
    "engine": {"type": "str", "choices": ["docker", "podman"], "default": "docker"},
    "path": {"type": "path", "default": "/var/lib/llmfleet/images.json"},
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
}
FILE_MODE = "0644"


def read_text(path):
    """The file's text, or None when there is none."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return ""


def inspect_entry(module, engine, name, reference):
    """The record of container ``name``; None in check mode when it does not exist yet."""
    binary = module.get_bin_path(engine, required=True)
    rc, out, err = module.run_command([binary, "container", "inspect", name])
    if rc != 0:
        if module.check_mode:
            return None
        module.fail_json(
            msg=f"{engine} has no container {name} to record: {err.strip() or out.strip()}"
        )
    try:
        image = container_image_id(out)
        rc, out, err = module.run_command([binary, "image", "inspect", image])
        if rc != 0:
            module.fail_json(
                msg=f"{engine} cannot inspect image {image} of container {name}: {err.strip()}"
            )
        return image_entry(reference, out)
    except InspectError as error:
        module.fail_json(msg=f"{engine}, container {name}: {error}")
    return None


def main():
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        required_if=[("state", "present", ("reference",))],
        supports_check_mode=True,
    )
    params = module.params
    path, name, present = params["path"], params["name"], params["state"] == "present"
    before = read_text(path)
    entry = inspect_entry(module, params["engine"], name, params["reference"]) if present else None
    images = updated(read_containers(before), name, entry)
    after = render(images)
    if present and entry is None:
        # Check mode, and the container is still to be created: it will be recorded.
        changed, after = True, before or ""
    else:
        # Forgetting a container where there is no record writes no file.
        changed = before != after and (present or before is not None)
    if changed and not module.check_mode:
        write_atomically(module, path, after)
    if os.path.exists(path):
        changed = module.set_mode_if_different(path, FILE_MODE, changed)
    result = {"changed": changed, "path": path, "record": entry, "images": images}
    if module._diff:
        result["diff"] = file_diff(path, before, after)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
