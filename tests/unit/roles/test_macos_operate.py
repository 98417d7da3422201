"""`llmfleet status`, `logs`, `doctor` and `down` on a Mac Studio, through the CLI and the real
playbooks, on this Linux machine standing in for the Mac: the connection is local, the home
folder and the daemons' folder are temporary ones, and macOS's launchctl, sudo and sysctl are
stand-ins (macos_tools/: the services launchd has loaded are a file's lines, by domain; the
system domain takes root, which the sudo stand-in gives). vllm-mlx is a small HTTP server
answering /health and /v1/models with the key, and its log a file its launcher would have
written. What a real Mac adds (launchd itself, MLX) is not here."""

from __future__ import annotations

import getpass
import grp
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
    daemons: Path
    jobs: Path
    env: dict[str, str]

    @property
    def plist(self) -> Path:
        return self.daemons / f"{LABEL}.plist"

    @property
    def key_file(self) -> Path:
        return self.home / ".config" / "llmfleet" / "vllm-mlx.key"

    def llmfleet(self, *args: str) -> subprocess.CompletedProcess[str]:
        # What this machine cannot have: /Library/LaunchDaemons, root:wheel.
        machine = {
            "__mlx_server_daemon_dir": str(self.daemons),
            "__mlx_server_plist_owner": getpass.getuser(),
            "__mlx_server_plist_group": grp.getgrgid(os.getgid()).gr_name,
        }
        return subprocess.run(
            ["llmfleet", *args, "-i", str(self.inventory), "-e", json.dumps(machine)],
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
    (home / "Library" / "Logs" / "llmfleet").mkdir(parents=True)
    (home / ".config" / "llmfleet").mkdir(parents=True)
    (home / ".config" / "llmfleet" / "vllm-mlx.key").write_text(KEY + "\n")
    daemons = root / "Library" / "LaunchDaemons"
    daemons.mkdir(parents=True)
    plist = daemons / f"{LABEL}.plist"
    with plist.open("wb") as handle:
        plistlib.dump({"Label": LABEL, "ProgramArguments": ["/usr/bin/true"]}, handle)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    (home / "Library" / "Logs" / "llmfleet" / "vllm-mlx.log").write_text(
        f"2020-01-01T00:00:00.000000Z INFO an old start\n{now} INFO Uvicorn running on port\n"
    )
    jobs = root / "launchd-jobs"
    jobs.write_text(f"system\t{LABEL}\t4242\t-\t{plist}\n")
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
        # The record of the last full run, which `down` forgets: this Mac's own, not the
        # record of the machine's root the tests run as.
        "llmfleet_converged_record_file": str(home / ".local" / "state" / "llmfleet" / "c.json"),
    }
    (inventory / "hosts.yml").write_text(
        yaml.safe_dump({"all": {"children": {"mac_studios": {"hosts": {"mac-studio-1": host}}}}})
    )
    env = {key: value for key, value in os.environ.items() if key != "MACOS_STAND_IN_ROOT"}
    env |= {
        "PATH": f"{HERE / 'macos_tools'}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(home),
        "LAUNCHCTL_JOBS": str(jobs),
        "LLMFLEET_HOME": str(ROOT),
        # Tests run as root too: sudo to root is then skipped unless Ansible is told not to.
        "ANSIBLE_BECOME_ALLOW_SAME_USER": "true",
    }
    yield Mac(inventory, home, daemons, jobs, env)
    server.shutdown()


def status(mac: Mac) -> dict:
    proc = mac.llmfleet("status", "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert KEY not in proc.stdout + proc.stderr
    return json.loads(proc.stdout)["hosts"]["mac-studio-1"]


def test_status_reads_the_daemon_health_models_memory_and_swap(mac: Mac) -> None:
    """Read from `launchctl print system/LABEL`, without sudo: anyone may query the system
    domain."""
    found = status(mac)
    assert found["platform"] == "macos"
    mlx = found["mlx"]
    assert mlx["agent"] == {
        "label": LABEL,
        "loaded": True,
        "running": True,
        "state": "running",
        "pid": 4242,
        "last_exit_status": None,
        "service": f"system/{LABEL}",
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
    """Each check's problems are in tests/unit/plugins/plugin_utils/_doctor/test_mac.py."""
    proc = mac.llmfleet("doctor", "--json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    found = {item["check"]: item["status"] for item in json.loads(proc.stdout)["findings"]}
    assert found == {"mlx_agent": "ok", "mlx_api": "ok", "mlx_swap": "ok"}


def test_down_boots_the_daemon_out_and_removes_its_plist_and_key_then_changes_nothing(
    mac: Mac,
) -> None:
    record = mac.home / ".local" / "state" / "llmfleet" / "c.json"  # llmfleet up's, last run
    record.parent.mkdir(parents=True)
    record.write_text("{}")
    proc = mac.llmfleet("down", "--plain")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not mac.plist.exists() and not mac.key_file.exists()
    assert LABEL not in mac.jobs.read_text()
    assert not record.exists()
    # launchctl bootout system/LABEL, the plist, the key file, the record of the last run.
    assert changed_on_the_mac(proc.stdout) == 4, proc.stdout[-3000:]
    again = mac.llmfleet("down", "--plain")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert changed_on_the_mac(again.stdout) == 0, again.stdout[-3000:]
    agent = status(mac)["mlx"]["agent"]
    assert (agent["installed"], agent["loaded"], agent["running"]) == (False, False, False)


def changed_on_the_mac(output: str) -> int:
    found = re.search(r"^mac-studio-1\s+: ok=\d+\s+changed=(\d+)", output, re.M)
    assert found, output[-3000:]
    return int(found[1])
