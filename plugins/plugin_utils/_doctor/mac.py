# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""The checks of ``llmfleet doctor`` on a Mac Studio serving with vllm-mlx under launchd, judged
from what the mlx_server role's status entry point read (``mlx``: the agent, health, models,
memory and swap, the end of the log). Pure: no host is reached."""

from __future__ import annotations

from ansible_collections.llmfleet.cluster.plugins.plugin_utils._doctor.evidence import (
    GIB,
    finding,
)

# Swap in use beyond this while serving: the model and its cache do not fit in memory (macOS
# keeps a little swap in use for idle applications at any time).
MAC_SWAP_LIMIT_BYTES = GIB


def _last_log_line(mlx):
    lines = [line for line in (mlx.get("log") or {}).get("lines") or [] if line.strip()]
    return lines[-1] if lines else None


def check_mlx_agent(doc):
    """launchd's system domain has vllm-mlx's LaunchDaemon loaded, and its process runs (the
    check and the evidence's ``agent`` keep the names they had when it was a LaunchAgent)."""
    mlx = doc["mlx"]
    agent = mlx["agent"]
    label = agent["label"]
    if not agent["installed"]:
        evidence = "no LaunchDaemon at {}".format(agent["plist"])
    elif not agent["loaded"]:
        evidence = "{} is there but launchd's system domain has no service {}".format(
            agent["plist"], label
        )
    elif not agent["running"]:
        evidence = "launchd has {} loaded without a process, last exit status {}".format(
            label, agent["last_exit_status"]
        )
        last = _last_log_line(mlx)
        if last:
            evidence += "; its log ends: " + last
    else:
        evidence = "{} runs as PID {}".format(label, agent["pid"])
    return finding(
        "mlx_agent",
        "vllm-mlx runs under launchd",
        doc["host"],
        not agent["running"],
        evidence,
        "llmfleet up -i INV installs and loads the daemon again; llmfleet logs -i INV shows why "
        "vllm-mlx exited",
    )


def check_mlx_api(doc):
    """vllm-mlx answers /health and lists the model clients ask for."""
    mlx = doc["mlx"]
    wanted = mlx["served_model_name"]
    if mlx["health"] != 200:
        problem = True
        evidence = "{}/health: {}".format(mlx["url"], mlx["health_error"] or mlx["health"])
    else:
        problem = wanted not in mlx["models"]
        evidence = "{}/v1/models lists {}; clients ask for {}".format(
            mlx["url"], ", ".join(mlx["models"]) or "no model", wanted
        )
    return finding(
        "mlx_api",
        "vllm-mlx answers and serves the model clients ask for",
        doc["host"],
        problem,
        evidence,
        "a first start downloads the model before it answers (llmfleet logs -i INV --follow); "
        "else llmfleet up -i INV serves mlx_server_model under mlx_server_served_model_name",
    )


def check_mlx_swap(doc):
    """Little or no swap in use: a Mac that swaps under vllm-mlx answers at a fraction of its
    speed."""
    memory = doc["mlx"]["memory"]
    used = memory["swap"]["used_bytes"]
    return finding(
        "mlx_swap",
        "the model and its cache fit in memory (no swapping)",
        doc["host"],
        used > MAC_SWAP_LIMIT_BYTES,
        "{:.1f} GiB of swap in use, {:.0f} GiB of unified memory".format(
            used / GIB, memory["total_bytes"] / GIB
        ),
        "serve a smaller quantization or model, lower mlx_server_max_tokens, or quit what else "
        "holds memory on the Mac",
    )


MAC_CHECKS = (check_mlx_agent, check_mlx_api, check_mlx_swap)


def mac_findings(docs):
    """Every Mac check over the Macs' evidence, check by check."""
    return [check(doc) for check in MAC_CHECKS for doc in docs]
