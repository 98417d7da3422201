"""The converged_record callback, through real ansible-playbook runs on localhost: it gathers
what the run's tasks wrote (a no_log task's and a loop's included, never a secret's content),
hands it over to the record task in an owner-only folder that is gone when the run ends, and a
run that failed on a host records nothing; a second run's comparison reads the record back."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[4]
SECRET = "hunter2-TOPSECRET-converged"
INPUTS = {
    "name": "Compute the digest of this run's inputs",
    "llmfleet.cluster.converged_state": {"mode": "inputs"},
    "register": "__llmfleet_converged_inputs",
}


def record_task(path: str) -> dict[str, Any]:
    return {
        "name": "Record the state this run left",
        "llmfleet.cluster.converged_state": {
            "mode": "record",
            "inputs": "{{ __llmfleet_converged_inputs.inputs }}",
            "input_parts": "{{ __llmfleet_converged_inputs.input_parts }}",
            "path": path,
        },
        "register": "recorded",
    }


def compare_task(register: str, path: Path) -> dict[str, Any]:
    return {
        "name": f"Compare ({register})",
        "llmfleet.cluster.converged_state": {"mode": "compare", "path": str(path)},
        "register": register,
    }


def play(tasks: list[dict[str, Any]], **extra: Any) -> list[dict[str, Any]]:
    return [{"name": "Converge", "hosts": "all", "gather_facts": False, **extra, "tasks": tasks}]


def collections_path() -> str:
    """Where ansible finds llmfleet.cluster: the checkout's symlink, or the folder that holds
    the copy ansible-test runs the tests in (``.../ansible_collections/llmfleet/cluster``)."""
    if (REPO / "collections").is_dir():
        return str(REPO / "collections")
    if REPO.parents[1].name == "ansible_collections":
        return str(REPO.parents[2])
    return os.environ.get("ANSIBLE_COLLECTIONS_PATH", "")


def playbook(
    tmp_path: Path, name: str, plays: list[dict[str, Any]], hosts: tuple[str, ...] = ("localhost",)
) -> tuple[int, dict[str, dict[str, Any]], str]:
    """Run ``plays`` with the collection's callback enabled; return ansible-playbook's rc, each
    task's result by host (``{task name: {host: result}}``) and its stderr.

    The environment names the collection and the callback itself: under ``ansible-test units``
    the tests run from a copy of the collection without the checkout's ansible.cfg."""
    (tmp_path / f"{name}.yml").write_text(json.dumps(plays))
    inventory = tmp_path / "inventory.yml"
    connection = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory.write_text(json.dumps({"all": {"hosts": dict.fromkeys(hosts, connection)}}))
    (tmp_path / "ansible.cfg").write_text("[defaults]\nretry_files_enabled = false\n")
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(tmp_path / "ansible.cfg"),
        "ANSIBLE_COLLECTIONS_PATH": collections_path(),
        "ANSIBLE_CALLBACKS_ENABLED": "llmfleet.cluster.converged_record",
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "ANSIBLE_NOCOLOR": "1",
        "TMPDIR": str(tmp_path / "tmp"),  # where the callback makes its hand-over folder
    }
    # The playbook is a controller: ansible-test's PYTHONPATH for module tests holds an
    # ``ansible`` package cut down to module_utils.
    env.pop("PYTHONPATH", None)
    env.pop("LLMFLEET_CONVERGED_HANDOVER", None)
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
         str(tmp_path / f"{name}.yml")],
        capture_output=True, text=True, timeout=180, check=False, env=env, cwd=tmp_path,
    )  # fmt: skip
    try:
        out = json.loads(proc.stdout)
    except ValueError:
        pytest.fail(f"no JSON result (rc {proc.returncode})\n{proc.stdout[-3000:]}\n{proc.stderr}")
    results = {task["task"]["name"]: task["hosts"] for ran in out["plays"] for task in ran["tasks"]}
    return proc.returncode, results, proc.stderr


def test_a_run_records_what_it_wrote_and_the_next_one_compares(tmp_path: Path) -> None:
    files = tmp_path / "files"
    files.mkdir()
    record = tmp_path / "converged.json"
    written = [files / name for name in ("a.txt", "secret.txt", "b.txt", "c.txt", "d", "d/e.conf")]
    rc, results, err = playbook(
        tmp_path,
        "site",
        play(
            [
                INPUTS,
                {"name": "Write a", "ansible.builtin.copy": {
                    "dest": "{{ files_dir }}/a.txt", "content": "a\n", "mode": "0644"}},
                {"name": "Write the secret", "no_log": True, "ansible.builtin.copy": {
                    "dest": "{{ files_dir }}/secret.txt", "content": SECRET, "mode": "0600"}},
                {"name": "Write b and c", "loop": ["b", "c"], "ansible.builtin.copy": {
                    "dest": "{{ files_dir }}/{{ item }}.txt", "content": "{{ item }}\n",
                    "mode": "0644"}},
                {"name": "Write the folder and its file", "llmfleet.cluster.config_files": {
                    "directories": [{"path": "{{ files_dir }}/d", "mode": "0755"}],
                    "files": [{"dest": "{{ files_dir }}/d/e.conf", "content": "e\n",
                               "mode": "0640"}]}},
                {"name": "Fail, ignored", "ansible.builtin.command": "false",
                 "ignore_errors": True},
                record_task(str(record)),
                {"name": "Read the hand-over",
                 "ansible.builtin.set_fact": {
                     "handover": "{{ lookup('env', 'LLMFLEET_CONVERGED_HANDOVER') }}"}},
                {"name": "Stat the hand-over", "ansible.builtin.stat": {"path": "{{ handover }}"},
                 "register": "folder"},
                {"name": "Show the hand-over",
                 "ansible.builtin.command": "cat {{ handover }}/localhost.json"},
            ],
            vars={"files_dir": str(files)},
        ),
    )  # fmt: skip
    assert rc == 0, (results, err)
    recorded = results["Record the state this run left"]["localhost"]
    assert (recorded["changed"], recorded["converged"], recorded["changes"]) == (True, True, [])
    assert re.fullmatch(r"\d{8}T\d{6}Z-\d+", recorded["run"]), recorded
    text = record.read_text()
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    kept = json.loads(text)
    assert kept["items"]["files"] == [str(path) for path in written]  # in the run's order
    assert kept["run"] == recorded["run"]
    assert (
        kept["inputs"] == results["Compute the digest of this run's inputs"]["localhost"]["inputs"]
    )
    assert SECRET not in text
    # The hand-over was owner-only while the run went on, said nothing secret, and is gone.
    handed = results["Show the hand-over"]["localhost"]["stdout"]
    assert json.loads(handed)["items"]["files"] == [str(path) for path in written]
    assert SECRET not in handed
    folder = results["Stat the hand-over"]["localhost"]["stat"]
    assert (folder["isdir"], folder["mode"]) == (True, "0700")
    assert not Path(folder["path"]).exists()
    assert list((tmp_path / "tmp").glob("llmfleet-converged-*")) == []

    rc, results, err = playbook(
        tmp_path,
        "converged",
        play(
            [
                compare_task("first", record),
                {"name": "Edit a", "ansible.builtin.shell": f"echo more >> {files / 'a.txt'}"},
                compare_task("second", record),
                {**compare_task("third", record), "vars": {"llmfleet_example": 2}},
            ],
            vars={"files_dir": str(files)},
        ),
    )
    assert rc == 0, (results, err)
    first = results["Compare (first)"]["localhost"]
    assert (first["converged"], first["changes"], first["run"]) == (True, [], recorded["run"])
    second = results["Compare (second)"]["localhost"]
    assert second["converged"] is False
    assert second["changes"] == [f"{files / 'a.txt'}: its content changed"]
    # A variable the run did not have: named, its value nowhere; what else changed follows, so
    # that a walk limited to what the variable reaches is never taken for one that suffices.
    third = results["Compare (third)"]["localhost"]
    assert third["changes"] == [
        f"the inputs changed since run {recorded['run']}: llmfleet_example",
        f"{files / 'a.txt'}: its content changed",
    ]
    assert third["changed_inputs"] == ["var:llmfleet_example"]


def test_a_run_that_failed_on_a_host_records_nothing(tmp_path: Path) -> None:
    rc, results, err = playbook(
        tmp_path,
        "site",
        play(
            [
                INPUTS,
                {"name": "Write a", "ansible.builtin.copy": {
                    "dest": "{{ playbook_dir }}/{{ inventory_hostname }}.txt", "content": "a\n",
                    "mode": "0644"}},
                {"name": "Break on one", "ansible.builtin.command": "false",
                 "when": "inventory_hostname == 'one'"},
                record_task("{{ playbook_dir }}/{{ inventory_hostname }}.json"),
            ]
        ),
        hosts=("one", "two"),
    )  # fmt: skip
    assert rc == 2, (results, err)
    recorded = results["Record the state this run left"]
    assert list(recorded) == ["two"]  # one stopped where it failed
    assert recorded["two"]["changed"] is False
    assert recorded["two"]["converged"] is False
    assert recorded["two"]["msg"] == "no record: the run failed on one"
    assert recorded["two"]["changes"] == ["no record: the run failed on one"]
    assert list(tmp_path.glob("*.json")) == []
    assert list((tmp_path / "tmp").glob("llmfleet-converged-*")) == []
