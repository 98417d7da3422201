# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""The options of the modules that read a model repository of a Hugging Face Hub."""

from __future__ import annotations


class ModuleDocFragment:
    # The argument spec is module_utils/_model/hf_snapshot.py's HUB_OPTIONS.
    DOCUMENTATION = r"""
options:
  repo_id:
    description:
      - The model repository, V(<org>/<name>), for example V(Qwen/Qwen3-0.6B).
    type: str
    required: true
  revision:
    description:
      - A branch or tag name, or a 40-hex commit sha. Pin a commit sha for weights that
        cannot change under a deployment.
    type: str
    default: main
  endpoint:
    description:
      - The hub's URL, for example V(http://hub.lab:8080).
      - When omitted, C(huggingface_hub)'s own default is used (E(HF_ENDPOINT) of the
        module's environment, else V(https://huggingface.co)).
    type: str
  token:
    description:
      - A token for the hub, for private or gated repositories (or a hub that wants one for
        everything).
      - When omitted, C(huggingface_hub) looks for one as usual (E(HF_TOKEN) of the module's
        environment, the token file C(hf auth login) saved).
      - Handed to C(huggingface_hub) only; never in a result, a log or an environment.
    type: str
  allow_patterns:
    description:
      - Only files matching one of these patterns (C(fnmatch); C(*) also matches C(/)), as
        C(snapshot_download) filters them, are selected.
    type: list
    elements: str
  ignore_patterns:
    description:
      - Files matching one of these patterns are not selected.
    type: list
    elements: str
requirements:
  - C(huggingface_hub) >= 1.0 for the Python that runs the module.
notes:
  - Runs on the host that asks the hub, with a Python that has C(huggingface_hub) (set
    C(ansible_python_interpreter) for the task).
  - Telemetry of C(huggingface_hub) and its progress bars are switched off.
"""
