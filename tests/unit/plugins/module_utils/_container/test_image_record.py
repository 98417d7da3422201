"""module_utils/_container/image_record: the engines' inspect output read (Docker's and
Podman's IDs alike), the record kept stable, a foreign or broken file replaced."""

from __future__ import annotations

import json

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._container.image_record import (
    RECORD_VERSION,
    InspectError,
    container_image_id,
    image_entry,
    image_id,
    read_containers,
    render,
    updated,
)

HEX = "0123456789abcdef" * 4
REF = f"vllm/vllm-openai:v0.11.0@sha256:{HEX}"


def test_image_ids_are_written_as_docker_writes_them() -> None:
    assert image_id(HEX) == f"sha256:{HEX}"  # Podman
    assert image_id(f"sha256:{HEX}") == f"sha256:{HEX}"  # Docker
    assert image_id("abc") == "abc"
    assert image_id(None) == ""


def test_the_container_names_its_image_in_docker_and_podman_output() -> None:
    docker = json.dumps([{"Id": "c" * 64, "Image": f"sha256:{HEX}", "Config": {"Image": REF}}])
    podman = json.dumps([{"Id": "c" * 64, "Image": HEX, "ImageName": REF}])
    assert container_image_id(docker) == f"sha256:{HEX}"
    assert container_image_id(podman) == HEX


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("not json", "no JSON"),
        ("[]", "holds no container"),
        ('{"Image": "x"}', "holds no container"),
        ('[{"Id": "c"}]', "names no image"),
    ],
)
def test_unreadable_container_inspect_output_says_why(text: str, why: str) -> None:
    with pytest.raises(InspectError, match=why):
        container_image_id(text)


def test_an_entry_holds_the_reference_the_id_and_the_sorted_digests() -> None:
    out = json.dumps(
        [
            {
                "Id": HEX,
                "RepoTags": ["vllm/vllm-openai:v0.11.0"],
                "RepoDigests": [
                    f"docker.io/vllm/vllm-openai@sha256:{HEX}",
                    f"docker.io/vllm/vllm-openai@sha256:{'f' * 64}",
                    f"docker.io/vllm/vllm-openai@sha256:{HEX}",
                ],
            }
        ]
    )
    assert image_entry(REF, out) == {
        "reference": REF,
        "image_id": f"sha256:{HEX}",
        "repo_digests": [
            f"docker.io/vllm/vllm-openai@sha256:{HEX}",
            f"docker.io/vllm/vllm-openai@sha256:{'f' * 64}",
        ],
    }


def test_a_local_build_has_no_registry_digest() -> None:
    out = json.dumps([{"Id": f"sha256:{HEX}", "RepoDigests": None}])
    assert image_entry("llmfleet-lab/vllm-runtime:1", out)["repo_digests"] == []


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "{broken",
        "[]",
        json.dumps({"version": 0, "containers": {"a": {}}}),
        json.dumps({"version": RECORD_VERSION, "containers": []}),
    ],
)
def test_a_missing_or_foreign_file_records_nothing(text: str | None) -> None:
    assert read_containers(text) == {}


def test_the_record_round_trips_and_keeps_only_entries() -> None:
    entry = {"reference": REF, "image_id": f"sha256:{HEX}", "repo_digests": []}
    text = render({"llmfleet-vllm": entry})
    assert json.loads(text) == {"version": RECORD_VERSION, "containers": {"llmfleet-vllm": entry}}
    assert text.endswith("\n")
    assert read_containers(text) == {"llmfleet-vllm": entry}
    mixed = json.dumps({"version": RECORD_VERSION, "containers": {"a": entry, "b": "junk"}})
    assert read_containers(mixed) == {"a": entry}


def test_render_is_stable_whatever_the_order() -> None:
    a = {"reference": "a:1", "image_id": "sha256:1", "repo_digests": []}
    b = {"repo_digests": [], "image_id": "sha256:2", "reference": "b:1"}
    assert render({"a": a, "b": b}) == render({"b": b, "a": a})


def test_updated_records_or_forgets_one_container_and_keeps_the_others() -> None:
    a = {"reference": "a:1"}
    b = {"reference": "b:1"}
    assert updated({"a": a}, "b", b) == {"a": a, "b": b}
    assert updated({"a": a, "b": b}, "b", None) == {"a": a}
    assert updated({"a": a}, "a", b) == {"a": b}
    containers = {"a": a}
    updated(containers, "a", None)
    assert containers == {"a": a}
