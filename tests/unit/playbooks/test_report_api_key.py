"""playbooks/report.yml sends the key the server checks: a host whose inventory sets only
vllm_server_api_key (another llmfleet_api_key, or none) is asked with vllm_server_api_key, as
its vLLM was started with it. A stand-in API here answers only that key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SERVER_KEY = "the-servers-own-key-0123"


class Api(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        ok = self.headers.get("Authorization") == f"Bearer {SERVER_KEY}"
        body = (
            {"choices": [{"message": {"content": "hello"}}], "usage": {"completion_tokens": 1}}
            if ok
            else {"error": "Unauthorized"}
        )
        data = json.dumps(body).encode()
        self.send_response(200 if ok else 401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Api)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def report(tmp_path: Path, url: str, **keys: str) -> tuple[int, str]:
    inventory = tmp_path / "hosts.json"
    host = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "gpu_container_record_file": str(tmp_path / "no-record.json"),
        "vllm_server_endpoint": {"local_url": url, "model": "tiny"},
        **keys,
    }
    inventory.write_text(json.dumps({"gh200": {"hosts": {"gh200-1": host}}}))
    proc = subprocess.run(
        ["ansible-playbook", "playbooks/report.yml", "-i", str(inventory)],
        capture_output=True, text=True, timeout=300, check=False, cwd=ROOT,
        env={**os.environ, "ANSIBLE_HOST_PATTERN_MISMATCH": "ignore"},
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    assert SERVER_KEY not in output  # the key stays out of the output
    return proc.returncode, " ".join(output.split())


@pytest.mark.parametrize(
    "collection_key", [None, "the-collection-wide-key-0000"], ids=["alone", "beside-another"]
)
def test_the_servers_own_key_is_sent(tmp_path: Path, api: str, collection_key: str | None) -> None:
    keys = {"vllm_server_api_key": SERVER_KEY}
    if collection_key:
        keys["llmfleet_api_key"] = collection_key
    rc, output = report(tmp_path, api, **keys)
    assert rc == 0, output[-3000:]
    assert "gh200-1 (tiny) answered in" in output, output[-3000:]


def test_the_collections_key_is_the_default(tmp_path: Path, api: str) -> None:
    rc, output = report(tmp_path, api, llmfleet_api_key=SERVER_KEY)
    assert rc == 0, output[-3000:]
    rc, output = report(tmp_path, api, llmfleet_api_key="another-key-entirely-00")
    assert rc != 0 and "answered HTTP 401" in output, output[-3000:]


def test_no_playbook_reads_the_collections_key_but_through_the_servers() -> None:
    # status.yml and doctor.yml send __llmfleet_serving_api_key too (their requests need a
    # served lab: tests/lab); the collection-wide key is read in one place only.
    readers = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "playbooks").rglob("*.yml")
        if "llmfleet_api_key" in path.read_text()
    )
    assert readers == ["playbooks/vars/services.yml"]
    for name in ("status.yml", "doctor.yml"):
        assert "__llmfleet_serving_api_key" in (ROOT / "playbooks" / name).read_text()
