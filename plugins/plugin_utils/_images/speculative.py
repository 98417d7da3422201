# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Speculative decoding as a profile gives it (``speculative_config``, vLLM's
``--speculative-config``): its shape, the method's needs (a draft model, the model's own MTP
layers, a Python package) and the method read back from a rendered ``vllm serve`` config.

The methods are vLLM's (``vllm/config/speculative.py``, ``SpeculativeMethod``): the image's
own list is read from its source by the contents script (``_container.image_contents``).
"""

from __future__ import annotations

import json

OPTION = "speculative-config"
# Methods that propose from the prompt and the output so far, with no model of their own:
# n-gram lookup, and suffix decoding (a tree of earlier outputs; it suits coding agents,
# which repeat what they read).
MODEL_FREE = ("ngram", "ngram_gpu", "suffix")
# Methods that need a draft model (the config's ``model``: a path or a Hugging Face id).
NEEDS_DRAFT = ("eagle", "eagle3", "draft_model", "medusa", "mlp_speculator", "dflash", "dspark")
# The package vLLM loads for a method (vllm/config/speculative.py: "Arctic Inference is
# required for suffix decoding. Install via `pip install arctic-inference`").
PACKAGES = {"suffix": "arctic-inference"}
# Keys of a model's config.json that count its multi-token-prediction layers (DeepSeek V3,
# GLM-4.5 and MiMo: num_nextn_predict_layers; Qwen3-Next and Qwen3.5: mtp_num_hidden_layers;
# MiniMax: num_mtp_modules).
MTP_LAYER_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_modules")


def is_mtp(method):
    """Whether ``method`` drafts with the model's own MTP layers (``mtp``, ``*_mtp``)."""
    return method == "mtp" or str(method).endswith("_mtp")


def shape_problem(config, args=None):
    """Why a profile's ``speculative_config`` is not one vLLM takes, or None; ``args``: the
    profile's other ``vllm serve`` options (vLLM refuses some of them with it)."""
    if not isinstance(config, dict):
        return (
            f"speculative_config is {config!r}; expected a mapping such as"
            " {method: ngram, num_speculative_tokens: 4, prompt_lookup_max: 4}"
        )
    method = config.get("method")
    if not isinstance(method, str) or not method:
        return (
            f"speculative_config has method {method!r}; expected one of vLLM's methods"
            f" ({', '.join(MODEL_FREE)}, mtp, {', '.join(NEEDS_DRAFT[:3])}, ...)"
        )
    tokens = config.get("num_speculative_tokens")
    if method != "suffix" and (isinstance(tokens, bool) or not isinstance(tokens, int)):
        return (
            f"speculative_config.num_speculative_tokens is {tokens!r}; expected the number of"
            f" tokens method {method} proposes per step (e.g. 4)"
        )
    if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens < 1:
        return f"speculative_config.num_speculative_tokens is {tokens}; expected 1 or more"
    if method in NEEDS_DRAFT and not config.get("model"):
        return (
            f"speculative_config method {method} drafts with a model of its own; expected its"
            " 'model' (a path or a Hugging Face id)"
        )
    return args_problem(args)


def args_problem(args):
    """Why the profile's other options cannot go with speculative decoding, or None."""
    processors = [k for k in (args or {}) if str(k).replace("-", "_") == "logits_processors"]
    if processors and (args or {}).get(processors[0]):
        # vLLM at start: "Custom logits processors are not supported when speculative
        # decoding is enabled." (the lab's scripted model is one).
        return (
            f"speculative_config is set with args {processors[0]}, which vLLM refuses at start"
            " (custom logits processors are not supported with speculative decoding); expected"
            " one of the two"
        )
    return None


def rendered(config):
    """``--speculative-config`` as the rendered config gives it: JSON, keys sorted."""
    return json.dumps(config, separators=(",", ":"), sort_keys=True)


def method_of(options):
    """The method of the ``speculative-config`` in rendered ``vllm serve`` options, or None."""
    text = (options or {}).get(OPTION)
    if not text:
        return None
    try:
        config = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return None
    return config.get("method") if isinstance(config, dict) else None


def model_problem(config, model_config):
    """Why the model cannot serve ``config``'s method, or None: an MTP method needs MTP layers
    in the model's config.json (None when the model's config is unknown)."""
    if not isinstance(config, dict) or not is_mtp(config.get("method")):
        return None
    if not isinstance(model_config, dict) or not model_config:
        return None
    text = model_config.get("text_config")
    configs = [model_config] + ([text] if isinstance(text, dict) else [])
    layers = [c.get(key) for c in configs for key in MTP_LAYER_KEYS if isinstance(c.get(key), int)]
    if any(count > 0 for count in layers):
        return None
    return (
        f"speculative_config method {config['method']} drafts with the model's own MTP layers,"
        f" but its config.json counts none ({', '.join(MTP_LAYER_KEYS)}); expected a model"
        " that ships them, or a model-free method (ngram, suffix)"
    )
