"""benchmark's files/llmfleet-llama-benchy: llama-benchy run with the API key and the Hub
token from a file it removes once read (never on a command line), a local book served to it
over HTTP, and its progress events turned into the progress file `llmfleet bench` draws its
bar from.

A stand-in ``llama_benchy`` package (on PYTHONPATH) does what the real one does with these:
reads its options from sys.argv, fetches --book-url over HTTP, writes request_end events to
--emit-progress, and exits 1 when asked to fail (--exit-on-first-fail's way)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / "roles/benchmark/files/llmfleet-llama-benchy"

STAND_IN = textwrap.dedent(
    """
    import json, os, sys, time, urllib.request
    from pathlib import Path

    def main():
        argv = sys.argv[1:]
        def value(flag):
            return argv[argv.index(flag) + 1] if flag in argv else None
        seen = {"argv": argv, "hf_token": os.environ.get("HF_TOKEN"),
                "cmdline": Path("/proc/self/cmdline").read_bytes().decode().split("\\0")}
        if value("--book-url"):
            seen["book"] = urllib.request.urlopen(value("--book-url")).read().decode()
        Path(os.environ["STAND_IN_SEEN"]).write_text(json.dumps(seen))
        events = value("--emit-progress")
        with open(events, "a") as stream:
            stream.write(json.dumps({"type": "header"}) + "\\n")
            for n in range(3):
                error = "HTTP 500" if n == 2 and "fail" in argv else ""
                end = {"type": "request_end", "request_id": n, "error": error}
                stream.write(json.dumps(end) + "\\n")
                stream.flush()
                time.sleep(0.05)
        if "fail" in argv:
            sys.exit(1)
    """
)


def run(
    tmp_path: Path, *extra: str, secrets: dict | None = None
) -> tuple[subprocess.CompletedProcess[str], dict, dict]:
    package = tmp_path / "site" / "llama_benchy"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text(STAND_IN)
    book = tmp_path / "book.txt"
    book.write_text("It was a dark and stormy night. " * 10)
    progress = tmp_path / "progress.json"
    seen = tmp_path / "seen.json"
    secrets_file = tmp_path / "secrets.json"
    secrets_file.write_text(json.dumps(secrets or {}))
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--secrets-file", str(secrets_file), "--book-file", str(book),
         "--progress", str(progress), "--requests", "4", "--", "--base-url",
         "http://127.0.0.1:9/v1", *extra],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "site"), "STAND_IN_SEEN": str(seen)},
    )  # fmt: skip
    return proc, json.loads(seen.read_text()), json.loads(progress.read_text())


def test_the_keys_reach_llama_benchy_but_no_command_line(tmp_path: Path) -> None:
    proc, seen, _ = run(tmp_path, secrets={"api_key": "sk-secret-1", "hf_token": "hf_secret_2"})
    assert proc.returncode == 0, proc.stderr
    argv = seen["argv"]
    assert argv[argv.index("--api-key") + 1] == "sk-secret-1"
    assert seen["hf_token"] == "hf_secret_2"
    cmdline = seen["cmdline"]
    assert not [part for part in cmdline for key in ("sk-secret-1", "hf_secret_2") if key in part]
    assert argv[:2] == ["--base-url", "http://127.0.0.1:9/v1"]
    # Read once, then gone.
    assert not (tmp_path / "secrets.json").exists()


def test_no_key_no_api_key_option(tmp_path: Path) -> None:
    proc, seen, _ = run(tmp_path, secrets={"api_key": "", "hf_token": ""})
    assert proc.returncode == 0, proc.stderr
    assert "--api-key" not in seen["argv"] and seen["hf_token"] is None


def test_the_book_is_served_to_it_from_the_local_file(tmp_path: Path) -> None:
    _, seen, _ = run(tmp_path)
    assert seen["book"].startswith("It was a dark and stormy night.")
    url = seen["argv"][seen["argv"].index("--book-url") + 1]
    assert url.startswith("http://127.0.0.1:") and url.endswith("/book.txt")


def test_its_progress_becomes_the_bench_progress_file(tmp_path: Path) -> None:
    _, _, progress = run(tmp_path)
    assert progress["scenario"] == "llama-benchy"
    assert (progress["done"], progress["requests"], progress["errors"]) == (3, 4, 0)
    assert (progress["scenario_index"], progress["scenarios"]) == (1, 1)


def test_a_failed_run_exits_non_zero_with_its_errors_counted(tmp_path: Path) -> None:
    proc, _, progress = run(tmp_path, "fail")
    assert proc.returncode == 1
    assert progress["errors"] == 1
