"""Container filters: environment files as mappings, mount specs."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.filter.container import (
    FilterModule,
    container_volumes,
    env_file_vars,
)


def test_env_file_vars_reads_what_systemd_and_docker_read() -> None:
    text = (
        "# Ansible managed\n"
        "\n"
        "NCCL_IB_DISABLE=1\n"
        "NCCL_IB_HCA==rocep1s0f1:1,roceP2p1s0f1:1\n"
        "  # indented comment\n"
        "EMPTY=\n"
    )
    assert env_file_vars(text) == {
        "NCCL_IB_DISABLE": "1",
        "NCCL_IB_HCA": "=rocep1s0f1:1,roceP2p1s0f1:1",
        "EMPTY": "",
    }
    assert env_file_vars("") == {}


def test_env_file_vars_names_a_line_that_is_not_an_assignment() -> None:
    with pytest.raises(AnsibleFilterError, match=r"line 2 is not KEY=value: 'export A=1'"):
        env_file_vars("B=2\nexport A=1\n")


def test_container_volumes_mounts_plain_paths_read_only() -> None:
    assert container_volumes(["/models", "/root/.cache/hf:/root/.cache/hf:rw", "/a:/b"]) == [
        "/models:/models:ro",
        "/root/.cache/hf:/root/.cache/hf:rw",
        "/a:/b",
    ]


def test_filters_are_registered() -> None:
    assert FilterModule().filters() == {
        "env_file_vars": env_file_vars,
        "container_volumes": container_volumes,
    }
