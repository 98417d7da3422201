"""The API key lives in its files and nowhere else; the Hub token nowhere on the way.

The session's `llmfleet up` ran with -vvv and kept ansible-runner's artifacts. The key must
not appear in that output, in any artifact (job events, stdout), on any node's process
command lines, in its journal, or in any file of a node that others may read. Where it must
be (vLLM's environment file, claude-code-router's environment, the client's wrapper), only
its owner can read it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from .conftest import Lab

KEY = "llmfleet-lab-key"  # inventory/lab/group_vars/all/serving.yml
# model_weights_hub_token there: handed to huggingface_hub on the controller and on spark-1.
HUB_TOKEN = "llmfleet-lab-hub-token"
NODES = ("spark-1", "spark-2")
# Every file of a node that others may read, but the image's Python packages (the roles never
# write there) and the pseudo file systems.
WORLD_READABLE_WITH_KEY = (
    "find / -xdev \\( -path /proc -o -path /sys -o -path /dev -o -path /opt/vllm/lib \\) -prune"
    " -o -type f -perm -o=r -size -64M -print0 | xargs -0 grep -lF -- {key} 2>/dev/null; true"
)


def test_the_run_output_and_its_artifacts_never_hold_the_key(
    site: subprocess.CompletedProcess[str], site_artifacts: Path
) -> None:
    assert site.returncode == 0, site.stdout[-4000:]
    assert len(site.stdout) > 300_000  # -vvv (about 650 KB)
    for secret in (KEY, HUB_TOKEN):
        assert secret not in site.stdout and secret not in site.stderr, secret
    files = [path for path in site_artifacts.rglob("*") if path.is_file()]
    (stdout,) = [path for path in files if path.name == "stdout"]
    assert stdout.read_text().count("module_args") > 100  # every module's arguments
    assert "hf_snapshot_info" in stdout.read_text()  # the token's task ran
    assert len([p for p in files if p.parent.name == "job_events"]) > 500, len(files)
    for secret in (KEY, HUB_TOKEN):
        assert [str(p) for p in files if secret in p.read_text(errors="replace")] == [], secret
    assert oct(site_artifacts.stat().st_mode & 0o777) == "0o700"


def test_no_process_journal_or_readable_file_on_a_node_holds_the_key(lab: Lab, site) -> None:
    for node in NODES:
        cmdlines = lab.out(node, "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '; true")
        assert "vllm serve --config" in cmdlines
        assert KEY not in cmdlines, node
        assert HUB_TOKEN not in cmdlines, node
        for secret in (KEY, HUB_TOKEN):
            journal = lab.out(node, f"journalctl --no-pager -o cat | grep -cF -- {secret}; true")
            assert journal.strip() == "0", (node, secret, journal)
        readable = lab.out(node, WORLD_READABLE_WITH_KEY.format(key=KEY), timeout=600)
        assert readable.split() == [], (node, readable)
        # Where the key must be, only root reads it.
        assert lab.out(
            node, "stat -c '%U %a' /etc/llmfleet/private /etc/llmfleet/private/vllm.env"
        ).split() == [
            "root",
            "700",
            "root",
            "600",
        ]


def test_the_client_wrapper_is_readable_by_its_owner_only(site) -> None:
    wrapper = Path.home() / ".local" / "bin" / "claude-local"
    assert KEY in wrapper.read_text()
    assert oct(wrapper.stat().st_mode & 0o077) == "0o0", oct(wrapper.stat().st_mode)
