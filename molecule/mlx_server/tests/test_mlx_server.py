"""On Linux the role refuses before changing anything: no virtualenv, no agent, no log."""

from __future__ import annotations


def test_nothing_was_written(host) -> None:
    for path in (
        "/root/.local/share/llmfleet/vllm-mlx",
        "/root/Library/LaunchAgents/com.llmfleet.vllm-mlx.plist",
        "/root/Library/Logs/llmfleet",
    ):
        assert not host.file(path).exists, path
