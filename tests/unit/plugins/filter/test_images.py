"""Image filters: references parsed as docker parses them, floating tags refused with how
to pin them, the images a host pulls, and the lines of the report."""

from __future__ import annotations

from typing import Any

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.filter.images import (
    FilterModule,
    image_reference,
    image_reference_problems,
    images_pull_failures,
    images_running,
    images_to_pull,
)

DIGEST = "sha256:" + "0123456789abcdef" * 4
OTHER = "sha256:" + "f" * 64
VAR = "vllm_server_image (llmfleet_vllm_image)"


@pytest.mark.parametrize(
    ("ref", "name", "registry", "repository", "tag", "digest"),
    [
        ("ubuntu", "ubuntu", "", "ubuntu", "", ""),
        ("vllm/vllm-openai:v0.11.0", "vllm/vllm-openai", "", "vllm/vllm-openai", "v0.11.0", ""),
        (
            f"vllm/vllm-openai:v0.11.0@{DIGEST}",
            "vllm/vllm-openai",
            "",
            "vllm/vllm-openai",
            "v0.11.0",
            DIGEST,
        ),
        (f"vllm/vllm-openai@{DIGEST}", "vllm/vllm-openai", "", "vllm/vllm-openai", "", DIGEST),
        (
            "registry.example.com:5000/org/team/vllm:1.2_rc-3",
            "registry.example.com:5000/org/team/vllm",
            "registry.example.com:5000",
            "org/team/vllm",
            "1.2_rc-3",
            "",
        ),
        # A port without a tag: the last ":" is the registry's.
        (
            "localhost:5000/llmfleet/ray",
            "localhost:5000/llmfleet/ray",
            "localhost:5000",
            "llmfleet/ray",
            "",
            "",
        ),
        ("localhost/ray:2", "localhost/ray", "localhost", "ray", "2", ""),
        (
            f"nvcr.io/nvidia/vllm:25.11-py3@{DIGEST}",
            "nvcr.io/nvidia/vllm",
            "nvcr.io",
            "nvidia/vllm",
            "25.11-py3",
            DIGEST,
        ),
        ("[::1]:5000/img:1", "[::1]:5000/img", "[::1]:5000", "img", "1", ""),
        (
            "llmfleet-lab/vllm-runtime:1",
            "llmfleet-lab/vllm-runtime",
            "",
            "llmfleet-lab/vllm-runtime",
            "1",
            "",
        ),
        ("a__b/c.d/e--f:x", "a__b/c.d/e--f", "", "a__b/c.d/e--f", "x", ""),
    ],
)
def test_image_reference_parses_the_forms_docker_accepts(
    ref: str, name: str, registry: str, repository: str, tag: str, digest: str
) -> None:
    parsed = image_reference(ref)
    assert (parsed["name"], parsed["registry"], parsed["repository"]) == (
        name,
        registry,
        repository,
    )
    assert (parsed["tag"], parsed["digest"], parsed["reference"]) == (tag, digest, ref)
    assert parsed["pinned"] is bool(digest)
    assert parsed["pull"] == (f"{name}@{digest}" if digest else ref)


@pytest.mark.parametrize(
    ("ref", "why"),
    [
        ("", "empty"),
        ("vllm/vllm-openai :v1", "space"),
        ("Vllm-openai:v1", "upper case"),
        ("vllm//openai", "components"),
        ("vllm/vllm-openai:", "nothing follows the :"),
        (f"vllm/vllm-openai:v1@{DIGEST}@{DIGEST}", "more than one @"),
        ("vllm/vllm-openai:v1@", "nothing follows its @"),
        ("vllm/vllm-openai:-v1", "its tag -v1"),
        ("vllm/vllm-openai:v1@sha256:abc", "its digest sha256:abc"),
        ("vllm/vllm-openai:v1@sha512:" + "a" * 128, "is not sha256:"),
        ("vllm/vllm-openai:v1@sha256:" + "A" * 64, "lower-case hex"),
        ("reg_istry.io/x:1", "its registry reg_istry.io"),
        ("a" * 256, "256 characters"),
    ],
)
def test_image_reference_refuses_what_no_engine_would_take(ref: str, why: str) -> None:
    with pytest.raises(AnsibleFilterError, match="image_reference") as info:
        image_reference(ref)
    assert why in str(info.value)


def test_a_pinned_reference_has_no_problem_whatever_allow_floating_says() -> None:
    for ref in (f"vllm/vllm-openai:v0.11.0@{DIGEST}", f"vllm/vllm-openai@{DIGEST}"):
        assert image_reference_problems(ref, VAR) == []
        assert image_reference_problems(ref, VAR, True) == []


def test_a_tag_alone_is_refused_with_how_to_pin_it() -> None:
    [problem] = image_reference_problems("vllm/vllm-openai:v0.11.0", VAR, False)
    assert problem == (
        "vllm_server_image (llmfleet_vllm_image) is 'vllm/vllm-openai:v0.11.0': a tag alone"
        " (vllm/vllm-openai:v0.11.0) can change under a running cluster: name it by tag and"
        " digest, e.g. vllm/vllm-openai:v0.11.0@sha256:<64 hex> (`docker buildx imagetools"
        " inspect vllm/vllm-openai:v0.11.0` prints it), or set llmfleet_allow_floating_image: true"
    )


def test_no_tag_at_all_is_latest_and_refused_the_same_way() -> None:
    [problem] = image_reference_problems("ghcr.io/org/ray", "ray_node_image")
    assert "a tag alone (ghcr.io/org/ray:latest)" in problem


@pytest.mark.parametrize("allowed", [True, "true", "yes", 1])
def test_a_tag_alone_is_accepted_when_floating_is_allowed(allowed: Any) -> None:
    assert image_reference_problems("llmfleet-lab/vllm-runtime:1", VAR, allowed) == []


@pytest.mark.parametrize(("value", "shown"), [("", "''"), (None, "''"), ("   ", "'   '")])
def test_an_empty_value_names_the_variable_and_what_is_needed(value: Any, shown: str) -> None:
    [problem] = image_reference_problems(value, "ray_node_image (llmfleet_vllm_image)", True)
    assert problem.startswith(f"ray_node_image (llmfleet_vllm_image) is {shown}: ")
    assert "needs an image reference named by tag and digest" in problem


def test_a_malformed_value_is_named_with_the_reason_and_the_form_expected() -> None:
    [problem] = image_reference_problems("vllm/vLLM-openai:v1", VAR, True)
    assert problem.startswith(f"{VAR} is 'vllm/vLLM-openai:v1': not an image reference")
    assert "its repository vllm/vLLM-openai has upper case" in problem
    assert "[registry[:port]/]path[:tag]@sha256:<64 hex>" in problem


def test_a_bad_digest_is_named_with_how_to_read_the_right_one() -> None:
    [problem] = image_reference_problems("vllm/vllm-openai:v1@sha256:1234", VAR, True)
    assert "its digest sha256:1234 is not sha256: followed by 64 lower-case hex digits" in problem
    assert "`docker buildx imagetools inspect vllm/vllm-openai:v1` prints it" in problem


def test_images_to_pull_groups_by_engine_once_each_and_leaves_out_what_does_not_run() -> None:
    pinned = f"vllm/vllm-openai:v0.11.0@{DIGEST}"
    launches = [
        {"image": pinned, "engine": "docker", "runs": True},
        {"image": pinned, "engine": "docker", "runs": True},
        {"image": "other:1", "engine": "docker", "runs": False},
        {"image": "ray:2", "engine": "podman", "runs": "True"},
        {"image": "", "engine": "docker", "runs": True},
        {"image": "default-engine:1"},
    ]
    assert images_to_pull(launches) == {
        "docker": [pinned, "default-engine:1"],
        "podman": ["ray:2"],
    }
    assert images_to_pull([]) == {}
    assert images_to_pull([{"image": "x:1", "runs": "false"}]) == {}


def test_images_to_pull_refuses_a_launch_that_is_no_mapping() -> None:
    with pytest.raises(AnsibleFilterError, match="each launch is a mapping"):
        images_to_pull(["vllm/vllm-openai:v1"])


def test_images_running_shows_one_line_per_container_and_what_to_pin() -> None:
    containers = {
        "llmfleet-vllm": {
            "reference": f"vllm/vllm-openai:v0.11.0@{DIGEST}",
            "image_id": "sha256:" + "1" * 64,
            "repo_digests": [f"vllm/vllm-openai@{DIGEST}"],
        },
        "llmfleet-ray": {
            "reference": "vllm/vllm-openai:nightly",
            "image_id": "sha256:" + "2" * 64,
            "repo_digests": [f"docker.io/vllm/vllm-openai@{OTHER}"],
        },
        "llmfleet-lab": {
            "reference": "llmfleet-lab/vllm-runtime:1",
            "image_id": "sha256:" + "3" * 64,
            "repo_digests": [],
        },
        "llmfleet-stale": {
            "reference": f"vllm/vllm-openai:v0.11.0@{DIGEST}",
            "image_id": "sha256:" + "4" * 64,
            "repo_digests": [f"vllm/vllm-openai@{OTHER}"],
        },
    }
    assert images_running(containers, "spark-1") == [
        f"spark-1: llmfleet-lab runs llmfleet-lab/vllm-runtime:1 (image sha256:{'3' * 64});"
        " floating, and the image has no registry digest (a local build)",
        f"spark-1: llmfleet-ray runs vllm/vllm-openai:nightly (image sha256:{'2' * 64});"
        f" floating: vllm/vllm-openai:nightly@{OTHER} pins what runs now",
        f"spark-1: llmfleet-stale runs vllm/vllm-openai:v0.11.0@{DIGEST} (image sha256:{'4' * 64});"
        f" its digests ({OTHER}) are not the pinned {DIGEST}",
        f"spark-1: llmfleet-vllm runs vllm/vllm-openai:v0.11.0@{DIGEST} (image sha256:{'1' * 64})",
    ]


def test_images_running_of_no_record_is_nothing_and_a_bad_entry_still_a_line() -> None:
    assert images_running({}, "gh200-1") == []
    assert images_running({"x": "junk"}, "gh200-1") == ["gh200-1: x runs ? (image ?)"]
    assert images_running({"x": {"reference": "Bad Ref", "image_id": "sha256:1"}}, "h") == [
        "h: x runs Bad Ref (image sha256:1)"
    ]
    with pytest.raises(AnsibleFilterError, match="images_running"):
        images_running(["x"], "h")


def test_filters_are_registered() -> None:
    assert FilterModule().filters() == {
        "image_reference": image_reference,
        "image_reference_problems": image_reference_problems,
        "images_to_pull": images_to_pull,
        "images_pull_failures": images_pull_failures,
        "images_running": images_running,
    }


def test_images_pull_failures_names_each_failed_reference_with_the_engines_reason() -> None:
    pinned = image_reference(f"vllm/vllm-openai:v0.11.0@{DIGEST}")
    local = image_reference("llmfleet-lab/vllm-runtime:1")
    failed = {
        "failed": True,
        "results": [
            {"item": image_reference("ok:1"), "failed": False, "changed": True},
            {
                "item": pinned,
                "failed": True,
                "msg": f"Failed to pull image {pinned['pull']}",
                "stderr": "Trying to pull...\nError: manifest unknown\n",
            },
            {
                "item": local,
                "failed": True,
                "msg": "Error pulling llmfleet-lab/vllm-runtime - message: pull access denied",
                "stderr": "",
            },
        ],
    }
    assert images_pull_failures(failed) == [
        f"{pinned['reference']}: Failed to pull image {pinned['pull']} (Error: manifest unknown)",
        "llmfleet-lab/vllm-runtime:1: Error pulling llmfleet-lab/vllm-runtime - message:"
        " pull access denied",
    ]


def test_images_pull_failures_of_one_task_without_a_loop() -> None:
    assert images_pull_failures({"failed": True, "msg": "podman: not found"}) == [
        "?: podman: not found"
    ]
    assert images_pull_failures({"failed": True}) == ["?: no reason given"]
    assert images_pull_failures(None) == []
