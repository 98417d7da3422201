"""ray_node and vllm_server refuse an image named by a tag alone before anything changes,
with a message that names the host, the variable, the value and how to pin it; a tag and
digest passes, and so does a tag alone under llmfleet_allow_floating_image (or the role's
own variable)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.unit.roles.localhost_play import play_on_localhost

HERE = Path(__file__).parent
FLOATING = "vllm/vllm-openai:v0.11.0"
PINNED = f"{FLOATING}@sha256:{'0123456789abcdef' * 4}"

# What each role needs besides the image to pass its other checks on localhost: a model named
# by hub id (no config.json to read on this host), a key that is no placeholder, no GPUs
# (this host's engine cannot give any: test_gpu_container checks that refusal).
SETTINGS: dict[str, dict[str, Any]] = {
    "vllm_server": {
        "vllm_server_deployment": "container",
        "vllm_server_topology": "single_node",
        "vllm_server_profile": "qwen3_vl_two_sparks",
        "vllm_server_api_key": "unit-test-key-0123456789abcdef",
        "vllm_server_container_gpus": False,
    },
    "ray_node": {
        "ray_node_deployment": "container",
        "ray_node_nodes": ["localhost", "spark-2"],
        "ray_node_container_gpus": False,
    },
}
IMAGE_VARIABLE = {"vllm_server": "vllm_server_image", "ray_node": "ray_node_image"}


def run_role(role: str, entry: str, *options: str, **inventory: Any) -> tuple[int, str]:
    extra = {"role_under_test": role, "entry": entry, **SETTINGS[role], **inventory}
    proc = play_on_localhost(HERE / "validate_image.yml", extra, *options)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.parametrize("role", ["vllm_server", "ray_node"])
def test_a_tag_alone_is_refused_before_anything_changes(role: str) -> None:
    # The whole role, in check mode: were the check missing, nothing would change either.
    rc, output = run_role(role, "main", "--check", llmfleet_vllm_image=FLOATING)
    assert rc == 2, output[-3000:]
    message = " ".join(output.split())
    assert (
        f"localhost: {IMAGE_VARIABLE[role]} (llmfleet_vllm_image) is '{FLOATING}': a tag alone"
        f" ({FLOATING}) can change under a running cluster: name it by tag and digest, e.g."
        f" {FLOATING}@sha256:<64 hex> (`docker buildx imagetools inspect {FLOATING}` prints it),"
        " or set llmfleet_allow_floating_image: true"
    ) in message
    recap = re.search(r"localhost\s+: ok=\d+\s+changed=(\d+)\s+unreachable=0\s+failed=1", output)
    assert recap and recap.group(1) == "0", output[-3000:]
    # The checks come first: no task of a later phase ran.
    assert " : Write " not in output and "Create " not in output, output[-3000:]


@pytest.mark.parametrize("role", ["vllm_server", "ray_node"])
@pytest.mark.parametrize(
    "inventory",
    [
        {"llmfleet_vllm_image": PINNED},
        {"llmfleet_vllm_image": f"vllm/vllm-openai@sha256:{'0123456789abcdef' * 4}"},
        {"llmfleet_vllm_image": FLOATING, "llmfleet_allow_floating_image": True},
    ],
    ids=["tag_and_digest", "digest_alone", "floating_allowed"],
)
def test_a_pinned_image_or_an_allowed_tag_passes_the_checks(
    role: str, inventory: dict[str, Any]
) -> None:
    rc, output = run_role(role, "validate", **inventory)
    assert rc == 0, output[-3000:]


@pytest.mark.parametrize("role", ["vllm_server", "ray_node"])
def test_the_role_variable_allows_a_tag_alone_for_that_role(role: str) -> None:
    rc, output = run_role(
        role,
        "validate",
        llmfleet_vllm_image="llmfleet-lab/vllm-runtime:1",
        **{f"{role}_allow_floating_image": True},
    )
    assert rc == 0, output[-3000:]


@pytest.mark.parametrize("role", ["vllm_server", "ray_node"])
def test_a_bad_digest_names_the_value_and_how_to_read_the_right_one(role: str) -> None:
    rc, output = run_role(role, "validate", llmfleet_vllm_image=f"{FLOATING}@sha256:1234")
    assert rc == 2, output[-3000:]
    message = " ".join(output.split())
    assert (
        f"localhost: {IMAGE_VARIABLE[role]} (llmfleet_vllm_image) is '{FLOATING}@sha256:1234':"
        " its digest sha256:1234 is not sha256: followed by 64 lower-case hex digits"
    ) in message


def test_vllm_under_ray_in_containers_runs_the_ray_image_and_does_not_judge_its_own() -> None:
    # `vllm serve` runs inside the Ray head's container; vllm_server_image runs nowhere.
    rc, output = run_role(
        "vllm_server",
        "validate",
        vllm_server_topology="multi_node",
        vllm_server_executor="ray",
        vllm_server_nodes=["localhost", "spark-2"],
        vllm_server_image=FLOATING,
    )
    assert rc == 0, output[-3000:]
