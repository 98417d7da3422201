"""Filters for the containers the roles run: mounts, and the compile caches kept on the host."""

from __future__ import annotations

import posixpath
import re

from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.filter.images import image_reference


def container_volumes(specs):
    """Mount specs for a container: a plain host path is mounted at the same place,
    read-only; a spec with ``:`` (``src:dest[:mode]``) is kept as written."""
    return [spec if ":" in spec else f"{spec}:{spec}:ro" for spec in specs]


# Where the compile caches are mounted inside a container, and the variable that points each
# tool there: vLLM's torch.compile cache (VLLM_CACHE_ROOT, default ~/.cache/vllm), Triton's
# kernels (TRITON_CACHE_DIR, default ~/.triton/cache), TorchInductor's (TORCHINDUCTOR_CACHE_DIR,
# default /tmp/torchinductor_<user>), FlashInfer's JIT modules (FLASHINFER_WORKSPACE_BASE:
# FlashInfer keeps them under <base>/.cache/flashinfer) and CUDA's PTX JIT cache
# (CUDA_CACHE_PATH, default ~/.nv/ComputeCache).
COMPILE_CACHE_MOUNT = "/var/cache/llmfleet/compile"
COMPILE_CACHE_ENV = {
    "VLLM_CACHE_ROOT": "vllm",
    "TRITON_CACHE_DIR": "triton",
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
    "FLASHINFER_WORKSPACE_BASE": "flashinfer",
    "CUDA_CACHE_PATH": "cuda",
}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def compile_cache(image, root):
    """The compile caches of a container that runs ``image``, kept on the host under ``root``
    in a folder of that image's own (compiled kernels are specific to the versions that made
    them): ``dir`` (the host folder: ``root/<registry_repository>_<tag>[_<12 hex of the
    digest>]``), ``volume`` (its mount at /var/cache/llmfleet/compile) and ``env`` (the
    variables that point vLLM, Triton, TorchInductor, FlashInfer and CUDA there). Nothing
    (empty ``dir``, no volume, no variables) when ``root`` is empty."""
    root = str(root or "").strip()
    if not root:
        return {"dir": "", "volumes": [], "env": {}}
    if not root.startswith("/"):
        raise AnsibleFilterError(f"compile_cache: the root {root!r} is no absolute path")
    parts = image_reference(image)
    name = _UNSAFE.sub("_", parts["name"].replace("/", "_").replace(":", "_"))
    key = f"{name}_{parts['tag'] or ('latest' if not parts['digest'] else 'digest')}"
    if parts["digest"]:
        key += "_" + parts["digest"].removeprefix("sha256:")[:12]
    folder = posixpath.join(root, key)
    return {
        "dir": folder,
        "volumes": [f"{folder}:{COMPILE_CACHE_MOUNT}:rw"],
        "env": {
            variable: posixpath.join(COMPILE_CACHE_MOUNT, sub)
            for variable, sub in COMPILE_CACHE_ENV.items()
        },
    }


class FilterModule:
    """Container filters."""

    def filters(self):
        return {"container_volumes": container_volumes, "compile_cache": compile_cache}
