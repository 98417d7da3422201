"""Real ansible-runner runs of tiny playbooks against localhost (plain mode); and ``up``'s early
stop (the comparison with the last full run first, site.yml only when a host changed), with the
runs recorded, and once for real."""

from __future__ import annotations

import json
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from llmfleet import converged
from llmfleet.cli import app
from llmfleet.playbook_files import run_collecting
from llmfleet.run_artifacts import HIDDEN
from llmfleet.run_outcome import HostStats, RunResult

runner = CliRunner()
REPO = Path(__file__).resolve().parents[3]


def _up(fc: Any, *args: str) -> tuple[int, str]:
    # --full: these tests are of site.yml's run and its display; the comparison before it,
    # and the early stop, have tests of their own (test_up_* below).
    result = runner.invoke(app, ["up", "-i", str(fc.inventory), "--plain", "--full", *args])
    return result.exit_code, result.output


def test_passing_run(fake_collection: Any, play: Callable[[str], str]) -> None:
    fake_collection.write_site(
        play(
            "    - name: Say hello\n"
            "      ansible.builtin.command: echo hello\n"
            "      changed_when: false\n"
            "    - name: Make a change\n"
            "      ansible.builtin.command: echo '{{ greeting }}'\n"
            "    - name: Never runs\n"
            "      ansible.builtin.debug: {msg: x}\n"
            "      when: false\n"
        )
    )
    code, out = _up(fake_collection, "-e", "greeting=hi there")
    assert code == 0, out
    assert "[localhost] ok: Say hello" in out
    assert "[localhost] changed: Make a change" in out
    assert "[localhost] skipping: Never runs" in out
    assert re.search(
        r"localhost\s+: ok=2 changed=1 unreachable=0 failed=0 skipped=1 rescued=0 ignored=0", out
    ), out
    assert "OK: all hosts done" in out


def test_failing_task(fake_collection: Any, play: Callable[[str], str]) -> None:
    fake_collection.write_site(
        play(
            "    - name: Fine\n"
            "      ansible.builtin.command: 'true'\n"
            "    - name: Start the engine\n"
            "      ansible.builtin.shell: |\n"
            '        for i in $(seq 1 30); do echo "err line $i" >&2; done\n'
            "        exit 3\n"
            "    - name: Not reached\n"
            "      ansible.builtin.command: 'true'\n"
        )
    )
    code, out = _up(fake_collection)
    assert code == 2, out
    assert "[localhost] FAILED: Start the engine" in out
    assert "play: Test play" in out
    assert "non-zero return code" in out
    assert "rc: 3" in out
    assert "err line 30" in out and "err line 11" in out
    assert "err line 10\n" not in out  # only the last 20 lines
    assert "Not reached" not in out
    assert "_raw_params" not in out and "invocation" not in out
    assert re.search(r"localhost\s+: ok=1 changed=1 unreachable=0 failed=1", out), out
    assert "FAILED: task failures on localhost" in out


def test_no_log_failure_hides_the_secret(fake_collection: Any, play: Callable[[str], str]) -> None:
    secret = "hunter2-TOPSECRET"
    fake_collection.write_site(
        play(
            "    - name: Log in\n"
            f"      ansible.builtin.shell: echo {secret} >&2; echo {secret}; exit 1\n"
            "      no_log: true\n"
        )
    )
    code, out = _up(fake_collection, "-v")
    assert code == 2, out
    assert "[localhost] FAILED: Log in" in out
    assert "no_log" in out  # ansible's censored notice
    assert secret not in out


def test_artifacts_keep_the_run_owner_only_and_without_no_log_values(
    fake_collection: Any, play: Callable[[str], str], tmp_path: Path
) -> None:
    secret = "hunter2-TOPSECRET-in-a-file"
    fake_collection.write_site(
        play(
            "    - name: Write the key\n"
            "      ansible.builtin.copy:\n"
            f"        {{content: {secret}, dest: {tmp_path}/key, mode: '0600'}}\n"
            "      no_log: true\n"
        )
    )
    artifacts = tmp_path / "runs"
    code, out = _up(fake_collection, "-vvv", "--artifacts", str(artifacts))
    assert code == 0, out
    assert stat.S_IMODE(artifacts.stat().st_mode) == 0o700
    files = [p for p in artifacts.rglob("*") if p.is_file()]
    assert any(p.parent.name == "job_events" for p in files), files
    assert [p for p in files if p.name == "stdout"], files
    assert all(secret not in p.read_text(errors="replace") for p in files)
    assert secret not in out


def test_parse_error_exits_4(fake_collection: Any) -> None:
    fake_collection.write_site("- hosts: all\n  tasks:\n    - name: x\n      debug: {msg: 1\n")
    code, out = _up(fake_collection)
    assert code == 4, out
    assert "could not parse" in out


def test_a_run_on_an_inventory_without_hosts_is_an_error_not_ok(fake_collection: Any) -> None:
    # As `llmfleet up -i inventory/lab` before `llmfleet lab up`: every play matches no host,
    # and ansible ends with success.
    fake_collection.inventory.write_text("[sparks]\n")
    fake_collection.write_site(
        "- name: Serve\n  hosts: sparks\n  tasks:\n    - name: x\n"
        "      ansible.builtin.debug: {msg: 1}\n"
    )
    code, out = _up(fake_collection)
    assert code == 1, out
    assert "no play had a host: the inventory is empty" in out
    assert "OK" not in out


def test_unreachable_exits_3(fake_collection: Any, play: Callable[[str], str]) -> None:
    fake_collection.inventory.write_text(
        "ghost ansible_host=127.0.0.1 ansible_port=1 ansible_connection=ssh "
        "ansible_ssh_common_args='-o ConnectTimeout=2 -o StrictHostKeyChecking=no'\n"
    )
    fake_collection.write_site(play("    - name: Ping\n      ansible.builtin.ping:\n"))
    code, out = _up(fake_collection)
    assert code == 3, out
    assert "[ghost] UNREACHABLE: Ping" in out
    assert re.search(r"ghost\s+: ok=0 changed=0 unreachable=1 failed=0", out), out


def test_debug_messages_reach_the_user(fake_collection: Any, play: Callable[[str], str]) -> None:
    fake_collection.write_site(
        play(
            "    - name: Report\n"
            "      ansible.builtin.debug:\n"
            "        msg: ['first line', 'second line']\n"
            "    - name: Secret report\n"
            "      ansible.builtin.debug:\n"
            "        msg: s3cr3t-value\n"
            "      no_log: true\n"
            "    - name: Check with a report\n"
            "      ansible.builtin.assert:\n"
            "        that: true\n"
            "        success_msg: endpoint answers\n"
            "    - name: Check without one\n"
            "      ansible.builtin.assert:\n"
            "        that: true\n"
        )
    )
    code, out = _up(fake_collection)
    assert code == 0, out
    assert "[localhost] first line\n" in out
    assert "[localhost] second line\n" in out
    assert "s3cr3t-value" not in out
    assert "[localhost] endpoint answers\n" in out
    assert "All assertions passed" not in out


def test_bench_shows_the_progress_of_the_run_on_retries(
    fake_collection: Any, play: Callable[[str], str]
) -> None:
    """`llmfleet bench` runs playbooks/bench.yml with a progress file of its own and shows
    what the load generator wrote there while the waiting task retries."""
    progress = (
        '{"scenario": "short_c4", "scenario_index": 2, "scenarios": 3, "done": 5,'
        ' "requests": 10, "errors": 1, "elapsed_s": 3.2}'
    )
    (fake_collection.root / "playbooks" / "bench.yml").write_text(
        play(
            "    - name: Write progress as the load generator does\n"
            "      ansible.builtin.copy:\n"
            "        dest: '{{ benchmark_progress_file }}'\n"
            f"        content: '{progress}'\n"
            "        mode: '0600'\n"
            "    - name: Wait for the benchmark to finish\n"
            "      ansible.builtin.command: 'true'\n"
            "      changed_when: false\n"
            "      register: job\n"
            "      until: job.attempts | default(1) >= 2\n"
            "      retries: 3\n"
            "      delay: 0\n"
        ),
        encoding="utf-8",
    )
    result = runner.invoke(app, ["bench", "-i", str(fake_collection.inventory), "--plain"])
    assert result.exit_code == 0, result.output
    assert (
        "retrying (1/4): Wait for the benchmark to finish: bench 2/3 short_c4 "
        "[############............] 5/10 requests, 1 error, 3 s" in result.output
    ), result.output


def test_bench_llama_benchy_turns_the_communitys_suite_on(
    fake_collection: Any, play: Callable[[str], str], tmp_path: Path
) -> None:
    seen = tmp_path / "seen"
    (fake_collection.root / "playbooks" / "bench.yml").write_text(
        play(
            "    - name: Write what the role would read\n"
            "      ansible.builtin.copy:\n"
            f"        dest: {seen}\n"
            "        content: '{{ benchmark_llama_benchy | default(false) | bool }}'\n"
            "        mode: '0600'\n"
        ),
        encoding="utf-8",
    )
    args = ["bench", "-i", str(fake_collection.inventory), "--plain", "--llama-benchy"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert seen.read_text() == "True"


def test_bench_without_inventory_exits_1(fake_collection: Any) -> None:
    (fake_collection.root / "playbooks" / "bench.yml").write_text("[]\n", encoding="utf-8")
    result = runner.invoke(app, ["bench", "-i", "/nonexistent/inventory"])
    assert result.exit_code == 1
    assert "inventory not found" in result.output


def test_up_json_is_the_result_on_stdout(fake_collection: Any, play: Callable[[str], str]) -> None:
    fake_collection.write_site(
        play(
            "    - name: Make a change\n"
            "      ansible.builtin.command: 'true'\n"
            "    - name: Fail, ignored\n"
            "      ansible.builtin.command: 'false'\n"
            "      ignore_errors: true\n"
        )
    )
    result = runner.invoke(
        app, ["up", "-i", str(fake_collection.inventory), "--plain", "--json", "--full"]
    )
    assert result.exit_code == 0, result.output
    assert "[localhost] changed: Make a change" in result.stderr  # the progress
    summary = json.loads(result.stdout)  # nothing else on stdout
    assert summary["exit_code"] == 0
    assert summary["rc"] == 0
    assert summary["status"] == "successful"
    assert summary["playbook"] == str(fake_collection.root / "site.yml")
    assert summary["inventory"] == str(fake_collection.inventory)
    assert summary["tags"] is None  # every task walked
    assert summary["hosts"] == {
        "localhost": {
            "ok": 2,
            "changed": 2,
            "unreachable": 0,
            "failed": 0,
            "skipped": 0,
            "rescued": 0,
            "ignored": 1,
        }
    }
    assert summary["failed_hosts"] == summary["unreachable_hosts"] == summary["failures"] == []
    assert summary["reports"] == []
    # ansible-runner's record, in a folder of this run under the collection's artifacts/runs
    run = Path(summary["artifacts"])
    assert run.parent == fake_collection.root / "artifacts" / "runs"
    assert re.fullmatch(r"\d{8}T\d{6}Z-site", run.name), run.name
    assert stat.S_IMODE(run.stat().st_mode) == stat.S_IMODE(run.parent.stat().st_mode) == 0o700
    assert (run / "stdout").is_file() and list((run / "job_events").iterdir())


def test_up_json_of_a_failed_run(fake_collection: Any, play: Callable[[str], str]) -> None:
    fake_collection.write_site(play("    - name: Break\n      ansible.builtin.command: 'false'\n"))
    result = runner.invoke(app, ["up", "-i", str(fake_collection.inventory), "--json", "--full"])
    assert result.exit_code == 2, result.output
    summary = json.loads(result.stdout)
    assert summary["exit_code"] == 2
    assert summary["rc"] == 2
    assert summary["hosts"]["localhost"]["failed"] == 1
    assert summary["failed_hosts"] == ["localhost"]
    (failure,) = summary["failures"]
    assert failure["host"] == "localhost"
    assert failure["task"] == "Break"
    assert failure["unreachable"] is False
    assert "non-zero return code" in failure["msg"]


def test_every_run_keeps_a_folder_of_its_own(
    fake_collection: Any, play: Callable[[str], str], tmp_path: Path
) -> None:
    fake_collection.write_site(play("    - name: Ping\n      ansible.builtin.ping:\n"))
    artifacts = tmp_path / "kept"
    for _ in range(2):
        code, out = _up(fake_collection, "--artifacts", str(artifacts))
        assert code == 0, out
    runs = sorted(p.name for p in artifacts.iterdir())
    assert len(runs) == 2, runs
    assert all(re.fullmatch(r"\d{8}T\d{6}Z-site(-2)?", name) for name in runs), runs


def test_artifacts_hide_secrets_of_the_environment(
    fake_collection: Any,
    play: Callable[[str], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The process environment reaches ansible-runner's `command` record, and a play on
    localhost that gathers facts puts it (ansible_env) in the job events and the fact cache:
    neither may keep a secret."""
    secret = "sk-llmfleet-test-0123456789"
    monkeypatch.setenv("LLMFLEET_API_KEY", secret)
    monkeypatch.setenv("SOME_SERVICE_TOKEN", secret + "-token")
    fake_collection.write_site(
        "- name: Facts\n  hosts: all\n  gather_facts: true\n  tasks:\n"
        "    - name: Ping\n      ansible.builtin.ping:\n"
    )
    artifacts = tmp_path / "kept"
    code, out = _up(fake_collection, "-vvv", "--artifacts", str(artifacts))
    assert code == 0, out
    (run,) = artifacts.iterdir()
    files = [p for p in run.rglob("*") if p.is_file()]
    texts = {p: p.read_text(errors="replace") for p in files}
    assert any("ansible_env" in text for text in texts.values())  # the facts are there
    assert [p for p, text in texts.items() if secret in text] == []
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files)
    command = json.loads((run / "command").read_text())
    assert command["env"]["LLMFLEET_API_KEY"] == HIDDEN
    assert command["env"]["HOME"] == HIDDEN  # only what llmfleet set is shown
    assert command["env"]["ANSIBLE_CONFIG"] == str(fake_collection.root / "ansible.cfg")


def test_bench_json_names_the_reports(fake_collection: Any, tmp_path: Path) -> None:
    """The files bench_report wrote, as the run reported them."""
    cfg = fake_collection.root / "ansible.cfg"
    cfg.write_text(cfg.read_text() + f"collections_path = {REPO / 'collections'}\n")
    reports = tmp_path / "reports"
    benchmark = {"started": "2026-11-22T23:10:00Z", "scenarios": [{"name": "c1", "ok": 1}]}
    (fake_collection.root / "playbooks" / "bench.yml").write_text(
        "- name: Bench\n  hosts: all\n  gather_facts: false\n  tasks:\n"
        "    - name: Write the results\n"
        "      llmfleet.cluster.bench_report:\n"
        f"        benchmark: {json.dumps(benchmark)}\n"
        f"        output_dir: {reports}\n"
        "        plot: false\n",
        encoding="utf-8",
    )
    result = runner.invoke(
        app, ["bench", "-i", str(fake_collection.inventory), "--plain", "--json"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    stem = reports / "bench-20261122T231000Z"
    assert summary["reports"] == [f"{stem}.json", f"{stem}.md"]
    assert all(Path(path).is_file() for path in summary["reports"])
    assert Path(summary["artifacts"]).name.endswith("-bench")


def test_upgrade_passes_the_target_as_upgrade_variables(
    fake_collection: Any, play: Callable[[str], str]
) -> None:
    """`llmfleet upgrade` runs playbooks/upgrade.yml with the target in llmfleet_upgrade_*
    (never vllm_server_image: an extra variable would outrank the way back), the user's -e
    after ours."""
    (fake_collection.root / "playbooks" / "upgrade.yml").write_text(
        play(
            "    - name: Show the target\n"
            "      ansible.builtin.debug:\n"
            "        msg: >-\n"
            "          target={{ llmfleet_upgrade_image | default('none') }}\n"
            "          {{ llmfleet_upgrade_profile }}\n"
            "          {{ llmfleet_upgrade_model_revision | default('none') }}\n"
            "          keep={{ llmfleet_upgrade_keep_images }}\n"
            "          image_var={{ vllm_server_image | default('unset') }}\n"
            "          gate={{ llmfleet_upgrade_benchmark_gate | default('off') }}\n"
            "          {{ llmfleet_upgrade_benchmark_allowed_pct | default('') }}\n"
        ),
        encoding="utf-8",
    )
    result = runner.invoke(
        app,
        [
            "upgrade", "-i", str(fake_collection.inventory), "--plain", "-v",
            "--image", "repo/vllm:v2@sha256:" + "a" * 64, "--profile", "tiny_lab",
            "--keep-images", "2", "-e", "llmfleet_upgrade_profile=other",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert (
        f"target=repo/vllm:v2@sha256:{'a' * 64} other none keep=2 image_var=unset gate=off"
        in result.output
    ), result.output
    result = runner.invoke(
        app,
        ["upgrade", "-i", str(fake_collection.inventory), "--plain", "-v", "--profile", "p",
         "--bench-gate", "12.5"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "gate=True 12.5" in result.output, result.output


@pytest.mark.parametrize(
    "args",
    [
        pytest.param([], id="nothing named"),
        pytest.param(["--image", "  "], id="a blank image"),
    ],
)
def test_upgrade_without_a_target_exits_1(fake_collection: Any, args: list[str]) -> None:
    (fake_collection.root / "playbooks" / "upgrade.yml").write_text("[]\n", encoding="utf-8")
    result = runner.invoke(app, ["upgrade", "-i", str(fake_collection.inventory), *args])
    assert result.exit_code == 1
    assert "nothing to upgrade: give --image, --profile or --model-revision" in result.output


def test_upgrade_refuses_fewer_than_one_image_kept(fake_collection: Any) -> None:
    result = runner.invoke(
        app,
        ["upgrade", "-i", str(fake_collection.inventory), "--profile", "p", "--keep-images", "0"],
    )
    assert result.exit_code == 1
    assert "--keep-images" in result.output


def test_upgrade_refuses_a_negative_bench_gate(fake_collection: Any) -> None:
    result = runner.invoke(
        app,
        ["upgrade", "-i", str(fake_collection.inventory), "--profile", "p", "--bench-gate", "-5"],
    )
    assert result.exit_code == 1
    assert "--bench-gate" in result.output


# A playbook of a command whose product is a table: a play for hosts the inventory does not
# have (the Macs of a Spark inventory), debug output, and the document it writes.
COLLECTING = """\
- name: Read every Mac
  hosts: macs
  gather_facts: false
  tasks:
    - name: Never runs
      ansible.builtin.ping:
- name: Read every host
  hosts: all
  gather_facts: false
  tasks:
    - name: Say what it reads
      ansible.builtin.debug:
        msg: reading localhost
    - name: Write its document
      ansible.builtin.copy:
        content: '{"host": "localhost"}'
        dest: "{{ llmfleet_probe_dir }}/localhost.json"
        mode: "0600"
"""


@pytest.mark.parametrize("plain", [True, False])
def test_a_command_that_prints_a_table_shows_one_line_of_progress_before_it(
    fake_collection: Any, capsys: pytest.CaptureFixture[str], plain: bool
) -> None:
    (fake_collection.root / "playbooks" / "probe.yml").write_text(COLLECTING, encoding="utf-8")
    result, written = run_collecting(
        fake_collection.root, "probe", fake_collection.inventory, extravars=[],
        folder_variable="llmfleet_probe_dir", plain=plain,
    )  # fmt: skip
    assert result.exit_code == 0
    assert written == {"localhost": {"host": "localhost"}}
    out, err = capsys.readouterr()
    assert not out
    # Plain: one line as the run starts; in a terminal, a line that goes with the run (not
    # one here: the test's stderr is no terminal, the live line is not drawn); no task
    # stream, no "no hosts matched", no recap.
    assert err.splitlines() == (["running probe.yml (its tasks: -v)"] if plain else []), err
    # The stream is kept in the run's artifacts.
    [run] = (fake_collection.root / "artifacts" / "runs").iterdir()
    events = [json.loads(path.read_text()) for path in (run / "job_events").glob("*.json")]
    assert {event["event_data"].get("task") for event in events} >= {"Write its document"}


def test_with_v_the_table_command_shows_its_tasks(
    fake_collection: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    (fake_collection.root / "playbooks" / "probe.yml").write_text(COLLECTING, encoding="utf-8")
    run_collecting(
        fake_collection.root, "probe", fake_collection.inventory, extravars=[],
        folder_variable="llmfleet_probe_dir", plain=True, verbosity=1,
    )  # fmt: skip
    err = capsys.readouterr().err
    assert "== PLAY: Read every host" in err, err
    assert "[localhost] changed: Write its document" in err, err
    assert "[localhost] reading localhost" in err, err
    assert "no hosts matched in play 'Read every Mac'" in err, err
    assert "Could not match supplied host pattern, ignoring: macs" in err, err


def test_a_failure_of_a_table_command_is_shown_with_its_recap(
    fake_collection: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    (fake_collection.root / "playbooks" / "probe.yml").write_text(
        "- hosts: all\n  gather_facts: false\n  tasks:\n"
        "    - name: Read the node\n      ansible.builtin.command: 'false'\n",
        encoding="utf-8",
    )
    result, _ = run_collecting(
        fake_collection.root, "probe", fake_collection.inventory, extravars=[],
        folder_variable="llmfleet_probe_dir", plain=True,
    )  # fmt: skip
    assert result.exit_code != 0
    err = " ".join(capsys.readouterr().err.split())
    assert "[localhost] FAILED: Read the node" in err, err
    assert "OK" not in err.split(), err


def test_check_shows_its_recap_without_the_task_stream(
    fake_collection: Any, play: Callable[[str], str]
) -> None:
    (fake_collection.root / "playbooks" / "validate.yml").write_text(
        play("    - name: Check the inventory\n      ansible.builtin.ping:\n"), encoding="utf-8"
    )
    result = runner.invoke(app, ["check", "-i", str(fake_collection.inventory), "--plain"])
    assert result.exit_code == 0, result.output
    assert "[localhost] ok: Check the inventory" not in result.output, result.output
    assert "== PLAY" not in result.output, result.output
    assert "running validate.yml (its tasks: -v)" in result.output, result.output
    assert "OK: all hosts done" in result.output, result.output


# ---------------------------------------------------------------------------
# up's early stop: playbooks/converged.yml first, site.yml only when a host changed
# ---------------------------------------------------------------------------
class Playbooks:
    """run_playbook for both of up's runs: each playbook asked for (relative to the collection)
    and its arguments; the comparison answers ``answers``, any other playbook succeeds."""

    def __init__(self, root: Path, answers: dict[str, dict[str, Any]]) -> None:
        self.root = root
        self.answers = answers
        self.ran: list[str] = []
        self.kwargs: list[dict[str, Any]] = []

    def __call__(self, playbook: Path, inventory: Path, **kwargs: Any) -> RunResult:
        self.ran.append(str(playbook.relative_to(self.root)))
        self.kwargs.append(kwargs)
        stats = {"localhost": HostStats(ok=1)}
        if playbook.name == "converged.yml":
            return RunResult(rc=0, status="successful", stats=stats, converged=self.answers)
        return RunResult(rc=0, status="successful", stats={"localhost": HostStats(ok=3)})


def _playbooks(
    fc: Any, monkeypatch: pytest.MonkeyPatch, answers: dict[str, dict[str, Any]]
) -> Playbooks:
    playbooks = Playbooks(fc.root, answers)
    # The CLI runs every playbook through llmfleet.converged (the comparison, then site.yml).
    monkeypatch.setattr(converged, "run_playbook", playbooks)
    return playbooks


CONVERGED = {"localhost": {"converged": True, "changes": [], "run": "20261201T190512Z-4242"}}
CHANGED = {
    "localhost": {
        "converged": False,
        "changes": ["/etc/llmfleet/a.yaml: its content changed", "unit x.service: restarted since"],
        "run": "20261201T190512Z-4242",
    }
}


def test_up_stops_after_the_comparison_when_every_host_is_converged(
    fake_collection: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    playbooks = _playbooks(fake_collection, monkeypatch, CONVERGED)
    result = runner.invoke(
        app, ["up", "-i", str(fake_collection.inventory), "--plain", "-e", "greeting=hi"]
    )
    assert result.exit_code == 0, result.output
    assert playbooks.ran == ["playbooks/converged.yml"]  # site.yml is not run
    (asked,) = playbooks.kwargs
    assert (asked["quiet"], asked["recap"]) == (True, False)
    assert asked["extravars"] == [{"greeting": "hi"}]
    said = " ".join(result.output.split())
    assert "Nothing changed since the last full run (20261201T190512Z-4242) on localhost" in said
    assert "llmfleet up --full walks every task" in said


def test_up_walks_site_yml_when_a_host_is_not_converged(
    fake_collection: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    playbooks = _playbooks(fake_collection, monkeypatch, CHANGED)
    result = runner.invoke(app, ["up", "-i", str(fake_collection.inventory), "--plain"])
    assert result.exit_code == 0, result.output
    assert playbooks.ran == ["playbooks/converged.yml", "site.yml"]
    assert playbooks.kwargs[1]["extravars"] == playbooks.kwargs[0]["extravars"]
    assert playbooks.kwargs[1]["artifacts"] == fake_collection.root / "artifacts" / "runs"
    assert "Walking site.yml, since the last full run:\n" in result.output
    assert "  localhost: /etc/llmfleet/a.yaml: its content changed\n" in result.output
    assert "  localhost: unit x.service: restarted since\n" in result.output
    assert "Nothing changed" not in result.output


def test_up_json_after_the_comparison_names_it(
    fake_collection: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _playbooks(fake_collection, monkeypatch, CONVERGED)
    result = runner.invoke(app, ["up", "-i", str(fake_collection.inventory), "--json"])
    assert result.exit_code == 0, result.output
    assert "Nothing changed since the last full run" in result.stderr
    summary = json.loads(result.stdout)  # nothing else on stdout
    assert summary["playbook"] == str(fake_collection.root / "playbooks" / "converged.yml")
    assert summary["exit_code"] == 0
    assert summary["tags"] is None
    assert summary["converged"] == CONVERGED


def test_up_json_names_the_tags_a_change_of_variables_walked(
    fake_collection: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    line = "the inputs changed since run 20261201T190512Z-4242: greeting"
    changed = {
        "localhost": {**CHANGED["localhost"], "changes": [line], "changed_inputs": ["var:greeting"]}
    }
    playbooks = _playbooks(fake_collection, monkeypatch, changed)
    monkeypatch.setattr(converged, "walk_tags", lambda root, names: ["claude_code", "report"])
    result = runner.invoke(
        app, ["up", "-i", str(fake_collection.inventory), "--json", "-e", "greeting=hi"]
    )
    assert result.exit_code == 0, result.output
    assert playbooks.ran == ["playbooks/converged.yml", "site.yml"]
    assert playbooks.kwargs[1]["tags"] == "claude_code,report"
    summary = json.loads(result.stdout)
    assert (summary["playbook"], summary["tags"]) == (
        str(fake_collection.root / "site.yml"),
        "claude_code,report",
    )


@pytest.mark.parametrize(
    ("args", "playbook"),
    [
        (["--full"], "site.yml"),
        (["--check"], "site.yml"),
        (["--tags", "vllm_server"], "site.yml"),
        (["--skip-tags", "monitoring"], "site.yml"),
        (["--limit", "localhost"], "site.yml"),
        (["--playbook", "gateway"], "playbooks/gateway.yml"),
    ],
)
def test_up_never_asks_for_a_dry_run_a_part_of_the_run_or_another_playbook(
    fake_collection: Any, monkeypatch: pytest.MonkeyPatch, args: list[str], playbook: str
) -> None:
    (fake_collection.root / "playbooks" / "gateway.yml").write_text("[]\n", encoding="utf-8")
    playbooks = _playbooks(fake_collection, monkeypatch, CONVERGED)
    result = runner.invoke(app, ["up", "-i", str(fake_collection.inventory), "--plain", *args])
    assert result.exit_code == 0, result.output
    assert playbooks.ran == [playbook]
    assert "Nothing changed" not in result.output
    assert "Walking site.yml" not in result.output


def _real(name: str, **task_args: Any) -> list[dict[str, Any]]:
    """One of the collection's converged playbooks for the fake collection: its plays on every
    host, the record in a folder of the test's (never /var/lib/llmfleet)."""
    plays = yaml.safe_load((REPO / "playbooks" / name).read_text(encoding="utf-8"))
    for each in plays:
        each["hosts"] = "all"
        for task in each["tasks"]:
            task["llmfleet.cluster.converged_state"].update(task_args)
    return plays


def test_up_records_a_full_run_and_stops_at_the_next(fake_collection: Any, tmp_path: Path) -> None:
    """The collection's own plays (the inputs first, the record last, the comparison) around a
    task that writes a file: a run without a record walks site.yml and records; the next one
    stops after the comparison; a run limited to some hosts walks it and records nothing."""
    cfg = fake_collection.root / "ansible.cfg"
    cfg.write_text(
        cfg.read_text() + f"collections_path = {REPO / 'collections'}\n"
        "callbacks_enabled = llmfleet.cluster.converged_record\n"
    )
    record = tmp_path / "converged.json"
    walks = tmp_path / "walks"
    converge = {
        "name": "Converge",
        "hosts": "all",
        "gather_facts": False,
        "tasks": [
            {"name": "Write the file", "ansible.builtin.copy": {
                "dest": str(tmp_path / "managed.txt"), "content": "a\n", "mode": "0644"}},
            {"name": "Count the walks", "ansible.builtin.shell": f"echo walked >> {walks}"},
        ],
    }  # fmt: skip
    fake_collection.write_site(
        json.dumps(
            [
                *_real("converged_inputs.yml"),
                converge,
                *_real("converged_record.yml", path=str(record)),
            ]
        )
    )
    (fake_collection.root / "playbooks" / "converged.yml").write_text(
        json.dumps(_real("converged.yml", path=str(record))), encoding="utf-8"
    )

    up = ["up", "-i", str(fake_collection.inventory), "--plain"]
    result = runner.invoke(app, up)
    assert result.exit_code == 0, result.output
    assert "Walking site.yml, since the last full run:\n" in result.output, result.output
    assert "  localhost: no record of a full run\n" in result.output, result.output
    assert "[localhost] changed: Record the state this full run left" in result.output
    run = json.loads(record.read_text())["run"]
    assert json.loads(record.read_text())["items"]["files"] == [str(tmp_path / "managed.txt")]

    result = runner.invoke(app, up)
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert f"Nothing changed since the last full run ({run}) on localhost" in said, said
    assert walks.read_text() == "walked\n"  # site.yml was not walked again

    result = runner.invoke(app, [*up, "--limit", "localhost"])
    assert result.exit_code == 0, result.output
    assert walks.read_text() == "walked\n" * 2
    # Not a full run: not recorded.
    assert "[localhost] skipping: Record the state this full run left" in result.output
    assert json.loads(record.read_text())["run"] == run
