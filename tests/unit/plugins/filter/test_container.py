"""Container filters: mount specs."""

from __future__ import annotations

from ansible_collections.llmfleet.cluster.plugins.filter.container import (
    FilterModule,
    container_volumes,
)


def test_container_volumes_mounts_plain_paths_read_only() -> None:
    assert container_volumes(["/models", "/root/.cache/hf:/root/.cache/hf:rw", "/a:/b"]) == [
        "/models:/models:ro",
        "/root/.cache/hf:/root/.cache/hf:rw",
        "/a:/b",
    ]


def test_filters_are_registered() -> None:
    assert FilterModule().filters() == {"container_volumes": container_volumes}
