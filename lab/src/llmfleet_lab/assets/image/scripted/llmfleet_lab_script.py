"""The lab model's script: what the tiny model says next, chosen from the conversation so far.

The lab's model has random weights, so Claude Code gets text back and stops after one turn.
A logits processor loaded by the lab's tool-call profiles forces the tokens of the reply this
module writes, so that the agent loop around the real vLLM, tokenizer and tool-call parsers
runs as it does on a real model:

a. a first user turn that names one file: a ``Read`` of it (an absolute path, under the
   working directory Claude Code's system prompt gives); naming none: ``Bash`` with ``ls``;
b. a first user turn that names two files: both ``Read`` calls at once (parallel calls);
c. a turn that carries tool results: the final answer, quoting the first line of each
   result, so that a test knows the results really came back.

A conversation without tools (a plain chat, the benchmark's requests) gets no script: the
model's own tokens. Each reply is written in the wire format of the tool-call parser the
profile serves with (``WIRE_FORMATS``). Pure: rendered prompt in, reply text out.
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass, field

# The tiny model's chat template (make_tiny_model.py) is ChatML; tool results come back in
# a user turn as <tool_response> blocks, whatever the wire format of the calls.
TURN_START = "<|im_start|>"
TURN_END = "<|im_end|>"
TOOL_RESPONSE = re.compile(r"<tool_response>\n?(.*?)\n?</tool_response>", re.DOTALL)
# What Claude Code adds to a user turn besides what the user typed.
SYSTEM_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
# Claude Code's environment section: "Working directory: /repo" in older releases,
# " - Primary working directory: /repo" in 2.x.
WORKING_DIRECTORY = re.compile(
    r"^\s*(?:- )?(?:Primary working|Working) directory: (\S+)", re.MULTILINE
)
# A file name: a word with an extension of two or more characters ("NOTES.md", "src/app.py";
# not "e.g.").
FILE_NAME = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.[A-Za-z0-9]{2,8})(?![\w/-])")
# The line numbers of Claude Code's Read results ("     1→text", or "1\ttext").
LINE_NUMBER = re.compile(r"^\s*\d+(?:→|\t)")


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    """What the model says: text, then tool calls (none for a final answer)."""

    text: str = ""
    calls: tuple[ToolCall, ...] = ()


def turns(prompt: str) -> list[tuple[str, str]]:
    """The (role, content) of each turn of a rendered ChatML prompt, the open generation
    turn included (its content empty)."""
    found = []
    for chunk in prompt.split(TURN_START)[1:]:
        role, _, content = chunk.partition("\n")
        found.append((role.strip(), content.split(TURN_END, 1)[0]))
    return found


def has_tools(prompt: str) -> bool:
    return "<tools>" in prompt


def typed_text(content: str) -> str:
    """What the user typed: the turn without Claude Code's reminders."""
    return SYSTEM_REMINDER.sub("", content).strip()


def first_line(result: str) -> str:
    for line in result.splitlines():
        text = LINE_NUMBER.sub("", line, count=1).strip()
        if text:
            return text
    return "(empty)"


def script(prompt: str) -> Reply | None:
    """The scripted reply to a rendered prompt, or None when the conversation has no tools or
    is not waiting for the assistant."""
    conversation = turns(prompt)
    if not has_tools(prompt) or not conversation or conversation[-1][0] != "assistant":
        return None
    asked = [content for role, content in conversation[:-1] if role != "system"]
    if not asked:
        return None
    # The results of parallel calls come back as one turn each, in a row.
    results: list[str] = []
    for content in reversed(asked):
        found_results = TOOL_RESPONSE.findall(content)
        if not found_results:
            break
        results[:0] = found_results
    if results:
        quoted = " and ".join(f'"{first_line(result)}"' for result in results)
        return Reply(text=f"The tool results came back. They begin with {quoted}.")
    found = WORKING_DIRECTORY.search(prompt)
    directory = found.group(1) if found else "."
    names = list(dict.fromkeys(FILE_NAME.findall(typed_text(asked[-1]))))[:2]
    if not names:
        return Reply(calls=(ToolCall("Bash", {"command": "ls", "description": "List files"}),))
    return Reply(
        calls=tuple(
            ToolCall("Read", {"file_path": posixpath.join(directory, name)}) for name in names
        )
    )


def hermes(reply: Reply) -> str:
    """Hermes 2 Pro: each call a JSON object in <tool_call> tags (vLLM's `hermes` parser)."""
    calls = [
        "<tool_call>\n"
        + json.dumps({"name": call.name, "arguments": call.arguments})
        + "\n</tool_call>"
        for call in reply.calls
    ]
    return "\n".join(([reply.text] if reply.text else []) + calls)


def minimax_m2(reply: Reply) -> str:
    """MiniMax M2: <invoke> elements with <parameter> children in one <minimax:tool_call>
    block (vLLM's `minimax_m2` parser); a parameter that is not a string is JSON."""
    if not reply.calls:
        return reply.text
    invokes = "".join(
        f'<invoke name="{call.name}">\n'
        + "".join(
            f'<parameter name="{key}">'
            f"{value if isinstance(value, str) else json.dumps(value)}</parameter>\n"
            for key, value in call.arguments.items()
        )
        + "</invoke>\n"
        for call in reply.calls
    )
    block = f"<minimax:tool_call>\n{invokes}</minimax:tool_call>"
    return f"{reply.text}\n{block}" if reply.text else block


WIRE_FORMATS = {"hermes": hermes, "minimax_m2": minimax_m2}


def scripted_text(prompt: str, parser: str) -> str | None:
    """The text the model must produce next in the wire format of `parser`, or None."""
    reply = script(prompt)
    return None if reply is None else WIRE_FORMATS[parser](reply)
