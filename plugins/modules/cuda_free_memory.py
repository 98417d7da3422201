#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Ansible module cuda_free_memory: free memory per NVIDIA GPU and a vLLM fit check."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cuda_free_memory
short_description: Report free memory per NVIDIA GPU and check that vLLM will find enough
version_added: "0.1.0"
author:
  - llmfleet maintainers (!UNKNOWN)
description:
  - Reports the total, free and used memory of every NVIDIA GPU of the managed node, from NVML
    (the Python module C(pynvml) of the package C(nvidia-ml-py), used only when installed), else
    from C(nvidia-smi --query-gpu=index,name,uuid,memory.total,memory.free,memory.used
    --format=csv,noheader,nounits).
  - With O(gpu_memory_utilization) it makes the check vLLM makes at start-up and refuses to start
    on - free memory must be at least utilization x total memory on every GPU, else
    "Free memory on device cuda:0 (11.19/119.67 GiB) on startup is less than desired GPU memory
    utilization" - and fails before vLLM is launched, naming each GPU that does not fit with the
    numbers.
    O(required_gib) checks an absolute need per GPU instead, or as well.
  - "Unified memory (GB10, the chip of the DGX Spark): the GPU has no memory of its own, NVML
    answers C(Not Supported) to the memory query and nvidia-smi prints C([N/A]). Such a GPU (also
    recognised by a name containing C(GB10)) gets the operating system's memory from
    O(meminfo_path): total is C(MemTotal), free is C(MemFree) (see O(unified_memory_free)), and
    RV(page_cache_gib) says how much of the rest is page cache that
    C(sync; echo 3 > /proc/sys/vm/drop_caches) would give back."
  - A host without NVIDIA GPU (no NVML library, no nvidia-smi, or a driver that sees no device)
    is not an error unless O(fail_on_no_gpu) is set; RV(gpu_count) is C(0) and RV(msg) says why.
  - Read-only; never reports a change.
options:
  gpus:
    description:
      - Only report and check these GPU indexes (NVML / nvidia-smi numbering, which ignores
        E(CUDA_VISIBLE_DEVICES)).
      - An index that is not present fails the task, listing the GPUs that are.
    type: list
    elements: int
  required_gib:
    description:
      - Memory each GPU must have free, in GiB (2^30 bytes).
      - With O(gpu_memory_utilization) as well, the larger of the two needs applies.
    type: float
  gpu_memory_utilization:
    description:
      - vLLM's C(--gpu-memory-utilization), greater than 0 and at most 1. vLLM refuses to start
        when a GPU's free memory is below this fraction of its total memory; so does this module.
    type: float
  method:
    description:
      - Where to read the memory from.
      - V(auto) tries NVML, then nvidia-smi; RV(fallback_reason) says why NVML was not used.
      - V(nvml) or V(nvidia_smi) use only that method and fail the task when it does not work.
    type: str
    choices: [auto, nvml, nvidia_smi]
    default: auto
  nvidia_smi_path:
    description:
      - The nvidia-smi executable, a name looked up in E(PATH) (and the sbin directories) or a path.
    type: str
    default: nvidia-smi
  meminfo_path:
    description:
      - The file read for unified-memory GPUs. Only tests need another one.
    type: path
    default: /proc/meminfo
  unified_memory_free:
    description:
      - Which C(/proc/meminfo) field is a unified-memory GPU's free memory.
      - V(MemFree) is what CUDA's C(cudaMemGetInfo), and so vLLM's start-up check, reports on a
        GB10, where page cache does not count as free. V(MemAvailable) counts reclaimable cache as
        free (what C(free -h) shows as available); use it for engines that read it themselves.
    type: str
    choices: [MemFree, MemAvailable]
    default: MemFree
  fail_on_no_gpu:
    description:
      - Fail the task when no NVIDIA GPU is found.
    type: bool
    default: false
extends_documentation_fragment:
  - llmfleet.cluster.held_memory
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Only reads, so check mode returns the same result as a normal run.
  diff_mode:
    support: none
  idempotent:
    description:
      - When run twice in a row, the second run reports the same state and changes nothing.
    support: full
    details: Read-only; C(changed) is always false. Free memory itself moves between runs.
  platform:
    platforms: posix
    details: Linux with the NVIDIA driver; C(/proc/meminfo) for unified-memory GPUs.
requirements:
  - On the managed node, the Python package C(nvidia-ml-py) (optional; without it nvidia-smi
    from the NVIDIA driver is used).
notes:
  - "The page cache estimate is C(Cached - Shmem): shared memory and tmpfs pages are counted in
    C(Cached) but dropping caches cannot free them. C(Buffers) is not counted."
  - NVML's C(used) includes the memory the driver reserves (a few hundred MiB on an H100), so
    C(free + used = total) there; nvidia-smi leaves the reserved memory out of both.
  - A fit check on a host without GPU checks nothing; RV(fits) is null and the task succeeds unless
    O(fail_on_no_gpu) is set.
seealso:
  - name: DGX Spark known issues (memory reporting on unified memory)
    description: Why nvidia-smi and NVML report no GPU memory on a GB10.
    link: https://docs.nvidia.com/dgx/dgx-spark/known-issues.html
  - name: nvidia-ml-py
    description: NVIDIA's Python bindings for NVML (the C(pynvml) module).
    link: https://pypi.org/project/nvidia-ml-py/
"""

EXAMPLES = r"""
- name: Report the free memory of every GPU
  llmfleet.cluster.cuda_free_memory:
  register: __vllm_gpu_memory

- name: Make sure vLLM will find 82% of every GPU free before starting it
  llmfleet.cluster.cuda_free_memory:
    gpu_memory_utilization: 0.82
    fail_on_no_gpu: true

- name: Check the memory, drop the page cache once if that is what is missing, check again
  block:
    - name: Check that vLLM will find the memory it needs
      llmfleet.cluster.cuda_free_memory:
        gpu_memory_utilization: "{{ vllm_gpu_memory_utilization }}"
        fail_on_no_gpu: true
  rescue:
    - name: Drop the page cache, which holds the weights of the last run on a DGX Spark
      ansible.builtin.shell: sync && echo 3 > /proc/sys/vm/drop_caches
      become: true
      changed_when: true
      when: ansible_failed_result.page_cache_gib | default(0, true) | float > 0

    - name: Check again that vLLM will find the memory it needs
      llmfleet.cluster.cuda_free_memory:
        gpu_memory_utilization: "{{ vllm_gpu_memory_utilization }}"
        fail_on_no_gpu: true

- name: Check a Spark of a serving Ray cluster, counting what vLLM and its Ray workers hold
  llmfleet.cluster.cuda_free_memory:
    gpu_memory_utilization: 0.82
    held_by: vllm serve --config /etc/llmfleet/vllm/serve.yaml
    held_by_ray_node:
      container: llmfleet-ray
      engine: docker
    reclaim_cache_when_held: true

- name: Need 40 GiB free on GPUs 0 and 1, reading nvidia-smi only
  llmfleet.cluster.cuda_free_memory:
    gpus: [0, 1]
    required_gib: 40
    method: nvidia_smi

- name: Show what is free and how much dropping caches would add
  ansible.builtin.debug:
    msg: >-
      {{ __vllm_gpu_memory.gpus | map(attribute='free_gib') | list }} GiB free,
      page cache {{ __vllm_gpu_memory.page_cache_gib }} GiB
"""

RETURN = r"""
msg:
  description:
    - One line. Found GPUs with their free memory; C(no NVIDIA GPU found (...)) with the reasons;
      or, when the fit check fails, one part per GPU that does not fit (joined by C( | )) with the
      numbers and what to do.
  returned: always
  type: str
  sample: >-
    GPU 0 (NVIDIA GB10): free 11.19 GiB of 119.67 GiB, vLLM needs 0.82 x 119.67 = 98.13 GiB;
    107.50 GiB of the rest is page cache: drop caches (preflight_drop_caches) or lower
    gpu_memory_utilization
gpu_count:
  description: Number of GPUs reported (after O(gpus)); C(0) when there is none.
  returned: always
  type: int
  sample: 1
source:
  description: The method that answered - C(nvml), C(nvidia-smi), or C(none) when no GPU was found.
  returned: always
  type: str
  sample: nvml
fallback_reason:
  description:
    - Why the methods tried before RV(source) did not answer (all of them when RV(source) is
      C(none)), joined by C(; ); null when the first method answered.
  returned: always
  type: str
  sample: "NVML: Driver Not Loaded"
fits:
  description:
    - True when every reported GPU has the memory asked for, false when one does not (the task then
      fails); null when nothing was asked or there is no GPU.
  returned: always
  type: bool
  sample: false
drop_cache_before_restart:
  description:
    - True when a GPU fits only with its page cache counted (O(reclaim_cache_when_held)). The page
      cache must then be dropped before the vLLM of O(held_by) restarts.
  returned: always
  type: bool
  sample: false
held_pids:
  description:
    - The processes O(held_by) matched, with their descendants, and the busy Ray workers of
      O(held_by_ray_node) with theirs (empty without either).
  returned: when a GPU was found
  type: list
  elements: int
  sample: [4121, 4188, 4190]
holders:
  description:
    - One entry per holder looked for (O(held_by), then O(held_by_ray_node)), empty without
      either - C(name) as messages say it, C(pids) its processes counted (each process for the
      first holder that has it), C(why) it has none (not running, no busy Ray worker) or null.
  returned: when a GPU was found
  type: list
  elements: dict
  sample: [{name: Ray workers of container llmfleet-ray, pids: [5120, 5188], why: null}]
page_cache_gib:
  description:
    - Reclaimable page cache of the host in GiB (C(Cached - Shmem) from C(/proc/meminfo)), what
      dropping caches would add to a unified-memory GPU's free memory. Null when no reported GPU
      uses unified memory.
  returned: always
  type: float
  sample: 107.5
unified_memory_free:
  description: The C(/proc/meminfo) field used as a unified-memory GPU's free memory.
  returned: always
  type: str
  sample: MemFree
gpus:
  description:
    - One entry per GPU, by index. Sizes in GiB (2^30 bytes), rounded to 2 decimals.
    - The sample is a DGX Spark (GB10) after a run that read a 115 GB model, before dropping caches,
      checked with O(gpu_memory_utilization=0.82); the samples of the fields below are an idle H100
      80GB read through NVML and checked with O(gpu_memory_utilization=0.9).
  returned: always
  type: list
  elements: dict
  sample:
    - index: 0
      name: NVIDIA GB10
      uuid: GPU-2dee1e25-b3b5-007e-2b55-79f2d0f2ebe5
      total_gib: 119.67
      free_gib: 11.19
      used_gib: 108.48
      available_gib: 116.9
      page_cache_gib: 107.5
      unified_memory: true
      source: os-meminfo MemFree (unified memory)
      required_gib: 98.13
      fits: false
  contains:
    index:
      description: GPU index (NVML / nvidia-smi numbering).
      type: int
      returned: always
      sample: 0
    name:
      description: Product name.
      type: str
      returned: always
      sample: NVIDIA H100 80GB HBM3
    uuid:
      description: GPU UUID.
      type: str
      returned: always
      sample: GPU-9f3c2a6e-5b1d-4c8e-a0f7-3d2b6e1c4a58
    total_gib:
      description: Total memory; C(MemTotal) for unified memory.
      type: float
      returned: always
      sample: 79.65
    free_gib:
      description: Free memory, as vLLM's start-up check sees it; C(MemFree) (or
        C(MemAvailable), see O(unified_memory_free)) for unified memory.
      type: float
      returned: always
      sample: 79.11
    used_gib:
      description: Used memory (NVML counts the driver's reserved memory in it); total minus free
        for unified memory.
      type: float
      returned: always
      sample: 0.54
    available_gib:
      description: C(MemAvailable) for unified memory (free plus what the kernel can reclaim);
        null for a GPU with its own memory.
      type: float
      returned: always
      sample: null
    page_cache_gib:
      description: Reclaimable page cache (C(Cached - Shmem)) for unified memory; null otherwise.
      type: float
      returned: always
      sample: null
    unified_memory:
      description: True when the GPU shares the OS's memory (NVML Not Supported, nvidia-smi
        C([N/A]), or a GB10).
      type: bool
      returned: always
      sample: false
    source:
      description: Where this GPU's numbers come from - C(nvml), C(nvidia-smi), or for unified
        memory V(os-meminfo MemFree (unified memory\)) (the field named is
        O(unified_memory_free)).
      type: str
      returned: always
      sample: nvml
    required_gib:
      description: Memory the check asked for on this GPU (utilization x total, or O(required_gib),
        the larger); null when nothing was asked.
      type: float
      returned: always
      sample: 71.68
    held_gib:
      description: What the processes of O(held_by) and O(held_by_ray_node) hold on this GPU,
        counted as free by the check (0 without either).
      type: float
      returned: always
      sample: 2.41
    held_by:
      description: RV(gpus[].held_gib) by holder (RV(holders)), those that have a process.
      type: list
      elements: dict
      returned: always
      sample: [{name: "vllm serve --config /etc/llmfleet/vllm/serve.yaml", held_gib: 2.41}]
    fits:
      description: Whether free memory plus RV(gpus[].held_gib) (plus the page cache, see
        RV(gpus[].cache_needed)) is at least RV(gpus[].required_gib); null when nothing was asked.
      type: bool
      returned: always
      sample: true
    cache_needed:
      description: True when this GPU fits only with its page cache counted
        (O(reclaim_cache_when_held)).
      type: bool
      returned: always
      sample: false
"""

# Ansible's module layout: documentation first, imports after it.
from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.llmfleet.cluster.plugins.module_utils._memory.gpu_memory import (  # noqa: E402
    METHODS,
    GpuMemoryError,
    gather,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._memory.held_memory import (  # noqa: E402
    CONTAINER_ENGINES,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._memory.meminfo import (  # noqa: E402
    UNIFIED_FREE_FIELDS,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._memory.nvidia_query import (  # noqa: E402
    load_pynvml,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._memory.vllm_fit import (  # noqa: E402
    validate_fit_args,
)

ARGUMENT_SPEC = {
    "gpus": {"type": "list", "elements": "int"},
    "required_gib": {"type": "float"},
    "gpu_memory_utilization": {"type": "float"},
    "method": {"type": "str", "choices": list(METHODS), "default": "auto"},
    "nvidia_smi_path": {"type": "str", "default": "nvidia-smi"},
    "meminfo_path": {"type": "path", "default": "/proc/meminfo"},
    "unified_memory_free": {
        "type": "str",
        "choices": list(UNIFIED_FREE_FIELDS),
        "default": "MemFree",
    },
    "fail_on_no_gpu": {"type": "bool", "default": False},
    "held_by": {"type": "str"},
    "held_by_ray_node": {
        "type": "dict",
        "options": {
            "unit": {"type": "str"},
            "container": {"type": "str"},
            "engine": {"type": "str", "choices": list(CONTAINER_ENGINES), "default": "docker"},
        },
        "mutually_exclusive": [["unit", "container"]],
        "required_one_of": [["unit", "container"]],
    },
    "reclaim_cache_when_held": {"type": "bool", "default": False},
}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    problems = validate_fit_args(params["required_gib"], params["gpu_memory_utilization"])
    if problems:
        module.fail_json(msg="; ".join(problems))
    nvidia_smi = None
    if params["method"] != "nvml":
        nvidia_smi = module.get_bin_path(params["nvidia_smi_path"])
    try:
        result = gather(
            method=params["method"],
            nvml_loader=load_pynvml,
            nvidia_smi_path=nvidia_smi,
            nvidia_smi_wanted=params["nvidia_smi_path"],
            run=module.run_command,
            meminfo_path=params["meminfo_path"],
            gpus=params["gpus"],
            required_gib=params["required_gib"],
            gpu_memory_utilization=params["gpu_memory_utilization"],
            unified_free=params["unified_memory_free"],
            held_by=params["held_by"],
            held_by_ray_node=params["held_by_ray_node"],
            which=module.get_bin_path,
            reclaim_cache_when_held=params["reclaim_cache_when_held"],
        )
    except GpuMemoryError as error:
        module.fail_json(msg=str(error), **error.details)
    if result.pop("failed", False) or (result["gpu_count"] == 0 and params["fail_on_no_gpu"]):
        module.fail_json(changed=False, **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
