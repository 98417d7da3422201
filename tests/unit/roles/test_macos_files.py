"""The launchd jobs of mlx_server (a LaunchDaemon) and claude_code_router (an agent), rendered
from the roles' templates as a Mac would get them, are valid property lists with the keys
launchd needs; keys are never on a command line, and the daemon's not in its environment
either (anyone may `launchctl print` a system service)."""

from __future__ import annotations

import itertools
import json
import os
import plistlib
import subprocess
import sys
from pathlib import Path

import pytest

from llmfleet.log_entries import container_entries, container_time
from tests.unit.roles.localhost_play import play_on_localhost

HERE = Path(__file__).parent
HOME = "/Users/dev"
EXTRA_VARS = {
    "mlx_server_owner": "dev",
    "mlx_server_home": HOME,
    "mlx_server_host": "0.0.0.0",
    "mlx_server_port": 8003,
    "mlx_server_api_key": "mlx-secret",
    "mlx_server_served_model_name": "qwen2.5-coder-32b",
    "mlx_server_env": {"HF_HOME": "/Volumes/models/hf"},
    "claude_code_router_owner": "dev",
    "claude_code_router_home": HOME,
    "claude_code_router_api_key": "router-secret",
    "claude_code_router_upstream_api_key": "upstream-secret",
    "claude_code_router_upstream_url": "http://127.0.0.1:8003",
    "claude_code_router_model": "qwen2.5-coder-32b",
    "__claude_code_router_node_path": "/opt/homebrew/bin/node",
}
LAUNCHD_KEYS = {
    "Label",
    "ProgramArguments",
    "EnvironmentVariables",
    "RunAtLoad",
    "KeepAlive",
    "StandardOutPath",
    "StandardErrorPath",
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("macos")
    proc = play_on_localhost(HERE / "render_macos_files.yml", {**EXTRA_VARS, "out_dir": str(out)})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return out


def load(path: Path) -> dict:
    with path.open("rb") as handle:
        plist = plistlib.load(handle)
    assert isinstance(plist, dict)
    return plist


def test_vllm_mlx_daemon(rendered: Path) -> None:
    plist = load(rendered / "vllm-mlx.plist")
    assert set(plist) >= LAUNCHD_KEYS | {"UserName", "WorkingDirectory"}
    assert plist["Label"] == "com.llmfleet.vllm-mlx"
    # A daemon runs as root unless UserName says otherwise; GroupName left out is the
    # user's primary group.
    assert plist["UserName"] == "dev" and "GroupName" not in plist
    assert plist["WorkingDirectory"] == HOME
    assert plist["RunAtLoad"] is True and plist["KeepAlive"] is True
    venv = f"{HOME}/.local/share/llmfleet/vllm-mlx"
    argv = plist["ProgramArguments"]
    assert argv[:4] == [
        f"{venv}/bin/python",
        f"{venv}/bin/llmfleet-vllm-mlx",
        "serve",
        "mlx-community/Qwen2.5-Coder-32B-Instruct-8bit",
    ]
    pairs = dict(itertools.pairwise(argv))
    assert pairs["--host"] == "0.0.0.0" and pairs["--port"] == "8003"
    assert pairs["--served-model-name"] == "qwen2.5-coder-32b"
    assert pairs["--tool-call-parser"] == "hermes"
    assert "--enable-auto-tool-choice" in argv and "--continuous-batching" in argv
    assert "--api-key" not in argv
    assert "mlx-secret" not in (rendered / "vllm-mlx.plist").read_text()
    env = plist["EnvironmentVariables"]
    assert env["VLLM_MLX_API_KEY_FILE"] == f"{HOME}/.config/llmfleet/vllm-mlx.key"
    assert env["HF_HOME"] == "/Volumes/models/hf" and env["HOME"] == HOME
    assert env["USER"] == env["LOGNAME"] == "dev"
    assert plist["StandardOutPath"] == f"{HOME}/Library/Logs/llmfleet/vllm-mlx.log"
    assert plist["StandardErrorPath"] == plist["StandardOutPath"]


def test_claude_code_router_agent(rendered: Path) -> None:
    plist = load(rendered / "claude-code-router.plist")
    assert set(plist) >= LAUNCHD_KEYS
    assert plist["Label"] == "com.llmfleet.claude-code-router"
    assert plist["RunAtLoad"] is True and plist["KeepAlive"] is True
    assert plist["ProgramArguments"] == [
        "/opt/homebrew/bin/node",
        f"{HOME}/.local/share/llmfleet/claude-code-router/node_modules/"
        "@musistudio/claude-code-router/dist/cli.js",
        "start",
    ]
    assert plist["EnvironmentVariables"] == {
        "HOME": HOME,
        "LLMFLEET_CCR_API_KEY": "router-secret",
        "LLMFLEET_UPSTREAM_API_KEY": "upstream-secret",
    }
    assert plist["StandardOutPath"] == f"{HOME}/Library/Logs/llmfleet/claude-code-router.log"


def stand_in_vllm_mlx(folder: Path, cli: str) -> None:
    """A package vllm_mlx in ``folder`` whose ``cli.main`` is ``cli``'s, for the launcher."""
    package = folder / "vllm_mlx"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "cli.py").write_text(cli)


def test_the_launcher_hands_the_key_to_vllm_mlx_but_not_to_ps(
    rendered: Path, tmp_path: Path
) -> None:
    """The launcher with a stand-in vllm_mlx.cli that reports what it received and what
    the process's command line (what ps shows) holds; the key comes from the file the
    daemon's environment names."""
    stand_in_vllm_mlx(
        tmp_path,
        "import json, os, sys\n"
        "def main():\n"
        "    cmdline = open('/proc/self/cmdline', 'rb').read().split(b'\\0')\n"
        "    print(json.dumps({'argv': sys.argv[1:], 'cmdline': [c.decode() for c in cmdline if c],"
        " 'env_key': os.environ.get('VLLM_MLX_API_KEY_FILE')}))\n"
        "    return 0\n",
    )
    key_file = tmp_path / "vllm-mlx.key"
    key_file.write_text("mlx-secret\n")
    proc = subprocess.run(
        [
            sys.executable,
            str(rendered / "llmfleet-vllm-mlx"),
            "serve",
            "some/model",
            "--port",
            "8003",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path), "VLLM_MLX_API_KEY_FILE": str(key_file)},
    )
    stamped = container_time(proc.stdout.strip())
    assert stamped is not None, proc.stdout
    seen = json.loads(stamped[1])
    assert seen["argv"] == ["serve", "some/model", "--port", "8003", "--api-key", "mlx-secret"]
    assert "mlx-secret" not in " ".join(seen["cmdline"])
    assert seen["env_key"] is None, "vllm-mlx's children are not told where the key is"


@pytest.mark.parametrize("content", [None, ""], ids=["missing", "empty"])
def test_the_launcher_stops_rather_than_serve_without_its_key(
    rendered: Path, tmp_path: Path, content: str | None
) -> None:
    """A key file that cannot be read (or is empty) would serve the LAN without a key: the
    launcher exits, and its log says why."""
    stand_in_vllm_mlx(tmp_path, "def main():\n    print('serving')\n    return 0\n")
    key_file = tmp_path / "vllm-mlx.key"
    if content is not None:
        key_file.write_text(content)
    proc = subprocess.run(
        [sys.executable, str(rendered / "llmfleet-vllm-mlx"), "serve", "some/model"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": str(tmp_path), "VLLM_MLX_API_KEY_FILE": str(key_file)},
    )
    assert proc.returncode == 1 and "serving" not in proc.stdout
    assert str(key_file) in proc.stderr


def test_every_line_the_launcher_passes_on_starts_with_its_time(
    rendered: Path, tmp_path: Path
) -> None:
    """launchd's log file has no times of its own: each line vllm-mlx writes, whole or in
    pieces, on stdout or stderr, gets the time `llmfleet logs` merges hosts by."""
    stand_in_vllm_mlx(
        tmp_path,
        "import logging, sys\n"
        "def main():\n"
        "    logging.basicConfig(level=logging.INFO, format='%(levelname)s %(message)s')\n"
        "    sys.stdout.write('loading the model')\n"
        "    sys.stdout.write(' ... done\\nserving\\n')\n"
        "    logging.info('Uvicorn running on http://0.0.0.0:8003')\n"
        "    print('two\\nlines')\n"
        "    return 0\n",
    )
    log = tmp_path / "vllm-mlx.log"
    with log.open("w") as handle:
        subprocess.run(
            [sys.executable, str(rendered / "llmfleet-vllm-mlx"), "serve", "some/model"],
            stdout=handle,
            stderr=handle,
            text=True,
            timeout=60,
            check=True,
            env={**os.environ, "PYTHONPATH": str(tmp_path)},
        )
    lines = log.read_text().splitlines()
    assert all(container_time(line) is not None for line in lines), lines
    entries = container_entries("mac-studio-1", "vllm-mlx", lines)
    assert sorted(entry.message for entry in entries) == sorted(
        [
            "loading the model ... done",
            "serving",
            "INFO Uvicorn running on http://0.0.0.0:8003",
            "two",
            "lines",
        ]
    )
