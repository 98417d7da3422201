"""The lab's vLLM platform: vLLM's own CPU platform, with a Ray device key.

vLLM's CPU build refuses the Ray executor: ``CpuPlatform.ray_device_key`` is empty, and
``vllm/v1/executor/ray_utils.py`` (placement groups) and ``ray_executor_v2.py`` (each
worker asks Ray which devices it was given) refuse an empty key ("current platform cpu does
not support ray"). On a Spark the key is ``GPU``: Ray counts the GB10 as one GPU, vLLM's
placement group asks for one ``GPU`` bundle per rank, and each worker reads its device from
``ray.get_runtime_context().get_accelerator_ids()["GPU"]``.

This plugin gives the CPU platform the same key. The lab's Ray nodes declare their
emulated GB10 with ``ray start --num-gpus 1`` (Ray cannot detect a GPU that is emulated),
so the Ray cluster, its placement group and the executor are the ones a Spark runs; the
model's arithmetic stays vLLM's CPU code. Nothing else of the CPU platform changes: the
multiprocessing executor (the native path) serves exactly as without the plugin.

vLLM loads plugins of the ``vllm.platform_plugins`` entry point group and an activated
out-of-tree platform wins over the built-in ones (``vllm/platforms/__init__.py``).
"""

from __future__ import annotations


def register() -> str:
    """vLLM's hook: the qualified name of the platform class to use."""
    return "llmfleet_lab_ray_platform.platform.LabRayCpuPlatform"
