"""vLLM's CPU platform, placed by Ray as a GPU (see the package's docstring)."""

from __future__ import annotations

from vllm.platforms.cpu import CpuPlatform


class LabRayCpuPlatform(CpuPlatform):
    # The resource Ray's placement group asks for per rank, and the accelerator kind each
    # worker reads its device from: what a Spark's CUDA platform uses.
    ray_device_key = "GPU"

    @classmethod
    def get_device_communicator_cls(cls) -> str:
        return "llmfleet_lab_ray_platform.communicator.LabCpuCommunicator"
