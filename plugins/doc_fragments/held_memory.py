"""The options of cuda_free_memory that name our own processes, whose memory counts as free."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  held_by:
    description:
      - Part of the command line of processes whose memory is released before vLLM starts (our
        own running vLLM, which is about to be restarted, e.g.
        V(vllm serve --config /etc/llmfleet/vllm/serve.yaml)). They and their descendants count
        as free for the check; RV(held_pids) lists them and each GPU's C(held_gib) what they hold
        there.
      - On unified memory (GB10) that is their proportional set size (C(Pss) in
        C(/proc/PID/smaps_rollup), their CPU-side memory) plus what
        C(nvidia-smi --query-compute-apps) reports for their PIDs (CUDA allocations, which come
        from the same memory there but show in no process's RSS or PSS); on a GPU with memory
        of its own, what C(nvidia-smi --query-compute-apps) reports for their PIDs.
    type: str
  held_by_ray_node:
    description:
      - Our Ray node, under vLLM's Ray executor, where vLLM's workers hold the model on every
        node (C(ray::RayWorkerProc.run), C(ray::RayWorkerWrapper...) in older vLLM); a node
        other than rank 0 runs no C(vllm serve) at all. Its Ray workers that run a task or an
        actor (process title C(ray::NAME), not C(ray::IDLE)) and their descendants count as
        O(held_by)'s processes do; they end with their driver when vLLM restarts. Ray's own
        daemons (raylet, GCS, dashboard, agents) keep running and do not count.
      - The node is found by what supervises it, never by its command line, so that another
        Ray cluster on the host, even one started with the same command, is not counted. It is the
        main process of the systemd unit O(held_by_ray_node.unit) (C(systemctl show
        --property=MainPID)), or the first process of the container
        O(held_by_ray_node.container) (C(State.Pid) of C(container inspect), the
        C(ray start --block) of its entrypoint). A node that does not run counts nothing;
        RV(holders) says why.
    type: dict
    suboptions:
      unit:
        description: The systemd unit that runs C(ray start --block) (a native Ray node).
        type: str
      container:
        description: The container whose entrypoint is C(ray start --block).
        type: str
      engine:
        description: The engine that runs O(held_by_ray_node.container).
        type: str
        choices: [docker, podman]
        default: docker
  reclaim_cache_when_held:
    description:
      - On a unified-memory GPU where the processes of O(held_by) or O(held_by_ray_node) hold
        memory, count the reclaimable page cache as available too, because the caller drops it
        just before that vLLM restarts. RV(drop_cache_before_restart) says when the fit depends
        on it.
    type: bool
    default: false
"""
