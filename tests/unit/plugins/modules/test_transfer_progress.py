"""modules/transfer_progress: a real Ansible async job (a command writing a file in steps)
followed until it ends, one progress line per attempt, its result made the task's; a failed
job fails the task with its stderr; a missing job and bad numbers are refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.llmfleet.cluster.plugins.modules import transfer_progress

from tests.unit.plugins.conftest import REPO

RunModule = Callable[..., tuple[int, dict[str, Any]]]
STEP_BYTES = 200_000
# Five steps of STEP_BYTES, 1 s apart: about 5 s, followed every 0.5 s (a module call on a
# loaded machine took over 2 s, and a writer of 2 s was done before the second attempt).
WRITER = (
    "for i in 1 2 3 4 5; do head -c {step} /dev/zero >> {path}/model.bin; sleep 1; done; {tail}"
)


def follow(
    tmp_path: Path, tail: str, *, on_controller: bool = False
) -> subprocess.CompletedProcess[str]:
    """ansible-playbook on localhost: the writer started with async/poll 0, then followed
    with transfer_progress until it is done; the JSON callback's output. The job's status
    file is in the folder ansible_async_dir names (the action plugin finds it there), or,
    ``on_controller``, in the controller's ~/.ansible_async (HOME is tmp_path)."""
    model = tmp_path / "model"
    model.mkdir()
    playbook = tmp_path / "follow.yml"
    writer = WRITER.format(step=STEP_BYTES, path=model, tail=tail)
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "hosts": "localhost",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "name": "Write the model in steps",
                            "ansible.builtin.shell": writer,
                            "async": 60,
                            "poll": 0,
                            "register": "job",
                        },
                        {
                            "name": "Wait for the writer",
                            "llmfleet.cluster.transfer_progress": {
                                "jid": "{{ job.ansible_job_id }}",
                                "path": str(model),
                                "total_bytes": 5 * STEP_BYTES,
                                "wait": 0.5,
                                "label": "writer",
                                "job_on_controller": on_controller,
                            },
                            "register": "copy",
                            "until": "copy.finished",
                            "retries": 40,
                            "delay": 0,
                        },
                    ],
                }
            ]
        )
    )
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
    }
    env.pop("PYTHONPATH", None)
    if on_controller:
        env["HOME"] = str(tmp_path)
    async_dir = [] if on_controller else ["-e", f"ansible_async_dir={tmp_path / 'async'}"]
    return subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i", "localhost,", "-c", "local",
            "-e", f"ansible_python_interpreter={sys.executable}",
            *async_dir,
            str(playbook),
        ],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def last_result(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    tasks = json.loads(proc.stdout)["plays"][0]["tasks"]
    return dict(tasks[-1]["hosts"]["localhost"])


@pytest.mark.parametrize("on_controller", [False, True], ids=["job-on-target", "job-on-controller"])
def test_a_job_is_followed_to_its_end_and_its_result_becomes_the_tasks(
    tmp_path: Path, on_controller: bool
) -> None:
    proc = follow(tmp_path, "echo done", on_controller=on_controller)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = last_result(proc)
    assert result["finished"] is True
    assert result["bytes"] == result["total_bytes"] == 5 * STEP_BYTES
    assert result["percent"] == 100.0
    assert result["progress"].startswith("writer: 1.0 MB of 1.0 MB (100%), ")
    assert (result["job"]["rc"], result["job"]["stdout"], result["changed"]) == (0, "done", True)
    # Followed over more than one attempt, each a line of its own (how many depends on the
    # machine's load: 2 when each attempt's module call is slow); the job's status file is
    # gone at the end.
    assert result["attempts"] >= 2, result
    jobs = tmp_path / (".ansible_async" if on_controller else "async")
    assert jobs.is_dir(), jobs
    assert not any(jobs.iterdir())


@pytest.mark.parametrize("on_controller", [False, True], ids=["job-on-target", "job-on-controller"])
def test_a_failed_job_fails_the_task_with_its_stderr(tmp_path: Path, on_controller: bool) -> None:
    proc = follow(
        tmp_path,
        "echo 'rsync error: some files could not be transferred' >&2; exit 23",
        on_controller=on_controller,
    )
    assert proc.returncode == 2, proc.stdout[-3000:]
    result = last_result(proc)
    assert result["failed"] is True
    assert result["msg"] == (
        "writer failed: non-zero return code: rsync error: some files could not be transferred"
    )
    assert result["job"]["rc"] == 23


def test_a_job_that_does_not_exist_and_bad_numbers_are_refused(
    tmp_path: Path, run_module: RunModule
) -> None:
    args = {"jid": "123.456", "async_dir": str(tmp_path), "path": str(tmp_path), "total_bytes": 1}
    rc, result = run_module(transfer_progress, {**args, "wait": 0})
    assert rc == 1
    assert result["msg"] == f"no async job 123.456 (no {tmp_path}/123.456)"
    rc, result = run_module(transfer_progress, {**args, "total_bytes": -1})
    assert rc == 1
    assert result["msg"] == "total_bytes (-1) and wait (10.0) must be 0 or more"
