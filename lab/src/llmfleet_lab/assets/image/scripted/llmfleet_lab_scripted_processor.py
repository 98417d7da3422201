"""vLLM's side of the lab model's script: a custom logits processor that forces, token by
token, the reply llmfleet_lab_script writes for the conversation of each request.

Loaded with ``--logits-processors llmfleet_lab_scripted_processor:ScriptedReplies`` (the
folder on vLLM's PYTHONPATH). The replies are written in the wire format of the tool-call
parser the server runs: ``LLMFLEET_LAB_SCRIPT_FORMAT`` when set and not empty (the lab
inventory gives it the profile's parser: a profile that changes its parser changes the
script's format with it), else the ``tool-call-parser`` of the ``vllm serve --config`` file
``LLMFLEET_LAB_SERVE_CONFIG`` names; no parser, no script. It runs in every
worker of a tensor parallel group: the forced tokens depend on the prompt only, so every
rank samples the same. vLLM 0.32's CPU platform has no Triton and runs the V1 model runner,
whose interface this is (``vllm.v1.sample.logits_processor``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import yaml
from llmfleet_lab_script import WIRE_FORMATS, scripted_text
from tokenizers import Tokenizer
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

if TYPE_CHECKING:
    from vllm.config import VllmConfig

FORMAT_VARIABLE = "LLMFLEET_LAB_SCRIPT_FORMAT"
SERVE_CONFIG_VARIABLE = "LLMFLEET_LAB_SERVE_CONFIG"
END_OF_TURN = "<|im_end|>"


def wire_format() -> str | None:
    """The parser whose format the replies take (see the module's docstring)."""
    parser = os.environ.get(FORMAT_VARIABLE) or None
    if parser is None and os.environ.get(SERVE_CONFIG_VARIABLE):
        config_file = Path(os.environ[SERVE_CONFIG_VARIABLE])
        if not config_file.is_file():
            raise FileNotFoundError(
                f"the lab's script reads the parser from {config_file} ({SERVE_CONFIG_VARIABLE}),"
                f" which this host lacks, and {FORMAT_VARIABLE} is not set"
            )
        config = yaml.safe_load(config_file.read_text()) or {}
        parser = config.get("tool-call-parser")
    if parser is not None and parser not in WIRE_FORMATS:
        raise ValueError(f"the lab's script has no wire format for the parser {parser!r}")
    return parser


class ScriptedReplies(LogitsProcessor):
    def __init__(self, vllm_config: VllmConfig, device: torch.device, is_pin_memory: bool):
        folder = Path(vllm_config.model_config.tokenizer)
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.wire_format = wire_format()
        self.end_of_turn = self.tokenizer.token_to_id(END_OF_TURN)
        # Batch index -> (the tokens to force, the request's live list of output tokens).
        self.forced: dict[int, tuple[list[int], list[int]]] = {}

    def is_argmax_invariant(self) -> bool:
        return False

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        for index in batch_update.removed:
            self.forced.pop(index, None)
        for index, _params, prompt_ids, output_ids in batch_update.added:
            self.forced.pop(index, None)
            text = self.script(prompt_ids)
            if text is not None:
                tokens = self.tokenizer.encode(text, add_special_tokens=False).ids
                self.forced[index] = ([*tokens, self.end_of_turn], output_ids)
        for first, second, direction in batch_update.moved:
            moving = self.forced.pop(first, None)
            if direction == MoveDirectionality.SWAP:
                staying = self.forced.pop(second, None)
                if staying is not None:
                    self.forced[first] = staying
            if moving is not None:
                self.forced[second] = moving

    def script(self, prompt_ids: list[int] | None) -> str | None:
        if not prompt_ids or self.wire_format is None:
            return None
        prompt = self.tokenizer.decode(prompt_ids, skip_special_tokens=False)
        return scripted_text(prompt, self.wire_format)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        for index, (tokens, output_ids) in self.forced.items():
            step = len(output_ids)
            token = tokens[step] if step < len(tokens) else self.end_of_turn
            logits[index].fill_(float("-inf"))
            logits[index, token] = 0.0
        return logits
