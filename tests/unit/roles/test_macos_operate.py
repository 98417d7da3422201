"""`llmfleet status`, `logs`, `doctor` and `down` on a Mac Studio, through the CLI and the real
playbooks, on this Linux machine standing in for the Mac: the connection is local, the home
folder is a temporary one, and macOS's launchctl and sysctl are stand-ins (macos_tools/: the
jobs launchd has loaded are a file's lines, as `launchctl list` prints them). vllm-mlx is a
small HTTP server answering /health and /v1/models with the key, and its log a file its
launcher would have written. What a real Mac adds (launchd itself, MLX) is not here."""

from __future__ import annotations

import http.server
import json
import os
import plistlib
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
LABEL = "com.llmfleet.vllm-mlx"
KEY = "mac-studio-key"
MODEL = "qwen2.5-coder-32b"


class VllmMlx(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/health":
            self._answer(200, {})
        elif self.path == "/v1/models":
            if self.headers.get("Authorization") != f"Bearer {KEY}":
                self._answer(401, {"error": "unauthorized"})
            else:
                self._answer(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        else:
            self._answer(404, {})

    def _answer(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_args: object) -> None:
        pass


@dataclass(frozen=True)
class Mac:
    inventory: Path
    home: Path
    jobs: Path
    env: dict[str, str]

    @property
    def plist(self) -> Path:
        return self.home / "Library" / "LaunchAgents" / f"{LABEL}.plist"

    def llmfleet(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["llmfleet", *args, "-i", str(self.inventory)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            cwd=ROOT,
            env=self.env,
        )


@pytest.fixture(scope="module")
def mac(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mac]:
    root = tmp_path_factory.mktemp("mac")
    home = root / "Users" / "dev"
    (home / "Library" / "LaunchAgents").mkdir(parents=True)
    (home / "Library" / "Logs" / "llmfleet").mkdir(parents=True)
    with (home / "Library" / "LaunchAgents" / f"{LABEL}.plist").open("wb") as handle:
        plistlib.dump({"Label": LABEL, "ProgramArguments": ["/usr/bin/true"]}, handle)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    (home / "Library" / "Logs" / "llmfleet" / "vllm-mlx.log").write_text(
        f"2020-01-01T00:00:00.000000Z INFO an old start\n{now} INFO Uvicorn running on port\n"
    )
    jobs = root / "launchd-jobs"
    jobs.write_text(f"4242\t0\t{LABEL}\n")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), VllmMlx)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    inventory = root / "inventory"
    inventory.mkdir()
    host = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "mlx_server_home": str(home),
        "mlx_server_port": server.server_address[1],
        "mlx_server_api_key": KEY,
        "mlx_server_served_model_name": MODEL,
    }
    (inventory / "hosts.yml").write_text(
        yaml.safe_dump({"all": {"children": {"mac_studios": {"hosts": {"mac-studio-1": host}}}}})
    )
    env = {
        **os.environ,
        "PATH": f"{HERE / 'macos_tools'}{os.pathsep}{os.environ['PATH']}",
        # community.general.launchd looks for the agent under $HOME/Library/LaunchAgents.
        "HOME": str(home),
        "LAUNCHCTL_JOBS": str(jobs),
        "LLMFLEET_HOME": str(ROOT),
    }
    yield Mac(inventory, home, jobs, env)
    server.shutdown()


def status(mac: Mac) -> dict:
    proc = mac.llmfleet("status", "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert KEY not in proc.stdout + proc.stderr
    return json.loads(proc.stdout)["hosts"]["mac-studio-1"]


def test_status_reads_the_agent_health_models_memory_and_swap(mac: Mac) -> None:
    found = status(mac)
    assert found["platform"] == "macos"
    mlx = found["mlx"]
    assert mlx["agent"] == {
        "label": LABEL,
        "loaded": True,
        "running": True,
        "pid": 4242,
        "last_exit_status": 0,
        "plist": str(mac.plist),
        "installed": True,
    }
    assert (mlx["health"], mlx["models"], mlx["served_model_name"]) == (200, [MODEL], MODEL)
    assert mlx["memory"] == {
        "total_bytes": 192 * 1024**3,
        "swap": {"total_bytes": 2 * 1024**3, "used_bytes": 0},
    }


def test_logs_show_the_stamped_lines_since_when_asked(mac: Mac) -> None:
    proc = mac.llmfleet("logs")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if "mac-studio-1" in line]
    assert [line.split(" | ", 1)[1] for line in lines] == [
        "INFO an old start",
        "INFO Uvicorn running on port",
    ], proc.stdout
    assert lines[0].startswith("2020-01-01T00:00:00.000Z mac-studio-1 vllm-mlx")
    recent = mac.llmfleet("logs", "--since", "1h")
    assert "an old start" not in recent.stdout and "Uvicorn running" in recent.stdout


def test_doctor_checks_the_mac_with_its_own_checks(mac: Mac) -> None:
    """Each check's problems are in tests/unit/plugins/module_utils/test_doctor_mac.py."""
    proc = mac.llmfleet("doctor", "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    found = {item["check"]: item["status"] for item in json.loads(proc.stdout)["findings"]}
    assert found == {"mlx_agent": "ok", "mlx_api": "ok", "mlx_swap": "ok"}


def test_down_unloads_the_agent_and_removes_its_plist_then_changes_nothing(mac: Mac) -> None:
    proc = mac.llmfleet("down", "--plain")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not mac.plist.exists()
    assert LABEL not in mac.jobs.read_text()
    assert changed_on_the_mac(proc.stdout) == 2, proc.stdout[-3000:]
    again = mac.llmfleet("down", "--plain")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert changed_on_the_mac(again.stdout) == 0, again.stdout[-3000:]
    agent = status(mac)["mlx"]["agent"]
    assert (agent["installed"], agent["loaded"], agent["running"]) == (False, False, False)


def changed_on_the_mac(output: str) -> int:
    found = re.search(r"^mac-studio-1\s+: ok=\d+\s+changed=(\d+)", output, re.M)
    assert found, output[-3000:]
    return int(found[1])
