"""module_utils/_node/transfer_progress: an async job's state as Ansible's async_wrapper writes
it, the bytes under a folder (partial files included), and the progress line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._node.transfer_progress import (
    bytes_under,
    human_bytes,
    job_state,
    progress_line,
    remove_job,
    wait_and_measure,
)


def write_job(async_dir: Path, jid: str, text: str) -> None:
    async_dir.mkdir(parents=True, exist_ok=True)
    (async_dir / jid).write_text(text)


def test_a_job_runs_until_its_module_result_replaces_the_started_record(tmp_path: Path) -> None:
    # What async_wrapper writes first, and what it writes over it when the module exits.
    started = {"started": True, "finished": False, "ansible_job_id": "j1"}
    write_job(tmp_path, "j1", json.dumps(started))
    assert job_state(str(tmp_path), "j1") == (False, {})
    write_job(tmp_path, "j1", "")
    assert job_state(str(tmp_path), "j1") == (False, {})
    write_job(tmp_path, "j1", json.dumps({"rc": 0, "stdout": "x", "changed": True}))
    assert job_state(str(tmp_path), "j1") == (True, {"rc": 0, "stdout": "x", "changed": True})
    # The wrapper's own record of a module it killed at the time limit has no "started".
    killed = {"msg": "Timeout exceeded", "failed": True, "child_pid": 7}
    write_job(tmp_path, "j2", json.dumps(killed))
    assert job_state(str(tmp_path), "j2") == (True, killed)
    remove_job(str(tmp_path), "j2")
    remove_job(str(tmp_path), "j2")  # gone already: nothing to do
    with pytest.raises(LookupError, match="no async job j2"):
        job_state(str(tmp_path), "j2")
    write_job(tmp_path, "j3", "[1, 2]")
    with pytest.raises(ValueError, match="holds"):
        job_state(str(tmp_path), "j3")


def test_bytes_count_every_file_under_the_folder_partial_ones_and_links_not_followed(
    tmp_path: Path,
) -> None:
    model = tmp_path / "m"
    assert bytes_under(str(model)) == 0
    (model / ".cache/huggingface/download").mkdir(parents=True)
    (model / "config.json").write_bytes(b"x" * 100)
    (model / ".model.safetensors.Ab12Cd").write_bytes(b"x" * 4000)  # rsync's partial file
    (model / ".cache/huggingface/download/w.incomplete").write_bytes(b"x" * 500)
    (model / "big").symlink_to("/dev/zero")
    (model / "loop").symlink_to(model)
    assert bytes_under(str(model)) == 4600
    assert bytes_under(str(model / "config.json")) == 100


def test_the_line_says_bytes_share_and_rate_in_decimal_units() -> None:
    assert human_bytes(0) == "0 B"
    assert human_bytes(999) == "999 B"
    assert human_bytes(5_242_880) == "5.2 MB"
    assert human_bytes(122_406_567_936) == "122.4 GB"
    assert human_bytes(3 * 10**15) == "3000.0 TB"
    assert progress_line(44_139_234_816, 122_406_567_936, 412e6, "copy from spark-1") == (
        "copy from spark-1: 44.1 GB of 122.4 GB (36%), 412.0 MB/s"
    )
    # A folder that holds more than the transfer brings stops at 100%.
    assert progress_line(300, 200, 0) == "300 B of 200 B (100%), 0 B/s"
    assert progress_line(0, 0, 0) == "0 B of 0 B (100%), 0 B/s"


def test_the_wait_ends_when_the_job_does_and_measures_the_growth(tmp_path: Path) -> None:
    jobs, model = tmp_path / "jobs", tmp_path / "m"
    model.mkdir()
    write_job(jobs, "j", json.dumps({"started": True, "finished": False}))
    now = [0.0]

    def sleep(seconds: float) -> None:
        # The transfer writes 1000 bytes a second; the job is done after 3 s.
        now[0] += seconds
        (model / "w").write_bytes(b"x" * int(1000 * now[0]))
        if now[0] >= 3:
            write_job(jobs, "j", json.dumps({"rc": 0, "changed": True}))

    finished, job, held, rate = wait_and_measure(
        str(jobs), "j", str(model), 10, clock=lambda: now[0], sleep=sleep
    )
    assert (finished, job, held, rate) == (True, {"rc": 0, "changed": True}, 3000, 1000.0)
    # Not done within the wait: the bytes so far, and the job still running.
    write_job(jobs, "j", json.dumps({"started": True, "finished": False}))
    now[0] = 0.0
    (model / "w").write_bytes(b"")
    finished, job, held, rate = wait_and_measure(
        str(jobs), "j", str(model), 2, clock=lambda: now[0], sleep=sleep
    )
    assert (finished, job, held, rate) == (False, {}, 2000, 1000.0)
