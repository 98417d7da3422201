"""Container filters: mount specs, and the compile caches kept on the host per image."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.filter.container import (
    FilterModule,
    compile_cache,
    container_volumes,
)

HEX = "0123456789abcdef" * 4
ENV = {
    "VLLM_CACHE_ROOT": "/var/cache/llmfleet/compile/vllm",
    "TRITON_CACHE_DIR": "/var/cache/llmfleet/compile/triton",
    "TORCHINDUCTOR_CACHE_DIR": "/var/cache/llmfleet/compile/inductor",
    "FLASHINFER_WORKSPACE_BASE": "/var/cache/llmfleet/compile/flashinfer",
    "CUDA_CACHE_PATH": "/var/cache/llmfleet/compile/cuda",
}


def test_container_volumes_mounts_plain_paths_read_only() -> None:
    assert container_volumes(["/models", "/root/.cache/hf:/root/.cache/hf:rw", "/a:/b"]) == [
        "/models:/models:ro",
        "/root/.cache/hf:/root/.cache/hf:rw",
        "/a:/b",
    ]


@pytest.mark.parametrize(
    ("image", "folder"),
    [
        (f"nvcr.io/nvidia/vllm:26.05-py3@sha256:{HEX}",
         "nvcr.io_nvidia_vllm_26.05-py3_0123456789ab"),
        ("llmfleet-lab/vllm-runtime:1", "llmfleet-lab_vllm-runtime_1"),
        ("vllm/vllm-openai", "vllm_vllm-openai_latest"),
        (f"localhost:5000/vllm@sha256:{HEX}", "localhost_5000_vllm_digest_0123456789ab"),
    ],
)  # fmt: skip
def test_each_image_gets_its_own_cache_folder_mounted_with_the_variables(
    image: str, folder: str
) -> None:
    assert compile_cache(image, "/var/cache/llmfleet/compile") == {
        "dir": f"/var/cache/llmfleet/compile/{folder}",
        "volumes": [f"/var/cache/llmfleet/compile/{folder}:/var/cache/llmfleet/compile:rw"],
        "env": ENV,
    }


def test_two_digests_of_one_tag_get_two_folders() -> None:
    one = compile_cache(f"vllm/vllm-openai:nightly@sha256:{HEX}", "/srv/cache")["dir"]
    other = compile_cache(f"vllm/vllm-openai:nightly@sha256:{'f' * 64}", "/srv/cache")["dir"]
    assert one != other


def test_no_root_is_no_cache_and_a_relative_root_is_refused() -> None:
    assert compile_cache("vllm/vllm-openai:v1", "") == {"dir": "", "volumes": [], "env": {}}
    with pytest.raises(AnsibleFilterError, match="no absolute path"):
        compile_cache("vllm/vllm-openai:v1", "cache")


def test_filters_are_registered() -> None:
    assert FilterModule().filters() == {
        "container_volumes": container_volumes,
        "compile_cache": compile_cache,
    }
