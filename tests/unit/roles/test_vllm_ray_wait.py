"""vllm_server's files/llmfleet-vllm-ray-wait: before rank 0's vLLM starts on the Ray
executor, `ray status` is asked until it lists every node of the group (after the Ray head
went, the other nodes rejoin about a minute later), for at most the timeout."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / "roles/vllm_server/files/llmfleet-vllm-ray-wait"

# A fake `ray status`: each call lists one more live node than the last (a counter file),
# up to the number given; fails (as `ray status` does without a head) while the count is 0.
FAKE_RAY_STATUS = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    counter, most = Path(sys.argv[1]), int(sys.argv[2])
    calls = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(calls + 1))
    if calls == 0:
        sys.exit("ConnectionError: could not find any running Ray instance")
    print("======== Autoscaler status ========")
    print("Node status")
    print("Active:")
    for n in range(min(calls, most)):
        print(f" 1 node_{n:040x}")
    print("Pending:")
    print(" (no pending nodes)")
    """
)


def wait(tmp_path: Path, nodes: int, timeout: float, most: int) -> subprocess.CompletedProcess:
    fake = tmp_path / "ray_status.py"
    fake.write_text(FAKE_RAY_STATUS)
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--nodes", str(nodes), "--timeout", str(timeout),
         "--interval", "0.1", "--", sys.executable, str(fake), str(tmp_path / "calls"),
         str(most)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_it_waits_through_a_missing_head_until_every_node_is_listed(tmp_path: Path) -> None:
    proc = wait(tmp_path, nodes=2, timeout=30, most=2)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("the Ray cluster lists 2 of the 2 nodes vLLM runs on (after")
    # No head, then one node, then both.
    assert (tmp_path / "calls").read_text() == "3"


def test_it_fails_in_time_naming_the_count(tmp_path: Path) -> None:
    proc = wait(tmp_path, nodes=3, timeout=1, most=2)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (
        proc.stdout.strip()
        == "the Ray cluster lists 2 of the 3 nodes vLLM runs on after 1 s: (no pending nodes)"
    )


def test_a_head_that_never_answers_is_named(tmp_path: Path) -> None:
    proc = wait(tmp_path, nodes=2, timeout=0.05, most=2)
    assert proc.returncode == 1
    assert proc.stdout.strip().endswith(
        "after 0 s: ConnectionError: could not find any running Ray instance"
    ), proc.stdout
