"""Generate the lab's tiny random-weight chat model, offline and deterministically.

The model is a 2-layer Llama (hidden 128, head_dim 64: the CPU attention kernel rejects
head_dim 16) with a byte-level BPE tokenizer trained here on Python sources and English
text, so a real Claude Code request (system prompt + tool list, about 5.5K tokens) fits
in its 128K context. Its output is gibberish; the protocol around it is real.

One hidden dimension is held constant through the network and wired to the end-of-turn
logit, so sampling stops after about 20 tokens on average instead of running to
``max_tokens``: clients such as Claude Code ask for tens of thousands of tokens.

Run with the Python of the vLLM environment (it has torch, transformers and tokenizers):
    python make_tiny_model.py --output /opt/models/llmfleet-tiny --corpus /usr/lib/python3.11
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    GenerationConfig,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
)

VOCAB_SIZE = 8192
HIDDEN_SIZE = 128
MAX_POSITIONS = 131072
END_OF_TURN_PROBABILITY = 0.05
CORPUS_LIMIT_BYTES = 12 * 1024 * 1024
SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
]

# ChatML with Hermes-style tool calls, the format vLLM's `hermes` tool parser reads. A system
# message after the first (Claude Code 2.x sends its environment, the working directory
# among it, so) is rendered where it stands, as Qwen2.5's template does.
CHAT_TEMPLATE = r"""{%- macro text(content) -%}
{%- if content is string -%}{{ content }}
{%- elif content is iterable -%}{%- for part in content -%}{%- if part.type == 'text' -%}{{ part.text }}{%- endif -%}{%- endfor -%}
{%- endif -%}
{%- endmacro -%}
{%- if tools -%}
<|im_start|>system
{% if messages[0].role == 'system' %}{{ text(messages[0].content) }}

{% endif %}# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
{% elif messages[0].role == 'system' -%}
<|im_start|>system
{{ text(messages[0].content) }}<|im_end|>
{% endif -%}
{%- for message in messages -%}
{%- if message.role == 'system' and loop.first -%}
{%- elif message.role == 'tool' -%}
<|im_start|>user
<tool_response>
{{ text(message.content) }}
</tool_response><|im_end|>
{% elif message.role == 'assistant' -%}
<|im_start|>assistant
{{ text(message.content) }}
{%- if message.tool_calls -%}{%- for call in message.tool_calls -%}
<tool_call>
{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments if call.function.arguments is string else call.function.arguments | tojson }}}
</tool_call>
{%- endfor -%}{%- endif -%}<|im_end|>
{% else -%}
<|im_start|>{{ message.role }}
{{ text(message.content) }}<|im_end|>
{% endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}<|im_start|>assistant
{% endif -%}"""


def corpus_files(roots: list[pathlib.Path]) -> list[str]:
    """Collect up to CORPUS_LIMIT_BYTES of text, in a stable order."""
    files: list[str] = []
    total = 0
    for root in roots:
        candidates = [root] if root.is_file() else sorted(root.rglob("*"))
        for path in candidates:
            if not path.is_file() or path.suffix not in {"", ".py", ".txt", ".rst", ".md"}:
                continue
            size = path.stat().st_size
            if size == 0 or size > 512 * 1024:
                continue
            files.append(str(path))
            total += size
            if total >= CORPUS_LIMIT_BYTES:
                return files
    return files


def train_tokenizer(files: list[str]) -> Tokenizer:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train(files, trainer)
    return tokenizer


def build_model(end_of_turn_id: int, vocab_size: int) -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=HIDDEN_SIZE,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=MAX_POSITIONS,
        rope_theta=500000.0,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=end_of_turn_id,
        pad_token_id=0,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        # Dimension 0 of the residual stream: a large constant in every embedding that no
        # layer writes to, so after the final RMSNorm it is ~sqrt(hidden) for every token.
        constant = 10.0
        model.model.embed_tokens.weight[:, 0] = constant
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight[0, :] = 0.0
            layer.mlp.down_proj.weight[0, :] = 0.0
        # Wire that dimension to the end-of-turn logit only: P(end) ~ END_OF_TURN_PROBABILITY.
        odds = END_OF_TURN_PROBABILITY / (1 - END_OF_TURN_PROBABILITY)
        target_logit = math.log(odds * (vocab_size - 1))
        model.lm_head.weight[:, 0] = 0.0
        model.lm_head.weight[end_of_turn_id, 0] = target_logit / math.sqrt(HIDDEN_SIZE)
    return model.to(torch.bfloat16)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True, type=pathlib.Path)
    parser.add_argument("--corpus", action="append", required=True, type=pathlib.Path)
    parser.add_argument("--name", default="llmfleet-tiny")
    args = parser.parse_args()

    files = corpus_files(args.corpus)
    print(f"training tokenizer on {len(files)} files", flush=True)
    raw = train_tokenizer(files)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        eos_token="<|im_end|>",  # noqa: S106 (a token, not a password)
        pad_token="<|endoftext|>",  # noqa: S106 (a token, not a password)
        unk_token=None,
        additional_special_tokens=SPECIAL_TOKENS[3:],
        model_max_length=MAX_POSITIONS,
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    end_of_turn_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    vocab_size = max(VOCAB_SIZE, len(tokenizer))

    print(f"building model (vocab {vocab_size}, context {MAX_POSITIONS})", flush=True)
    model = build_model(end_of_turn_id, vocab_size)
    args.output.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(args.output, safe_serialization=True)
    tokenizer.save_pretrained(args.output)
    GenerationConfig(
        eos_token_id=[end_of_turn_id, tokenizer.convert_tokens_to_ids("<|endoftext|>")],
        pad_token_id=tokenizer.pad_token_id,
        temperature=1.0,
        top_p=1.0,
    ).save_pretrained(args.output)
    facts = {"name": args.name, "vocab_size": vocab_size, "context": MAX_POSITIONS}
    (args.output / "llmfleet-model.json").write_text(json.dumps(facts, indent=2) + "\n")
    size = sum(p.stat().st_size for p in args.output.iterdir())
    print(f"model written to {args.output} ({size // 1024} KiB)", flush=True)


if __name__ == "__main__":
    main()
