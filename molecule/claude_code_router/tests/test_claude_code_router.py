"""The router runs under systemd with its config from inventory, answers /health, refuses
requests without its key, and keeps keys out of config.json and command lines."""

from __future__ import annotations

import json

CONFIG_DIR = "/root/.claude-code-router"
UNIT = "llmfleet-claude-code-router.service"


def is_spark_1(host) -> bool:
    return host.backend.get_hostname() == "molecule-spark-1"


def test_the_unit_is_enabled_and_running(host) -> None:
    service = host.service(UNIT)
    assert service.is_enabled and service.is_running


def test_config_json_comes_from_inventory_without_keys(host) -> None:
    config_file = host.file(f"{CONFIG_DIR}/config.json")
    assert config_file.mode == 0o600
    config = json.loads(config_file.content_string)
    [provider] = config["Providers"]
    assert provider["api_base_url"] == "http://127.0.0.1:8000/v1/chat/completions"
    assert provider["models"] == ["llmfleet-tiny"]
    assert provider["api_key"] == "$LLMFLEET_UPSTREAM_API_KEY"
    assert config["Router"]["default"] == "llmfleet,llmfleet-tiny"
    assert config["Router"]["background"] == "llmfleet,llmfleet-tiny"
    assert config["Router"]["longContextThreshold"] == 60000
    assert config["PORT"] == 3456
    if is_spark_1(host):
        assert config["HOST"] == "0.0.0.0"  # noqa: S104 - what spark-1 is told to bind
        assert config["APIKEY"] == "$LLMFLEET_CCR_API_KEY"
    else:
        assert config["HOST"] == "127.0.0.1" and "APIKEY" not in config
    assert "molecule-" not in config_file.content_string


def test_keys_live_in_an_owner_only_environment_file(host) -> None:
    env_file = host.file(f"{CONFIG_DIR}/llmfleet.env")
    assert env_file.mode == 0o600 and env_file.user == "root"
    assert "LLMFLEET_UPSTREAM_API_KEY=molecule-upstream-key" in env_file.content_string
    cmdlines = host.check_output("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' || true")
    assert "molecule-" not in cmdlines


def test_health_answers_and_the_key_is_required(host) -> None:
    assert (
        host.check_output("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:3456/health")
        == "200"
    )
    if not is_spark_1(host):
        return
    request = (
        "curl -s -o /dev/null -w '%{http_code}' -X POST http://127.0.0.1:3456/v1/messages "
        '-H \'content-type: application/json\' -d \'{"model":"x","max_tokens":1,"messages":[]}\''
    )
    assert host.check_output(request) == "401"
    # With the key the request passes the router's auth and is forwarded upstream.
    assert host.check_output(request + " -H 'x-api-key: molecule-router-key'") != "401"


def test_the_router_listens_where_inventory_says(host) -> None:
    address = "0.0.0.0:3456" if is_spark_1(host) else "127.0.0.1:3456"
    assert host.socket(f"tcp://{address}").is_listening
