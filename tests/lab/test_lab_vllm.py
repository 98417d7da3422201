"""The node image serves real vLLM (CPU build) with the generated model."""

from __future__ import annotations

import json
import time

from .conftest import Lab

UNIT = "llmfleet-test-vllm"
MODEL = "/opt/models/llmfleet-tiny"


def test_vllm_serves_the_generated_model_on_a_node(lab: Lab) -> None:
    lab.sh(
        "spark-1",
        f"systemd-run --unit={UNIT} --setenv=VLLM_CPU_KVCACHE_SPACE=1 --setenv=HF_HUB_OFFLINE=1 "
        f"/opt/vllm/bin/python -m vllm.entrypoints.openai.api_server --model {MODEL} "
        "--served-model-name llmfleet-tiny --max-model-len 8192 --dtype bfloat16 "
        "--host 127.0.0.1 --port 8000",
    )
    try:
        deadline = time.monotonic() + 300
        while lab.sh("spark-1", "curl -sf localhost:8000/health", check=False).returncode != 0:
            active = lab.sh("spark-1", f"systemctl is-active {UNIT}", check=False).stdout.strip()
            if active not in ("active", "activating") or time.monotonic() > deadline:
                log = lab.out("spark-1", f"journalctl -u {UNIT} -n 40 --no-pager")
                raise AssertionError(f"vLLM did not become healthy ({active}):\n{log}")
            time.sleep(3)
        models = json.loads(lab.out("spark-1", "curl -sf localhost:8000/v1/models"))
        assert [m["id"] for m in models["data"]] == ["llmfleet-tiny"]
        body = json.dumps(
            {
                "model": "llmfleet-tiny",
                "messages": [{"role": "user", "content": "Say hello."}],
                "max_tokens": 32,
            }
        )
        reply = json.loads(
            lab.out(
                "spark-1",
                "curl -sf localhost:8000/v1/chat/completions "
                f"-H 'content-type: application/json' -d '{body}'",
            )
        )
        assert reply["object"] == "chat.completion"
        assert reply["model"] == "llmfleet-tiny"
        assert reply["usage"]["prompt_tokens"] > 5
        assert 1 <= reply["usage"]["completion_tokens"] <= 32
        assert isinstance(reply["choices"][0]["message"]["content"], str)
    finally:
        lab.sh("spark-1", f"systemctl stop {UNIT}", check=False)
