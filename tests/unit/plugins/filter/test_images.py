"""Image filters: references parsed as docker parses them, floating tags refused with how
to pin them, the images a host pulls, and the lines of the report."""

from __future__ import annotations

from typing import Any

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.filter.images import (
    FilterModule,
    contents_lacks,
    image_contents_problems,
    image_reference,
    image_reference_problems,
    images_pull_failures,
    images_running,
    images_to_check,
    images_to_prune,
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
        "images_to_check": images_to_check,
        "image_contents_problems": image_contents_problems,
        "contents_lacks": contents_lacks,
        "images_pull_failures": images_pull_failures,
        "images_running": images_running,
        "images_to_prune": images_to_prune,
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


# images_to_prune: what `docker images --format '{{json .}}'` prints (a line each, parsed;
# the fields that count) and what `podman images --format json` prints.
D08, D10, D11 = ("sha256:" + c * 64 for c in "8ab")
VLLM = "vllm/vllm-openai"
KEEP = [f"{VLLM}:v0.11.0@{D11}", f"{VLLM}:v0.10.2@{D10}"]


def docker_line(repository: str, tag: str, image: str, digest: str = "<none>") -> dict[str, str]:
    return {
        "Containers": "N/A",
        "CreatedSince": "2 weeks ago",
        "Digest": digest,
        "ID": image,
        "Repository": repository,
        "Size": "20.1GB",
        "Tag": tag,
    }


def podman_image(
    image: str, names: list[str] | None, digest: str, repo_digests: list[str] | None = None
) -> dict[str, Any]:
    return {
        "Id": image,
        "ParentId": "",
        "RepoTags": None,
        "RepoDigests": repo_digests or [],
        "Names": names,
        "Digest": digest,
        "Containers": 0,
    }


def test_images_to_prune_of_docker_keeps_the_kept_and_what_is_not_in_the_repositories() -> None:
    listing = [
        docker_line(VLLM, "v0.11.0", "111111111111", D11),
        docker_line(VLLM, "v0.10.2", "101010101010", D10),
        docker_line(VLLM, "v0.9.0", "090909090909", "sha256:" + "9" * 64),
        # Pulled by digest: a repository, no tag.
        docker_line(VLLM, "<none>", "080808080808", D08),
        # Another name of a kept image is kept with it.
        docker_line(VLLM, "latest", "111111111111", D11),
        docker_line("<none>", "<none>", "dddddddddddd"),
        docker_line("ubuntu", "22.04", "222222222222", "sha256:" + "2" * 64),
        docker_line(VLLM, "nightly", "090909090909", "sha256:" + "9" * 64),
    ]
    assert images_to_prune(listing, KEEP, [VLLM]) == ["090909090909", "080808080808"]


def test_images_to_prune_of_podman_compares_docker_hub_and_local_names() -> None:
    listing = [
        podman_image(
            "a" * 64,
            [f"docker.io/{VLLM}:v0.11.0"],
            D11,
            [f"docker.io/{VLLM}@{D11}"],
        ),
        podman_image("b" * 64, [f"docker.io/{VLLM}:v0.9.0"], "sha256:" + "9" * 64),
        # Pulled by digest: no name, a registry digest.
        podman_image("c" * 64, None, D08, [f"docker.io/{VLLM}@{D08}"]),
        # Dangling: neither.
        podman_image("d" * 64, None, "sha256:" + "d" * 64),
        # Local builds, which Podman names localhost/...
        podman_image("e" * 64, ["localhost/llmfleet-lab/vllm-runtime:1"], "sha256:" + "e" * 64),
        podman_image("f" * 64, ["localhost/llmfleet-lab/vllm-runtime:0"], "sha256:" + "f" * 64),
        # Also named in a repository the caller did not give: never removed.
        podman_image(
            "0" * 64, [f"docker.io/{VLLM}:v0.8.0", "docker.io/myorg/custom:1"], "sha256:" + "0" * 64
        ),
    ]
    keep = [f"{VLLM}:v0.11.0@{D11}", "llmfleet-lab/vllm-runtime:1"]
    repositories = [f"docker.io/{VLLM}", "llmfleet-lab/vllm-runtime"]
    assert images_to_prune(listing, keep, repositories) == ["b" * 64, "c" * 64, "f" * 64]


def test_images_to_prune_matches_a_digest_alone_and_a_tag_alone() -> None:
    listing = [
        docker_line(VLLM, "v0.11.0", "111111111111", D11),
        docker_line(VLLM, "renamed", "101010101010", D10),
        docker_line(VLLM, "latest", "999999999999", "sha256:" + "9" * 64),
        docker_line(VLLM, "v0.12.0", "121212121212", "sha256:" + "c" * 64),
    ]
    # By digest only: the tag it was pulled under does not matter.
    assert images_to_prune(listing, [f"{VLLM}@{D10}"], [VLLM]) == [
        "111111111111",
        "999999999999",
        "121212121212",
    ]
    # A tag alone floats: the image under that tag, whatever its digest; no tag is latest.
    assert images_to_prune(listing, [f"{VLLM}:v0.12.0", VLLM], [VLLM]) == [
        "111111111111",
        "101010101010",
    ]
    # Tag and digest: either keeps.
    assert images_to_prune(listing, [f"{VLLM}:latest@{D11}"], [VLLM]) == [
        "101010101010",
        "121212121212",
    ]


def test_images_to_prune_with_a_registry_and_its_port() -> None:
    repository = "registry.example.com:5000/team/vllm"
    listing = [
        docker_line(repository, "1", "111111111111", D11),
        docker_line(repository, "0", "000000000000", D08),
        docker_line("team/vllm", "0", "0a0a0a0a0a0a", D08),
    ]
    keep = [f"{repository}:1@{D11}"]
    assert images_to_prune(listing, keep, [repository]) == ["000000000000"]
    # A reference counts for its repository.
    assert images_to_prune(listing, keep, keep) == ["000000000000"]


def test_images_to_prune_without_repositories_or_images_is_nothing() -> None:
    listing = [docker_line(VLLM, "v0.9.0", "090909090909")]
    assert images_to_prune(listing, KEEP, []) == []
    assert images_to_prune(listing, [], None) == []
    assert images_to_prune([], KEEP, [VLLM]) == []
    assert images_to_prune(None, KEEP, [VLLM]) == []
    # Nothing kept: every image of the repositories goes.
    assert images_to_prune(listing, [], [VLLM]) == ["090909090909"]


@pytest.mark.parametrize(
    ("listing", "keep", "repositories", "why"),
    [
        ("vllm", KEEP, [VLLM], "listing is a list"),
        ([], f"{VLLM}:v0.11.0", [VLLM], "keep is a list"),
        ([], KEEP, VLLM, "repositories is a list"),
        (['{"ID": "x"}'], KEEP, [VLLM], "each image is a mapping"),
        ([], ["Not A Reference"], [VLLM], "Not A Reference is not an image reference"),
        ([], KEEP, ["vllm@sha256:123"], "is not sha256: followed by 64"),
    ],
)
def test_images_to_prune_refuses_what_it_cannot_read(
    listing: Any, keep: Any, repositories: Any, why: str
) -> None:
    with pytest.raises(AnsibleFilterError, match=why):
        images_to_prune(listing, keep, repositories)


def test_images_to_prune_reads_docker_hubs_official_images_in_either_form() -> None:
    listing = [
        podman_image("1" * 64, ["docker.io/library/ubuntu:22.04"], D10),
        podman_image("2" * 64, ["docker.io/library/ubuntu:20.04"], D08),
        docker_line("ubuntu", "18.04", "181818181818"),
    ]
    expected = ["2" * 64, "181818181818"]
    assert images_to_prune(listing, ["ubuntu:22.04"], ["ubuntu"]) == expected
    assert images_to_prune(listing, ["docker.io/library/ubuntu:22.04"], ["library/ubuntu"]) == (
        expected
    )


PLACEHOLDER = "nvcr.io/nvidia/vllm:26.05-py3@sha256:<fill-in-the-digest>"


@pytest.mark.parametrize("allowed", [False, True])
def test_a_placeholder_digest_is_refused_with_how_to_read_the_digest(allowed: bool) -> None:
    [problem] = image_reference_problems(PLACEHOLDER, VAR, allowed)
    assert problem.startswith(f"{VAR} is {PLACEHOLDER!r}: its digest is a placeholder to fill in")
    tagged = "nvcr.io/nvidia/vllm:26.05-py3"
    assert f"`docker buildx imagetools inspect {tagged}`" in problem
    assert f"`docker pull {tagged}`" in problem
    assert f"`docker image inspect --format '{{{{index .RepoDigests 0}}}}' {tagged}`" in problem
    assert f"{tagged}@sha256:<64 hex>" in problem


def test_a_placeholder_digest_is_no_reference_to_run() -> None:
    with pytest.raises(AnsibleFilterError, match="placeholder"):
        image_reference(PLACEHOLDER)


RAY_NEEDS = {"ray": True, "commands": ["ray", "vllm", "pkill"], "vllm_options": {}, "mounts": []}


def test_images_to_check_keeps_the_engines_running_launches_with_their_needs() -> None:
    launches = [
        {"image": "ray:1", "engine": "podman", "runs": True, "needs": {"ray": True}},
        {"image": "vllm:1", "engine": "docker", "runs": True, "needs": RAY_NEEDS},
        {"image": "vllm:1", "engine": "docker", "runs": "true", "needs": RAY_NEEDS},
        {"image": "vllm:2", "engine": "docker", "runs": False, "needs": "{{ never templated }}"},
        {"image": "vllm:3", "runs": True},
    ]
    assert images_to_check(launches, "docker") == [
        {"image": "vllm:1", "needs": RAY_NEEDS},
        {"image": "vllm:3", "needs": {}},
    ]
    assert images_to_check(launches, "podman") == [{"image": "ray:1", "needs": {"ray": True}}]
    assert images_to_check(None, "docker") == []


def test_images_to_check_refuses_needs_it_does_not_know() -> None:
    with pytest.raises(AnsibleFilterError, match="needs of vllm:1 are a mapping"):
        images_to_check([{"image": "vllm:1", "needs": {"cuda": "13"}}], "docker")


def result(image: str, contents: Any, needs: Any = None, **more: Any) -> dict[str, Any]:
    return {"item": {"image": image, "needs": needs or {}}, "contents": contents, **more}


def test_image_contents_problems_names_the_host_the_image_and_what_it_lacks() -> None:
    old = {
        "version": 1,
        "distributions": {"vllm": "0.10.1.1+381074ae.nv25.09", "ray": "2.48.0"},
        "commands": {"ray": "/usr/local/bin/ray", "vllm": "/usr/local/bin/vllm"},
    }
    needs = {**RAY_NEEDS, "vllm_options": {"tool-call-parser": "minimax_m2"}}
    [problem] = image_contents_problems(
        {"results": [result("nvcr.io/nvidia/vllm:25.09-py3", old, needs)]}, "spark-1"
    )
    assert problem.startswith(
        "spark-1: image nvcr.io/nvidia/vllm:25.09-py3 lacks what this launch needs:"
        " no pkill on its PATH; Ray 2.48.0, older than 2.52.0"
    )
    assert "vLLM 0.10.1.1+381074ae.nv25.09, older than 0.11.1 that --tool-call-parser" in problem


def test_image_contents_problems_of_an_image_that_cannot_be_looked_into() -> None:
    error = {"error": 'python3 did not run in it (exit 127): exec: "python3": not found'}
    [problem] = image_contents_problems([result("busybox:1", error)], "spark-2")
    assert problem == (
        "spark-2: image busybox:1 cannot be looked into: python3 did not run in it (exit 127):"
        ' exec: "python3": not found; the checks run python3 in it (images with vLLM have it)'
    )


def test_image_contents_problems_skips_what_was_not_looked_into() -> None:
    fine = {"version": 1, "distributions": {"ray": "2.54.0"}, "commands": {"ray": "/bin/ray"}}
    results = [
        result("a:1", None, RAY_NEEDS),  # check mode, not pulled yet
        {"item": {"image": "b:1"}, "skipped": True},
        result("c:1", fine, {"ray": True, "commands": ["ray"]}),
    ]
    assert image_contents_problems({"results": results}, "spark-1") == []
    with pytest.raises(AnsibleFilterError, match="a loop's results"):
        image_contents_problems("nope", "spark-1")


def test_contents_lacks_judges_one_environment_as_an_image_is_judged() -> None:
    venv = {
        "version": 2,
        "distributions": {"vllm": "0.32.0+cpu"},
        "commands": {},
        "parsers": {"tool-call-parser": ["hermes", "qwen3_coder"]},
    }
    assert contents_lacks(venv, {"vllm_options": {"tool-call-parser": "hermes"}}) == []
    [lacks] = contents_lacks(venv, {"vllm_options": {"tool-call-parser": "qwen3-coder"}})
    assert lacks.startswith("vLLM 0.32.0+cpu has no --tool-call-parser qwen3-coder (did you mean")
    assert contents_lacks(None, {"vllm_options": {}}) == []  # check mode
    assert contents_lacks({"error": "exit 1"}, {}) == ["it could not be looked into: exit 1"]
    with pytest.raises(AnsibleFilterError, match="contents_lacks"):
        contents_lacks("nope", {})
