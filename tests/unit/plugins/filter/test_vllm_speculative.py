"""Speculative decoding in a profile: rendered as vLLM's --speculative-config (JSON), its
shape refused before any host changes, the model's MTP layers for an MTP method
(filters vllm_serve_config and speculative_model_problems)."""

from __future__ import annotations

import json

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.filter.vllm import (
    FilterModule,
    speculative_model_problems,
    vllm_serve_config,
)

TINY = {"model": "/opt/models/llmfleet-tiny", "served_model_name": "tiny"}
NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}


def test_a_profiles_speculative_config_is_rendered_as_json() -> None:
    config = vllm_serve_config({**TINY, "speculative_config": NGRAM}, {"host": "0.0.0.0"})
    assert json.loads(config["speculative-config"]) == NGRAM
    assert config["speculative-config"] == (
        '{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4}'
    )
    assert "speculative-config" not in vllm_serve_config(TINY, {"host": "0.0.0.0"})


def test_suffix_decoding_needs_no_token_count() -> None:
    config = vllm_serve_config({**TINY, "speculative_config": {"method": "suffix"}}, {"host": "h"})
    assert json.loads(config["speculative-config"]) == {"method": "suffix"}


@pytest.mark.parametrize(
    ("speculative", "message"),
    [
        ("ngram", "speculative_config is 'ngram'; expected a mapping such as"),
        ({"num_speculative_tokens": 4}, "speculative_config has method None; expected one of"),
        ({"method": "ngram"}, "num_speculative_tokens is None; expected the number of tokens"),
        ({"method": "ngram", "num_speculative_tokens": "4"}, "num_speculative_tokens is '4'"),
        ({"method": "ngram", "num_speculative_tokens": 0}, "num_speculative_tokens is 0"),
        (
            {"method": "eagle3", "num_speculative_tokens": 3},
            "method eagle3 drafts with a model of its own; expected its 'model'",
        ),
    ],
)
def test_a_speculative_config_vllm_would_refuse_is_named(speculative: object, message: str) -> None:
    with pytest.raises(AnsibleFilterError, match=r"^vLLM profile ") as error:
        vllm_serve_config({**TINY, "speculative_config": speculative}, {"host": "0.0.0.0"})
    assert message in str(error.value)


def test_the_args_do_not_set_it_behind_the_profiles_back() -> None:
    with pytest.raises(AnsibleFilterError, match="set the profile's speculative_config"):
        vllm_serve_config({**TINY, "args": {"speculative-config": "{}"}}, {"host": "0.0.0.0"})


MTP = {"method": "mtp", "num_speculative_tokens": 1}


@pytest.mark.parametrize(
    "model_config",
    [
        {"num_nextn_predict_layers": 1},
        {"text_config": {"mtp_num_hidden_layers": 1}},
        {"num_mtp_modules": 3},
    ],
)
def test_an_mtp_method_needs_the_models_mtp_layers(model_config: dict) -> None:
    assert speculative_model_problems({**TINY, "speculative_config": MTP}, model_config) == []


def test_an_mtp_method_on_a_model_without_them_is_named() -> None:
    (problem,) = speculative_model_problems(
        {**TINY, "speculative_config": {**MTP, "method": "deepseek_mtp"}},
        {"num_hidden_layers": 2, "num_nextn_predict_layers": 0},
    )
    assert problem.startswith(
        "speculative_config method deepseek_mtp drafts with the model's own MTP layers, but its"
        " config.json counts none"
    )


def test_model_free_methods_and_unknown_models_are_not_judged() -> None:
    assert speculative_model_problems({**TINY, "speculative_config": NGRAM}, {}) == []
    assert speculative_model_problems({**TINY, "speculative_config": MTP}, {}) == []
    assert speculative_model_problems(TINY, {"num_hidden_layers": 2}) == []
    assert FilterModule().filters()["speculative_model_problems"] is speculative_model_problems


def test_custom_logits_processors_and_speculative_decoding_are_refused_together() -> None:
    # The lab's scripted model is a logits processor: vLLM 0.32 exits at start with
    # "ValueError: Custom logits processors are not supported when speculative decoding is
    # enabled." (a lab run, serving tiny_lab with an n-gram point).
    profile = {**TINY, "speculative_config": NGRAM, "args": {"logits_processors": ["m:C"]}}
    with pytest.raises(AnsibleFilterError, match="args logits_processors, which vLLM refuses"):
        vllm_serve_config(profile, {"host": "0.0.0.0"})
    profile["args"] = {"logits-processors": []}
    assert "speculative-config" in vllm_serve_config(profile, {"host": "0.0.0.0"})
