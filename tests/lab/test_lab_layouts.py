"""The serving layout as a measured choice: `llmfleet tune --grid group_size=all,1` on a
2-node lab of its own, made with a gateway on spark-1 (`llmfleet lab up --gateway`) and
serving on the Spark sample's path (Ray in each node's Docker, vLLM in the Ray head
container). Point 1 is one group of two Sparks, tensor parallel 2 across them; point 2 is two
groups of one Spark, each its own Ray cluster and vLLM. Both are measured through the same
endpoint, the gateway, with Claude Code-shaped sessions; the report says which served the
sessions better, the inventory keeps it and the lab is left serving it.

Extended: three whole runs of site.yml and two session benchmarks on a lab of its own (about
25 minutes on CI's machine kind); the grid key, its checks and the report are unit-tested
(tests/unit/cli/test_tune.py), the lab's gateway option in tests/unit/lab."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from .conftest import ROOT, TEST_LAB, Lab, llmfleet
from .test_lab_tune import DECODING_SESSIONS, tune

pytestmark = pytest.mark.extended

LAYOUT_LAB = f"{TEST_LAB}-layouts"
ARTIFACTS = ROOT / "artifacts" / "lab-layouts"


@pytest.fixture(scope="module")
def gateway_lab() -> Iterator[Lab]:
    """A fresh 2-node lab whose first node runs the serving gateway; not served yet (the
    sweep's first point is its first run)."""
    llmfleet("lab", "down", "--name", LAYOUT_LAB)
    llmfleet("lab", "up", "--name", LAYOUT_LAB, "--gateway")
    try:
        yield Lab(LAYOUT_LAB)
    finally:
        llmfleet("lab", "down", "--name", LAYOUT_LAB)


def vllm_serving(lab: Lab, node: str) -> bool:
    """Whether a `vllm serve` process runs in the node's Ray container."""
    return bool(
        lab.sh(
            node, "docker exec llmfleet-ray pgrep -f 'vllm serve --config'", check=False
        ).stdout.split()
    )


def test_one_pair_and_two_single_sparks_are_measured_through_the_gateway(
    gateway_lab: Lab, tmp_path: Path
) -> None:
    lab = gateway_lab
    status = json.loads(llmfleet("lab", "status", "--json", "--name", lab.name))
    assert status["serving_path"] == "ray-container" and status["gateway"], status
    client = tmp_path / "client"
    reports, output = tune(
        lab, tmp_path, DECODING_SESSIONS, "group_size=all,1", "4",
        "-e", f"llmfleet_artifacts_dir={ARTIFACTS}",
        "-e", f"claude_code_bin_dir={client / 'bin'}",
        "-e", f"claude_code_install_dir={client / 'claude-code'}",
    )  # fmt: skip
    sweep = json.loads(reports.with_suffix(".json").read_text())
    pair, singles = sweep["points"]
    assert (pair["point"], singles["point"]) == ({"group_size": "all"}, {"group_size": 1})
    for point in (pair, singles):
        assert point.get("measured"), json.dumps(sweep["points"], indent=1)
        assert point["measured"]["sessions_c4"]["errors"] == 0, point
    # Both layouts went through the gateway: one group took every request, then two groups
    # shared them.
    shares = []
    for point in (pair, singles):
        [sessions] = [
            s
            for s in json.loads(Path(point["bench"]).read_text())["benchmark"]["scenarios"]
            if s.get("kind") == "session" and not s.get("warmup")
        ]
        shares.append(sorted(group["share"] for group in sessions["by_group"]))
    assert len(shares[0]) == 1 and len(shares[1]) == 2 and min(shares[1]) > 0, shares
    markdown = reports.with_suffix(".md").read_text()
    assert "- Layout (group_size): Sparks per serving group" in markdown
    assert markdown.count("**winner**") == 1
    winner = sweep["points"][sweep["winner"]]["point"]["group_size"]
    print(f"layouts on the lab, 4 sessions through the gateway: the winner is group_size={winner}")
    # The inventory keeps the winner, and the lab serves it.
    tuned = yaml.safe_load((tmp_path / "inventory/group_vars/all/tuned.yml").read_text())
    assert tuned["llmfleet_group_size"] == (None if winner == "all" else 1), tuned
    assert vllm_serving(lab, "spark-1")
    assert vllm_serving(lab, "spark-2") is (winner == 1)
    assert re.search(r"tune \[[#.]{24}\] [12]/2 group_size=", output), output[-4000:]
