#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Ansible module hf_snapshot_info: what a revision of a Hugging Face Hub model is and holds."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: hf_snapshot_info
short_description: Read what a model of a Hugging Face Hub is and holds at one revision
version_added: "0.1.0"
author:
  - llmfleet maintainers (!UNKNOWN)
description:
  - Asks the hub what O(revision) of model repository O(repo_id) is and holds, with the
    C(huggingface_hub) client (C(model_info) with the files' metadata), the hub being
    huggingface.co, a mirror, or the llmfleet lab's own Hub. Nothing is downloaded, except
    the model's C(config.json) with O(read_config).
  - RV(revision) is the commit sha the revision names, RV(files) the files the patterns
    select, with their sizes and hashes, so that a play can pin the commit it will download
    (M(llmfleet.cluster.hf_snapshot)) and check the room and the weights before it does.
options:
  read_config:
    description:
      - Also download the repository's C(config.json) at RV(revision) (into a temporary folder,
        removed afterwards) and return it parsed as RV(config), when the patterns select it.
      - A C(config.json) that is not a JSON object fails the task.
    type: bool
    default: false
extends_documentation_fragment:
  - llmfleet.cluster.hf_hub
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: It only reads from the hub, in check mode as well.
  diff_mode:
    support: none
  idempotent:
    description:
      - When run twice in a row, the second run changes nothing.
    support: full
    details: C(changed) is always false. RV(revision) differs between runs when the branch
      O(revision) names moved.
  platform:
    platforms: posix
seealso:
  - module: llmfleet.cluster.hf_snapshot
    description: Downloads the revision into a folder.
  - name: huggingface_hub model_info
    description: The request this module makes.
    link: https://huggingface.co/docs/huggingface_hub/package_reference/hf_api
"""

EXAMPLES = r"""
- name: Read which commit main of the model is and the model's config.json
  llmfleet.cluster.hf_snapshot_info:
    repo_id: Qwen/Qwen3-0.6B
    allow_patterns:
      - "*.json"
      - "*.safetensors"
    read_config: true
  register: __model_revision

- name: Require a model small enough for one node
  ansible.builtin.assert:
    that:
      - __model_revision.total_bytes < 100 * 1024 ** 3
      - __model_revision.config.architectures is defined

- name: Download exactly that commit
  llmfleet.cluster.hf_snapshot:
    repo_id: Qwen/Qwen3-0.6B
    revision: "{{ __model_revision.revision }}"
    local_dir: /srv/models/Qwen3-0.6B
    allow_patterns:
      - "*.json"
      - "*.safetensors"

- name: Read a private model on the lab's own Hub
  llmfleet.cluster.hf_snapshot_info:
    repo_id: llmfleet/tiny
    revision: v1.0
    endpoint: http://hub.lab:8080
    token: "{{ vault_hf_token }}"
"""

RETURN = r"""
repo_id:
  description: The repository read.
  returned: always
  type: str
  sample: Qwen/Qwen3-0.6B
endpoint:
  description: The hub that was asked.
  returned: always
  type: str
  sample: https://huggingface.co
requested_revision:
  description: O(revision) as given.
  returned: always
  type: str
  sample: main
revision:
  description: The commit sha that O(revision) names on the hub.
  returned: always
  type: str
  sample: c1899de289a04d12100db370d81485cdf75e47ca
files:
  description: The files of the commit that the patterns select, sorted by path.
  returned: always
  type: list
  elements: dict
  sample:
    - path: config.json
      size: 726
      sha256: null
      git_sha1: 0187f3b09d66cef7911083ad49f890f5a6589589
    - path: model.safetensors
      size: 1503300328
      sha256: f47f71177f32bcd101b7573ec9171e6a57f4f4d31148d38e382306f42996874b
      git_sha1: 7ca7be3ac5bf2a1ba43097795e4b7da2bc5bdbc2
  contains:
    path:
      description: Path in the repository.
      type: str
      returned: always
    size:
      description: Size in bytes.
      type: int
      returned: always
    sha256:
      description: The sha256 of the content for an LFS file (the weights); null for a file
        kept in git itself.
      type: str
      returned: always
    git_sha1:
      description: The git blob id the hub gives (for an LFS file, the id of its pointer).
      type: str
      returned: always
total_bytes:
  description: The size of RV(files) together.
  returned: always
  type: int
  sample: 1503326710
config:
  description:
    - The repository's C(config.json) at RV(revision), parsed, with O(read_config=true).
    - An empty dictionary with O(read_config=false), or when RV(files) has no C(config.json)
      (the repository has none, or the patterns leave it out).
  returned: always
  type: dict
  sample:
    architectures: [Qwen3ForCausalLM]
    model_type: qwen3
    hidden_size: 1024
    num_hidden_layers: 28
    torch_dtype: bfloat16
"""

# Ansible's module layout: documentation first, imports after it.
from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.llmfleet.cluster.plugins.module_utils._model.hf_snapshot import (  # noqa: E402
    HUB_OPTIONS,
    HubRequestError,
    hub_args,
    read,
    require_hub_library,
)

ARGUMENT_SPEC = {**HUB_OPTIONS, "read_config": {"type": "bool", "default": False}}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    require_hub_library(module)
    params = module.params
    try:
        result = read(read_config=params["read_config"], **hub_args(params))
    except HubRequestError as error:
        module.fail_json(msg=str(error), repo_id=params["repo_id"], revision=params["revision"])
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
