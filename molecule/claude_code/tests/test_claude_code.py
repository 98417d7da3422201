"""The wrapper (spark-1) and the settings file (spark-2) carry the endpoint, every model
alias and the token, readable by their owner only; the pinned CLI runs through them."""

from __future__ import annotations

import json

ALIASES = (
    "ANTHROPIC_MODEL",
    "ANTHROPIC_SMALL_FAST_MODEL",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "CLAUDE_CODE_SUBAGENT_MODEL",
)
EXPECTED = {
    "ANTHROPIC_BASE_URL": "http://127.0.0.1:8000",
    "ANTHROPIC_AUTH_TOKEN": "molecule-token",
    "CLAUDE_CODE_ATTRIBUTION_HEADER": "0",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "API_TIMEOUT_MS": "3000000",
    "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "4096",
    **dict.fromkeys(ALIASES, "llmfleet-tiny"),
}
WRAPPER = "/root/.local/bin/claude-local"


def is_spark_1(host) -> bool:
    return host.backend.get_hostname() == "molecule-spark-1"


def test_the_command_holds_the_token_for_its_owner_only(host) -> None:
    if not is_spark_1(host):
        return
    wrapper = host.file(WRAPPER)
    assert wrapper.is_file and wrapper.user == "root" and wrapper.mode == 0o700


def test_the_wrapper_exports_the_whole_environment(host) -> None:
    if not is_spark_1(host):
        return
    # What the CLI would see: run the wrapper with `env` in place of claude.
    script = host.file(WRAPPER).content_string
    exec_line = next(line for line in script.splitlines() if line.startswith("exec "))
    probe = script.replace(exec_line, 'exec env "$@"')
    seen = host.run("ANTHROPIC_API_KEY=sk-leak sh -c %s probe", probe)
    assert seen.rc == 0, seen.stderr
    env = dict(line.split("=", 1) for line in seen.stdout.splitlines() if "=" in line)
    assert {name: env.get(name) for name in EXPECTED} == EXPECTED
    assert "ANTHROPIC_API_KEY" not in env, "an API key from the caller would win over the token"
    assert exec_line == 'exec /root/.local/share/llmfleet/claude-code/node_modules/.bin/claude "$@"'


def test_the_pinned_cli_runs_through_the_wrapper(host) -> None:
    if not is_spark_1(host):
        return
    assert host.check_output(f"{WRAPPER} --version").startswith("2.1.330 ")


def test_the_settings_file_carries_the_same_environment(host) -> None:
    if is_spark_1(host):
        return
    settings_file = host.file("/root/.claude/settings.json")
    assert settings_file.mode == 0o600
    settings = json.loads(settings_file.content_string)
    assert settings["theme"] == "dark", "the user's own settings were lost"
    assert settings["env"]["EDITOR"] == "vi"
    assert {name: settings["env"].get(name) for name in EXPECTED} == EXPECTED
    assert "ANTHROPIC_API_KEY" not in settings["env"]
    assert not host.file(WRAPPER).exists, "no install: users run their own claude"
