"""vLLM's CPU communicator, with shared memory only between ranks of one host.

The CPU communicator exchanges tensors through /dev/shm when every rank of a group agrees
on one shared-memory name; the name comes from the distributed init port, which is the
same on every node. Ranks on two nodes then agree, and the second node fails to open a
segment that exists only on the first ("open shm in SHMManager failed. errno: 2"). vLLM's
multiprocessing executor across nodes never reaches this; its Ray executor does. Adding the
host to the name keeps shared memory between ranks of one host and gives ranks on several
hosts torch.distributed (Gloo over the fabric), as a CUDA platform gives them NCCL.
"""

from __future__ import annotations

import socket

import torch
from vllm.distributed.device_communicators.cpu_communicator import (
    CpuCommunicator,
    _CPUSHMDistributed,
)


class LabCpuCommunicator(CpuCommunicator):
    def _all_group_ranks_share_shm_group_name(self) -> bool:
        local = (socket.gethostname(), _CPUSHMDistributed.make_group_name(self))
        names: list[tuple[str, str] | None] = [None] * self.world_size
        torch.distributed.all_gather_object(names, local, group=self.device_group)
        return len(set(names)) == 1
