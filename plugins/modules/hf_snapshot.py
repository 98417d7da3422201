#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Ansible module hf_snapshot: downloads a model of a Hugging Face Hub at a pinned revision."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: hf_snapshot
short_description: Download a model of a Hugging Face Hub at one revision into a folder
version_added: "0.1.0"
author:
  - llmfleet maintainers (!UNKNOWN)
description:
  - Asks the hub what O(revision) of model repository O(repo_id) is and holds, with the
    C(huggingface_hub) client (C(model_info) with the files' metadata), the hub being
    huggingface.co, a mirror, or the llmfleet lab's own Hub; then downloads that commit (not
    the branch, which could move meanwhile) into O(local_dir) with C(snapshot_download).
  - Only the files that O(allow_patterns) and O(ignore_patterns) select are downloaded. Files
    already there at that commit are kept; RV(downloaded) lists those the download wrote.
  - RV(revision) is the commit sha the revision names, RV(files) the files the patterns
    select, with their sizes and hashes, so that a play can pin the commit it downloaded and
    check the weights it spread.
  - To read the revision (and the model's C(config.json)) without downloading, use
    M(llmfleet.cluster.hf_snapshot_info).
options:
  local_dir:
    description:
      - The folder the files are downloaded into (created with its parents).
      - C(huggingface_hub) keeps its bookkeeping in C(<local_dir>/.cache/huggingface/).
    type: path
    required: true
extends_documentation_fragment:
  - llmfleet.cluster.hf_hub
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details:
      - Nothing is downloaded; RV(downloaded) lists the files that are missing in O(local_dir)
        or have another size there. The hub is still asked what the revision holds.
  diff_mode:
    support: full
    details: The files the download writes, each with its size before and after.
  idempotent:
    description:
      - When run twice in a row, the second run changes nothing.
    support: full
    details: A second run at the same commit finds every file in place and downloads none.
  platform:
    platforms: posix
notes:
  - The weights are checked by C(huggingface_hub) (the sha256 of LFS files); RV(files) gives the
    hashes for a later check of the copies a play spreads.
  - A branch that moved is noticed on the next run (RV(revision) changes), and the new commit's
    files are downloaded into the same folder. Files the new commit no longer has stay there.
seealso:
  - module: llmfleet.cluster.hf_snapshot_info
    description: Reads the revision, its files and the model's config.json without downloading.
  - name: huggingface_hub snapshot_download
    description: The download this module runs.
    link: https://huggingface.co/docs/huggingface_hub/guides/download
"""

EXAMPLES = r"""
- name: Read which commit main of the model is, without downloading
  llmfleet.cluster.hf_snapshot_info:
    repo_id: Qwen/Qwen3-0.6B
  register: __model_revision

- name: Download the pinned commit of the model's weights and tokenizer
  llmfleet.cluster.hf_snapshot:
    repo_id: Qwen/Qwen3-0.6B
    revision: "{{ __model_revision.revision }}"
    local_dir: /srv/models/Qwen3-0.6B
    allow_patterns:
      - "*.json"
      - "*.safetensors"
      - tokenizer*
    token: "{{ vault_hf_token }}"
  vars:
    ansible_python_interpreter: /opt/vllm/bin/python

- name: Download from the lab's own Hub
  llmfleet.cluster.hf_snapshot:
    repo_id: llmfleet/tiny
    endpoint: http://hub.lab:8080
    local_dir: /srv/models/tiny
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
  description: The commit sha that O(revision) names on the hub; what was downloaded.
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
      description: Path in the repository (and below O(local_dir)).
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
local_dir:
  description: The folder the files were downloaded into (absolute).
  returned: always
  type: str
  sample: /srv/models/Qwen3-0.6B
downloaded:
  description:
    - The files the download wrote (new, or changed in size, modification time or inode); the
      module reports a change when there is one.
    - In check mode, the files that are missing in O(local_dir) or have another size there.
  returned: always
  type: list
  elements: str
  sample: [config.json, model.safetensors]
"""

# Ansible's module layout: documentation first, imports after it.
from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.llmfleet.cluster.plugins.module_utils._model.hf_snapshot import (  # noqa: E402
    HUB_OPTIONS,
    HubRequestError,
    download,
    hub_args,
    require_hub_library,
)

ARGUMENT_SPEC = {**HUB_OPTIONS, "local_dir": {"type": "path", "required": True}}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    require_hub_library(module)
    params = module.params
    try:
        result = download(params["local_dir"], check_mode=module.check_mode, **hub_args(params))
    except HubRequestError as error:
        module.fail_json(msg=str(error), repo_id=params["repo_id"], revision=params["revision"])
    diff = result.pop("diff")
    changed = bool(result["downloaded"])
    if changed and module._diff:
        result["diff"] = diff
    module.exit_json(changed=changed, **result)


if __name__ == "__main__":
    main()
