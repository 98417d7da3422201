"""``llmfleet tune``: the grid and its checks, the objective, the report, and a whole sweep
run by ansible against stand-in playbooks whose benchmark answers like a server that
queues requests when max_num_seqs is below the sessions (the lab test runs the real one)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

from llmfleet import tune, tune_report
from llmfleet.cli import app
from llmfleet.run_outcome import ExitCode
from llmfleet.tune_run import Sweep, sweep_line

from .conftest import FakeCollection

ROOT = Path(__file__).resolve().parents[3]


def test_the_grid_reads_values_as_yaml_and_spans_every_combination() -> None:
    grid = tune.parse_grid(["max_num_seqs=8,16", "enable_prefix_caching=true,false"])
    assert grid == {"max_num_seqs": [8, 16], "enable_prefix_caching": [True, False]}
    assert tune.grid_points(grid) == [
        {"max_num_seqs": 8, "enable_prefix_caching": True},
        {"max_num_seqs": 8, "enable_prefix_caching": False},
        {"max_num_seqs": 16, "enable_prefix_caching": True},
        {"max_num_seqs": 16, "enable_prefix_caching": False},
    ]
    for bad, said in [
        (["max_num_seqs"], "expected KEY=VALUE[,VALUE...]"),
        (["max_num_seqs=1", "max_num_seqs=2"], "names max_num_seqs twice"),
    ]:
        with pytest.raises(tune.TuneError, match=re.escape(said)):
            tune.parse_grid(bad)


def test_a_point_sets_vllm_options_and_the_fabric_variables() -> None:
    point = {"max_num_seqs": 16, "rails": "dual", "transport": "socket"}
    assert tune.point_variables(point) == {
        "llmfleet_tuned_overrides": {"max_num_seqs": 16},
        "llmfleet_fabric_ports": [1, 2],
        "llmfleet_nccl_mode": "socket",
    }
    assert tune.needs_whole_site(point) and not tune.needs_whole_site({"max_num_seqs": 8})


def test_bad_keys_and_values_are_named_before_anything_runs() -> None:
    problems = tune.grid_problems(
        {"max_num_seqs": [8, 0], "max_num_sqs": [1], "rails": ["triple"], "dtype": ["fp3"]}, ROOT
    )
    assert problems[0].startswith("grid key max_num_seqs: vLLM profile max_num_seqs is 0;")
    assert problems[1].startswith("grid key max_num_sqs is not a vLLM profile option")
    assert problems[2] == "grid key rails has 'triple'; expected one of ['single', 'dual']"
    assert problems[3].startswith("grid key dtype: vLLM profile dtype is 'fp3'")
    assert tune.grid_problems(tune.DEFAULT_GRID | tune.SPARK_GRID, ROOT) == []


def result(point: dict[str, Any], ttft: dict[str, float], rate: dict[str, float]) -> dict:
    return {
        "point": point,
        "measured": {
            name: {"ttft_p99_s": ttft[name], "output_tokens_per_s": rate[name], "errors": 0}
            for name in ttft
        },
    }


def test_the_winner_has_the_lowest_worst_ttft_among_the_fast_enough() -> None:
    results = [
        # Lowest TTFT, but 20% less output at 8 sessions: it cannot win.
        result({"n": 1}, {"c4": 0.1, "c8": 0.2}, {"c4": 100, "c8": 80}),
        result({"n": 2}, {"c4": 0.2, "c8": 0.5}, {"c4": 100, "c8": 100}),
        result({"n": 3}, {"c4": 0.4, "c8": 0.3}, {"c4": 95, "c8": 92}),
        {"point": {"n": 4}, "error": "not served: spark-1: Wait for vLLM: exited"},
    ]
    assert tune.choose(results) == 2
    assert [r["verdict"] for r in results] == [
        "output tokens/s more than 10% below the best in c8",
        "eligible",
        "winner",
        "not served: spark-1: Wait for vLLM: exited",
    ]
    assert tune.choose([results[3]]) is None


def test_the_decode_speed_of_a_session_alone_joins_the_objective() -> None:
    """n-gram speculation (point 2) decodes a lone request 40% faster: the point without it,
    whose TTFT is lower, loses on what the person at the keyboard feels. When the fastest
    decode costs too much throughput, the throughput rule alone decides."""
    results = [
        result({"speculative": "off"}, {"sessions_c1": 0.2, "sessions_c4": 0.4},
               {"sessions_c1": 26, "sessions_c4": 60}),
        result({"speculative": "ngram:4"}, {"sessions_c1": 0.3, "sessions_c4": 0.5},
               {"sessions_c1": 28, "sessions_c4": 58}),
    ]  # fmt: skip
    for point, speed in zip(results, (20.0, 28.0), strict=True):
        point["measured"]["sessions_c1"]["decode_tokens_per_s"] = speed
        point["measured"]["sessions_c4"]["decode_tokens_per_s"] = speed / 2
    assert tune.choose(results) == 1
    assert results[0]["verdict"] == (
        "decode tokens/s of a session alone more than 10% below the best (sessions_c1)"
    )
    results[1]["measured"]["sessions_c4"]["output_tokens_per_s"] = 40
    assert tune.choose(results) == 0
    assert results[0]["verdict"] == "winner"
    assert tune.single_session(["sessions_c4", "sessions_c1"]) == "sessions_c1"
    # Without a session alone in the sweep, the decode speed is not judged.
    assert tune.single_session(["sessions_c4", "sessions_c8", "sessions_c16"]) is None


def sweep_record(winner: int | None = 1) -> dict[str, Any]:
    results = [
        result({"max_num_seqs": 1}, {"sessions_c4": 2.5}, {"sessions_c4": 20.0}),
        result({"max_num_seqs": 8}, {"sessions_c4": 0.4}, {"sessions_c4": 60.0}),
    ]
    tune.choose(results)
    return {
        "inventory": "inventory/lab",
        "started": "20261125T020000Z",
        "grid": {"max_num_seqs": [1, 8]},
        "sessions": [4],
        "shape": {"kind": "session", "turns": 3},
        "scenarios": ["sessions_c4"],
        "throughput_slack": 0.1,
        "points": results,
        "winner": winner,
        "tuned_file": "inventory/lab/group_vars/all/tuned.yml",
    }


def test_the_report_lists_every_point_and_marks_the_winner() -> None:
    markdown = tune_report.render_markdown(sweep_record())
    assert "- **Winner: point 2**, max_num_seqs=8, kept in" in markdown
    assert "| 1 | 1 | 2500 | 20.0 | — | output tokens/s more than 10% below the best in" in markdown
    assert "| 2 | 8 | 400 | 60.0 | — | **winner** |" in markdown
    # No point decoded speculatively: no acceptance column.
    assert "accepted |" not in markdown
    pytest.importorskip("matplotlib")
    assert tune_report.render_png(sweep_record()).startswith(b"\x89PNG")


def test_speculative_decoding_is_a_grid_key_with_its_acceptance_in_the_report() -> None:
    """`speculative=off,ngram:4,suffix`: each value is served as the profile's
    speculative_config; the report shows the decode speed and vLLM's acceptance per point."""
    grid = tune.parse_grid(["speculative=off,ngram:4,suffix"])
    assert tune.grid_problems(grid, ROOT) == []
    configs = [
        tune.point_variables(point)["llmfleet_tuned_overrides"]["speculative_config"]
        for point in tune.grid_points(grid)
    ]
    assert configs == [None, {"method": "ngram", "num_speculative_tokens": 4}, {"method": "suffix"}]
    problems = tune.grid_problems({"speculative": ["ngram:four", "ngram", "eagle3:2"]}, ROOT)
    assert problems[0].startswith("grid key speculative has 'ngram:four'; expected off")
    assert "num_speculative_tokens is None" in problems[1]
    assert "drafts with a model of its own" in problems[2]
    record = sweep_record()
    record["grid"] = {"speculative": ["off", "ngram:4"]}
    for number, point in enumerate(record["points"]):
        point["point"] = {"speculative": ["off", "ngram:4"][number]}
        point["measured"]["sessions_c4"]["decode_tokens_per_s"] = [10.0, 14.5][number]
    record["points"][1]["measured"]["sessions_c4"]["acceptance_rate"] = 0.62
    markdown = tune_report.render_markdown(record)
    assert "sessions_c4 decode tok/s | sessions_c4 accepted | verdict |" in markdown
    assert '| 2 | "ngram:4" | 400 | 60.0 | 14.5 | 62% | **winner** |' in markdown


def test_the_serving_layout_is_a_grid_key_served_by_the_whole_site() -> None:
    """`group_size=all,2`: one group across every Spark, then pairs, each served by the whole
    site.yml (the groups' Ray clusters and the gateway change too)."""
    grid = tune.parse_grid(["group_size=all,2"])
    assert grid == {"group_size": ["all", 2]}
    assert tune.grid_problems(grid, ROOT) == []
    points = tune.grid_points(grid)
    assert [tune.point_variables(point) for point in points] == [
        {"llmfleet_tuned_overrides": {}, "llmfleet_group_size": None},
        {"llmfleet_tuned_overrides": {}, "llmfleet_group_size": 2},
    ]
    assert all(tune.needs_whole_site(point) for point in points)
    # The winner is kept as the inventory's layout.
    kept = yaml.safe_load(tune.tuned_file_text(points[1], "report.json"))
    assert kept["llmfleet_group_size"] == 2


def sparks(count: int, gateways: int = 1) -> dict[str, Any]:
    hosts = [f"spark-{index}" for index in range(1, count + 1)]
    return {"sparks": hosts, "gateways": gateways, "vars": {}}


def test_a_layout_the_inventory_cannot_serve_is_named_before_anything_runs() -> None:
    """The sizes the run's validation would refuse (plugins/filter/serving.py's own check),
    and several groups without a gateway."""
    assert tune.layout_problems({"group_size": ["all", 2, 4]}, sparks(4), ROOT) == []
    assert tune.layout_problems({"max_num_seqs": [8]}, sparks(0, 0), ROOT) == []
    assert tune.layout_problems({"group_size": ["all", 2]}, sparks(2, gateways=0), ROOT) == []
    [no_gateway] = tune.layout_problems({"group_size": [2]}, sparks(4, gateways=0), ROOT)
    assert no_gateway == (
        "grid key group_size has 2: 2 serving groups, which the sessions reach only through a"
        " serving gateway; expected a host in group gateways"
    )
    problems = tune.layout_problems({"group_size": [1, 0, 3, True, "two"]}, sparks(4), ROOT)
    assert problems[0].startswith(
        "grid key group_size has 0: llmfleet_group_size is 0; expected a whole number of 1 or more"
    )
    assert problems[1].startswith(
        "grid key group_size has 3: llmfleet_group_size is 3 but the sparks group has 4 hosts"
    )
    assert [problem.split(";")[0] for problem in problems[2:]] == [
        f"grid key group_size has {value}" for value in ("True", "'two'")
    ]
    assert tune.layout_problems({"group_size": [2]}, sparks(0, 0), ROOT) == [
        "grid key group_size needs Sparks to cut into groups; the inventory has none"
    ]


def test_the_report_says_what_a_layout_is() -> None:
    record = sweep_record()
    record["grid"] = {"group_size": ["all", 2]}
    for number, point in enumerate(record["points"]):
        point["point"] = {"group_size": ["all", 2][number]}
    markdown = tune_report.render_markdown(record)
    assert "- Layout (group_size): Sparks per serving group" in markdown
    assert "- **Winner: point 2**, group_size=2, kept in" in markdown
    assert "| 2 | 2 | 400 | 60.0 | — | **winner** |" in markdown


def test_measurements_read_the_decode_speed_and_the_acceptance() -> None:
    benchmark = {
        "scenarios": [
            {"name": "warmup", "kind": "session", "warmup": True},
            {"name": "sessions_c1", "kind": "session", "ttft_s": {"p99": 0.3},
             "output_tokens_per_s": 20.0, "decode_tokens_per_s": 24.0, "errors": 0,
             "speculative": {"acceptance_rate": 0.7}},
        ]
    }  # fmt: skip
    assert tune.measurements(benchmark) == {
        "sessions_c1": {
            "ttft_p99_s": 0.3, "output_tokens_per_s": 20.0, "decode_tokens_per_s": 24.0,
            "acceptance_rate": 0.7, "errors": 0,
        }
    }  # fmt: skip


def test_the_bar_counts_points() -> None:
    assert sweep_line(0, 2, "max_num_seqs=1: serving").startswith("tune [" + "." * 24 + "] 1/2")
    assert sweep_line(1.5, 2, "x").startswith("tune [" + "#" * 18 + "." * 6 + "] 2/2")


# A stand-in for the real playbooks: serving records the point, the benchmark answers
# slower with fewer sequences than sessions.
SITE = """\
- hosts: all
  gather_facts: false
  tasks:
    - name: Serve the point
      tags: [vllm_server]
      ansible.builtin.copy:
        content: "{{ llmfleet_tuned_overrides | default({}) | to_json }}"
        dest: "{{ served_file }}"
        mode: "0600"
"""
BENCH = """\
- hosts: all
  gather_facts: false
  tasks:
    - name: Measure
      vars:
        seqs: "{{ (llmfleet_tuned_overrides | default({})).max_num_seqs | default(8) | int }}"
        sessions: "{{ benchmark_scenarios | selectattr('kind', 'defined') | list }}"
      ansible.builtin.copy:
        content: >-
          {{ {'benchmark': {'scenarios': benchmark_scenarios[:1] + sessions | map('combine',
          {'errors': 0, 'output_tokens_per_s': 60.0 / ([4, seqs | int] | max) * (seqs | int),
           'ttft_s': {'p99': 2.0 / (seqs | int)}}) | list}} | to_json }}
        dest: "{{ benchmark_results_dir }}/bench-20261125T020000Z.json"
        mode: "0600"
"""


def test_a_sweep_serves_each_point_measures_it_and_keeps_the_winner(
    fake_collection: FakeCollection,
) -> None:
    root = fake_collection.root
    (root / "plugins/filter").mkdir(parents=True)
    shutil.copy(ROOT / "plugins/filter/vllm.py", root / "plugins/filter/vllm.py")
    inventory = root / "inventory"
    (inventory / "group_vars/all").mkdir(parents=True)
    shutil.move(fake_collection.inventory, inventory / "hosts.ini")
    (inventory / "hosts.ini").write_text("[sparks]\n" + (inventory / "hosts.ini").read_text())
    served = root / "served.json"
    (inventory / "group_vars/all/bench.yml").write_text(
        yaml.safe_dump(
            {
                "served_file": str(served),
                "benchmark_scenarios": [
                    {"name": "s", "kind": "session", "sessions": 2, "turns": 3, "max_tokens": 8}
                ],
            }
        )
    )
    fake_collection.write_site(SITE)
    (root / "playbooks/bench.yml").write_text(BENCH)
    sweep = Sweep(
        root,
        inventory,
        extravars=[],
        console=Console(),
        plain=True,
        verbosity=0,
        runs=root / "runs",
    )
    code, report = sweep.run({"max_num_seqs": [1, 8, 2]}, [4])
    assert code == ExitCode.OK
    record = json.loads(report.read_text())
    assert [r["point"] for r in record["points"]] == [
        {"max_num_seqs": 1}, {"max_num_seqs": 8}, {"max_num_seqs": 2},
    ]  # fmt: skip
    assert record["winner"] == 1 and record["shape"]["turns"] == 3
    # The session scenario measured came from the inventory's shape, at 4 sessions.
    bench = json.loads(Path(record["points"][1]["bench"]).read_text())
    assert [(s["name"], s.get("sessions")) for s in bench["benchmark"]["scenarios"]] == [
        ("warmup", None), ("sessions_c4", 4),
    ]  # fmt: skip
    tuned = inventory / "group_vars/all/tuned.yml"
    assert yaml.safe_load(tuned.read_text()) == {"llmfleet_tuned_overrides": {"max_num_seqs": 8}}
    # The last run served the winner from the file it wrote.
    assert json.loads(served.read_text()) == {"max_num_seqs": 8}
    assert "**winner**" in report.with_suffix(".md").read_text()


@pytest.mark.parametrize(
    ("grid", "said"),
    [
        ("max_num_seqs=16,-1", "grid key max_num_seqs: vLLM profile max_num_seqs is -1"),
        # inventory/sparks has two Sparks and no gateway: two groups of one cannot be measured.
        ("group_size=all,1", "grid key group_size has 1: 2 serving groups"),
    ],
)
def test_the_cli_refuses_a_bad_grid_before_any_run(
    grid: str, said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLMFLEET_HOME", str(ROOT))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(app, ["tune", "-i", "inventory/sparks", "--grid", grid, "--plain"])
    assert result.exit_code == 1, result.output
    assert said in " ".join(result.output.split())
    assert "PLAY" not in result.output


def test_the_installed_command_reads_the_collections_checks_in_a_process_of_its_own() -> None:
    """`llmfleet tune` as a user runs it: a process whose sys.path lacks the checkout's
    collections/ folder (the tests' own has it). The vllm filter imports the collection's
    module_utils; loaded by its file path it failed with ModuleNotFoundError
    (ansible_collections.llmfleet) before any grid was checked (found 2026-11-27)."""
    command = shutil.which("llmfleet")
    assert command, "the venv's llmfleet command"
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    proc = subprocess.run(
        [command, "tune", "-i", "inventory/sparks", "--grid", "speculative=off,ngram:x", "--plain"],
        cwd=ROOT, env={**env, "COLUMNS": "200"}, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    assert "ModuleNotFoundError" not in output, output[-3000:]
    assert proc.returncode == 1, output[-3000:]
    assert "grid key speculative has 'ngram:x'" in " ".join(output.split()), output[-3000:]
