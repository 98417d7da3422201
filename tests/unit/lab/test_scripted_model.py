"""The lab model's script (lab/src/llmfleet_lab/assets/image/scripted/llmfleet_lab_script.py) on
prompts rendered by the tiny model's own chat template (make_tiny_model.py), and its replies
read back by the parsing rules of the tool-call parser each wire format is for."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml

from .file_modules import load_file

IMAGE = Path(__file__).resolve().parents[3] / "lab/src/llmfleet_lab/assets/image"
TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("Bash", "Read")
]
SYSTEM = (
    "You are Claude Code.\n<env>\nWorking directory: /tmp/sample-repo\n"
    "Is directory a git repo: Yes\n</env>"
)


SCRIPT = load_file("llmfleet_lab_script", IMAGE / "scripted/llmfleet_lab_script.py")


def chat_template() -> str:
    """CHAT_TEMPLATE of make_tiny_model.py, read without importing torch."""
    tree = ast.parse((IMAGE / "make_tiny_model.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "CHAT_TEMPLATE":
            return str(ast.literal_eval(node.value))
    raise AssertionError("no CHAT_TEMPLATE in make_tiny_model.py")


TEMPLATE = jinja2.Environment(autoescape=False).from_string(chat_template())


def render(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = TOOLS) -> str:
    return TEMPLATE.render(messages=messages, tools=tools, add_generation_prompt=True)


def user(text: str) -> dict[str, Any]:
    reminder = "<system-reminder>Contents of CLAUDE.md: see README.md</system-reminder>"
    return {
        "role": "user",
        "content": [{"type": "text", "text": reminder}, {"type": "text", "text": text}],
    }


def called(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def hermes_calls(text: str) -> list[dict[str, Any]]:
    """vLLM's hermes parser: a JSON object between <tool_call> tags."""
    return [
        json.loads(body) for body in re.findall(r"<tool_call>(.*?)</tool_call>", text, re.DOTALL)
    ]


def minimax_calls(text: str) -> list[dict[str, Any]]:
    """vLLM's minimax_m2 parser: <invoke name=...> with <parameter name=...> children."""
    (block,) = re.findall(r"<minimax:tool_call>(.*?)</minimax:tool_call>", text, re.DOTALL)
    calls = []
    for name, body in re.findall(r'<invoke name="([^"]+)">(.*?)</invoke>', block, re.DOTALL):
        parameters = re.findall(r'<parameter name="([^"]+)">(.*?)</parameter>', body, re.DOTALL)
        calls.append({"name": name, "arguments": dict(parameters)})
    return calls


READERS = {"hermes": hermes_calls, "minimax_m2": minimax_calls}


@pytest.mark.parametrize("parser", sorted(SCRIPT.WIRE_FORMATS))
def test_a_named_file_is_read_by_its_absolute_path(parser: str) -> None:
    prompt = render([{"role": "system", "content": SYSTEM}, user("What does NOTES.md say?")])
    text = SCRIPT.scripted_text(prompt, parser)
    assert READERS[parser](text) == [
        {"name": "Read", "arguments": {"file_path": "/tmp/sample-repo/NOTES.md"}}
    ]


def test_the_working_directory_of_claude_code_2_is_found() -> None:
    """Claude Code 2.x sends its environment as a system message after the user's."""
    environment = (
        "# Environment\nYou have been invoked in the following environment: \n"
        " - Primary working directory: /tmp/capture/repo\n - Is a git repository: true\n"
    )
    prompt = render(
        [
            {"role": "system", "content": "You are a Claude agent."},
            user("What does fib.py do?"),
            {"role": "system", "content": [{"type": "text", "text": environment}]},
        ]
    )
    assert READERS["hermes"](SCRIPT.scripted_text(prompt, "hermes")) == [
        {"name": "Read", "arguments": {"file_path": "/tmp/capture/repo/fib.py"}}
    ]


@pytest.mark.parametrize("parser", sorted(SCRIPT.WIRE_FORMATS))
def test_two_named_files_are_read_in_parallel_and_no_file_lists_the_folder(parser: str) -> None:
    both = render(
        [
            {"role": "system", "content": SYSTEM},
            user("Compare src/app.py and NOTES.md, e.g. style."),
        ]
    )
    assert [
        call["arguments"]["file_path"]
        for call in READERS[parser](SCRIPT.scripted_text(both, parser))
    ] == [
        "/tmp/sample-repo/src/app.py",
        "/tmp/sample-repo/NOTES.md",
    ]
    none = render([{"role": "system", "content": SYSTEM}, user("What is in this folder?")])
    [call] = READERS[parser](SCRIPT.scripted_text(none, parser))
    assert (call["name"], call["arguments"]["command"]) == ("Bash", "ls")


@pytest.mark.parametrize("parser", sorted(SCRIPT.WIRE_FORMATS))
def test_tool_results_get_the_final_answer_quoting_each(parser: str) -> None:
    prompt = render(
        [
            {"role": "system", "content": SYSTEM},
            user("Compare a.py and b.py"),
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    called("Read", {"file_path": "/tmp/sample-repo/a.py"}, "1"),
                    called("Read", {"file_path": "/tmp/sample-repo/b.py"}, "2"),
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "1",
                "content": "     1→\n     2→the code word is teal\n",
            },
            {"role": "tool", "tool_call_id": "2", "content": "1\tsecond file\n"},
        ]
    )
    text = SCRIPT.scripted_text(prompt, parser)
    assert (
        text
        == 'The tool results came back. They begin with "the code word is teal" and "second file".'
    )
    assert READERS["hermes"](text) == []


def test_no_script_without_tools_or_when_the_assistant_is_not_asked() -> None:
    plain = render([{"role": "user", "content": "Write a haiku about fabric."}], tools=None)
    assert SCRIPT.scripted_text(plain, "hermes") is None
    finished = TEMPLATE.render(
        messages=[user("Read NOTES.md")], tools=TOOLS, add_generation_prompt=False
    )
    assert SCRIPT.scripted_text(finished, "hermes") is None


def test_every_tool_call_parser_a_shipped_profile_names_has_a_wire_format() -> None:
    """The lab serves each of them (tests/lab/test_lab_clients.py): a profile with a parser
    the script cannot write would go untested."""
    roles = IMAGE.parents[3].parent / "roles"
    profiles = yaml.safe_load((roles / "vllm_server/defaults/main.yml").read_text())
    named = {p["tool_call_parser"] for p in profiles["vllm_server_profiles"].values()}
    named.add(
        yaml.safe_load((roles / "mlx_server/defaults/main.yml").read_text())[
            "mlx_server_tool_call_parser"
        ]
    )
    assert named <= set(SCRIPT.WIRE_FORMATS), named - set(SCRIPT.WIRE_FORMATS)
