#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Ansible module model_manifest: verify every byte of a model folder, cheaply on re-runs."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: model_manifest
short_description: Build or verify the manifest of a model folder, cheaply on re-runs
version_added: "0.1.0"
author:
  - llmfleet maintainers (!UNKNOWN)
description:
  - Checks a model folder (safetensors, tokenizer and config files) against a manifest of its
    files, O(files), each with its size and its sha256 or git blob sha1; or, without O(files),
    builds that manifest from the folder's content (on the host that downloaded the model) so
    that the hosts it is copied to can be checked against it.
  - Hashing 100 GB of weights takes minutes. Each host records in O(state_file) the size, mtime
    and hashes of every file it verified; in O(mode=quick) a file whose size and mtime have not
    moved since is not read again, so a re-run on an unchanged folder reads no file.
  - O(mode=inspect) only compares sizes, hashes nothing and changes nothing; it also works
    before the folder exists and says how many bytes a copy still needs (RV(bytes_needed)) and
    how many the filesystem has free (RV(free_bytes)).
  - Files that fail verification can be deleted (O(remove_bad)) so that a following C(rsync)
    copies them again; missing files are only reported. Files under O(path) that the manifest
    does not list are reported in RV(extra) and never deleted.
options:
  path:
    description:
      - The model folder on this host.
      - In O(mode=inspect), and with O(files) in any mode, it need not exist (every file is then
        missing). Without O(files) in O(mode=quick) or O(mode=full) it must.
    type: path
    required: true
  files:
    description:
      - The reference manifest. Each entry needs O(files[].size) and should carry
        O(files[].sha256) or O(files[].git_sha1); an entry with neither is checked by its size
        only.
      - When omitted, every regular file under O(path) becomes an entry (recursively, symlinks
        to files followed, the folders C(.cache) and C(.git) and the state file left out) and
        RV(files) is the manifest to give the other hosts.
      - An entry whose path is absolute, contains C(..), or appears twice fails the task,
        naming the entry.
    type: list
    elements: dict
    suboptions:
      path:
        description: Path of the file relative to O(path), with C(/) between folders.
        type: str
        required: true
      size:
        description: Size in bytes.
        type: int
        required: true
      sha256:
        description: SHA-256 of the content, 64 hex digits (what the hub gives for LFS files).
        type: str
      git_sha1:
        description:
          - Git blob sha1 of the content (the SHA-1 of C(blob <size>), a NUL byte, then the
            content), 40 hex digits; what the Hugging Face hub gives as a file's C(oid) or
            C(blob_id) for files outside LFS.
          - Only checked when the entry has no O(files[].sha256).
        type: str
  mode:
    description:
      - V(inspect) compares presence and sizes only, reads no file, writes nothing.
      - V(quick) hashes the files that O(state_file) does not vouch for; a file counts as
        verified without reading it when the state records it with the same size and mtime
        and a hash equal to the reference's (without O(files), any recorded sha256).
      - V(full) hashes every file (sha256, and the git blob sha1 in the same pass where the
        reference gives only that).
    type: str
    choices: [inspect, quick, full]
    default: quick
  state_file:
    description:
      - Where this host records what it verified (JSON). Required unless O(mode=inspect).
        Written atomically, mode C(0644), missing parent folders created with mode C(0755),
        and only when its content changes. Files that fail verification are not recorded.
      - Keep it outside O(path) (for example next to the model folder); inside it, it is left
        out of the manifest.
    type: path
  source:
    description:
      - Free-form facts about where the model came from (for example C(repo) and C(revision)),
        stored as given in O(state_file) for whoever reads it later.
    type: dict
  remove_bad:
    description:
      - With O(files), in O(mode=quick) and O(mode=full), delete the files that are present but
        fail verification (wrong size, wrong hash, unreadable), so that C(rsync) copies them
        again. A symlink is removed, not its target. Never in check mode, never in
        O(mode=inspect), never without O(files) (there a bad file is one that could not be read).
    type: bool
    default: false
  keep_in:
    description:
      - With O(remove_bad), a folder on the same file system as O(path) where the removed files
        are kept by content (C(sha256-<hex>), C(git_sha1-<hex>)) instead of deleted, and from
        which a missing or bad file whose content the reference names is taken back (then
        hashed and checked like the others), so that going back to the revision served before
        needs no download. It holds one generation, the files of the last run that removed any.
      - Created (mode 0700) when needed. Not used in check mode.
    type: path
  fail_on_bad:
    description:
      - Fail the task when a file is missing or bad; the message names each file and why.
    type: bool
    default: false
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Hashes as in a normal run but writes no state file and removes no file;
      C(changed) and RV(removed) say what a normal run would do.
  diff_mode:
    support: full
    details: The state file's verified files (C(sha256sum)-style lines) before and after, and the
      files removed.
  idempotent:
    description:
      - When run twice in a row, the second run changes nothing.
    support: full
    details: The state file is rewritten only when its content changes; a second run on an
      unchanged folder reports no change.
  platform:
    platforms: posix
notes:
  - The trade-off of O(mode=quick) - it trusts size and mtime. A file changed in place whose
    mtime was then set back (C(touch -d), C(os.utime)), or replaced by different content of the
    same size and the very same mtime, is not read again; O(mode=full) finds it. Ordinary writes
    (a download, an editor, a copy) set a new mtime; C(rsync -t) sets the source's, which differs
    from the recorded one unless the source's file had it too.
  - Files are read in 8 MiB chunks by up to four threads at once.
  - RV(verified) is true when nothing is missing or bad. In O(mode=inspect) that means each file
    has the expected size only; no content was read.
seealso:
  - name: Hugging Face hub file metadata
    description: The hub's tree API gives each file's C(size), C(oid) (git blob sha1) and, for LFS
      files, the sha256 of the content in C(lfs).
    link: https://huggingface.co/docs/huggingface_hub/package_reference/hf_api
"""

EXAMPLES = r"""
- name: Build the manifest of the downloaded model on the first host
  llmfleet.cluster.model_manifest:
    path: /srv/models/Qwen3-32B
    state_file: /srv/models/.llmfleet/Qwen3-32B.json
    source:
      repo: Qwen/Qwen3-32B
      revision: main
  register: __model_manifest_source

- name: See whether each other host has room for what it still needs
  llmfleet.cluster.model_manifest:
    path: /srv/models/Qwen3-32B
    files: "{{ hostvars[groups['sparks'][0]].__model_manifest_source.files }}"
    mode: inspect
  register: __model_manifest_room

- name: Verify every byte after the copy, and fail naming the files that differ
  llmfleet.cluster.model_manifest:
    path: /srv/models/Qwen3-32B
    files: "{{ hostvars[groups['sparks'][0]].__model_manifest_source.files }}"
    state_file: /srv/models/.llmfleet/Qwen3-32B.json
    remove_bad: true
    fail_on_bad: true

- name: Verify against the hub's own hashes (sha256 for LFS files, git blob sha1 for others)
  llmfleet.cluster.model_manifest:
    path: /srv/models/tiny
    state_file: /srv/models/.llmfleet/tiny.json
    mode: full
    files:
      - path: model.safetensors
        size: 988097824
        sha256: 3f2a5b4c7d9e1f0a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192
      - path: config.json
        size: 659
        git_sha1: 1b0e0a8e4f1c5b7b6c2a3d4e5f60718293a4b5c6
"""

RETURN = r"""
path:
  description: The model folder, absolute.
  returned: always
  type: str
  sample: /srv/models/Qwen3-32B
mode:
  description: The mode of the run.
  returned: always
  type: str
  sample: quick
files:
  description:
    - The manifest, sorted by path. With O(files), the reference, plus the sha256 of each file
      this host verified whose entry gave only a git blob sha1. Without O(files), the manifest
      built from the folder's content (no hashes in O(mode=inspect)), to pass to other hosts.
  returned: always
  type: list
  elements: dict
  sample:
    - path: config.json
      size: 659
      sha256: 8e9a0c1d2b3f4a5e6d7c8b9a0f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6
    - path: model.safetensors
      size: 988097824
      sha256: 3f2a5b4c7d9e1f0a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192
  contains:
    path:
      description: Path relative to O(path).
      type: str
      returned: always
    size:
      description: Size in bytes.
      type: int
      returned: always
    sha256:
      description: SHA-256 of the content.
      type: str
      returned: when known
    git_sha1:
      description: Git blob sha1 of the content.
      type: str
      returned: when the reference gave it, or a verification computed it
ok:
  description: Paths of the files verified (in O(mode=inspect), present with the right size).
  returned: always
  type: list
  elements: str
  sample: [config.json, model.safetensors]
missing:
  description: Paths of the reference files that are not there.
  returned: always
  type: list
  elements: str
  sample: [tokenizer.json]
bad:
  description: The files present that failed verification, and why.
  returned: always
  type: list
  elements: dict
  sample:
    - path: model.safetensors
      reason: sha256 8d1c0e2f4a6b... expected 3f2a5b4c7d9e...
      expected: 3f2a5b4c7d9e1f0a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192
      actual: 8d1c0e2f4a6b8c0d2e4f6a8b0c2d4e6f8a0b2c4d6e8f0a2b4c6d8e0f2a4b6c8d
  contains:
    path:
      description: Path relative to O(path).
      type: str
      returned: always
    reason:
      description: What is wrong, for example C(size 12, expected 14) or C(sha256 ... expected ...).
      type: str
      returned: always
    expected:
      description: The reference's size or hash; null when the file could not be read.
      type: raw
      returned: always
    actual:
      description: The file's size or hash; null when the file could not be read.
      type: raw
      returned: always
removed:
  description: Paths of the bad files deleted (O(remove_bad)); in check mode, those that would be.
  returned: always
  type: list
  elements: str
  sample: [model.safetensors]
taken_back:
  description: Paths of the files taken back from O(keep_in) and verified (they are in RV(ok)
    unless their content failed).
  returned: always
  type: list
  elements: str
  sample: [model-00001-of-00004.safetensors]
hashed:
  description: Paths of the files read and hashed by this run; empty when the state file vouched
    for every file.
  returned: always
  type: list
  elements: str
  sample: []
extra:
  description: Files under O(path) that the reference does not list (C(.cache) and C(.git) left
    out); never deleted. Always empty without O(files).
  returned: always
  type: list
  elements: str
  sample: [README.md]
bytes_total:
  description: Sum of the sizes in RV(files).
  returned: always
  type: int
  sample: 65527752704
bytes_needed:
  description: Sum of the reference sizes of the files missing or bad, which a copy must still
    bring.
  returned: always
  type: int
  sample: 988097824
free_bytes:
  description: Bytes available on the filesystem of O(path) (or of its nearest existing parent
    folder when it does not exist yet).
  returned: always
  type: int
  sample: 3298534883328
verified:
  description: True when no file is missing or bad.
  returned: always
  type: bool
  sample: true
previous_source:
  description:
    - The O(source) that the state file recorded before this run (where the files this host
      verified earlier came from); null without a state file, and in O(mode=inspect).
    - A play compares it with O(source) to tell a new revision from a repair.
  returned: always
  type: dict
  sample: {repo: Qwen/Qwen3-8B, revision: b968826d9c46dd6066d109eabc6255188de91218}
"""

# Ansible's module layout: documentation first, imports after it.
from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.llmfleet.cluster.plugins.module_utils._model.manifest import (  # noqa: E402
    MODES,
    ManifestError,
    check_model,
    describe_problems,
)

ARGUMENT_SPEC = {
    "path": {"type": "path", "required": True},
    "files": {
        "type": "list",
        "elements": "dict",
        "options": {
            "path": {"type": "str", "required": True},
            "size": {"type": "int", "required": True},
            "sha256": {"type": "str"},
            "git_sha1": {"type": "str"},
        },
    },
    "mode": {"type": "str", "choices": list(MODES), "default": "quick"},
    "state_file": {"type": "path"},
    "source": {"type": "dict"},
    "remove_bad": {"type": "bool", "default": False},
    "keep_in": {"type": "path"},
    "fail_on_bad": {"type": "bool", "default": False},
}


def main():
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        required_if=[("mode", "quick", ("state_file",)), ("mode", "full", ("state_file",))],
        supports_check_mode=True,
    )
    params = module.params
    try:
        result = check_model(
            params["path"],
            files=params["files"],
            mode=params["mode"],
            state_file=params["state_file"],
            source=params["source"],
            remove_bad=params["remove_bad"],
            keep_in=params["keep_in"],
            check_mode=module.check_mode,
        )
    except ManifestError as error:
        module.fail_json(msg=str(error))
    except OSError as error:
        module.fail_json(msg=f"{error.filename or params['path']}: {error.strerror or error}")
    diff = result.pop("diff")
    if module._diff and diff:
        result["diff"] = diff
    if params["fail_on_bad"] and not result["verified"]:
        module.fail_json(msg=describe_problems(result), **result)
    # Damage found on a run that goes on (it is copied again): said, by file, where a
    # user looks.
    removed = set(result["removed"])
    for bad in result["bad"]:
        fate = "removed, to be copied again" if bad["path"] in removed else "left as it is"
        module.warn(f"{result['path']}/{bad['path']}: {bad['reason']}; {fate}")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
