"""``-e`` through every command that runs a playbook: KEY=VALUE typed as the collection declares
KEY, a value of the wrong type or (with ``check --strict``) a name nothing declares refused
before anything runs, and a typo named with the closest declared name. The playbook runs are
recorded, not run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from llmfleet import converged, down, playbook_files, tune_run
from llmfleet.cli import app
from llmfleet.cli_options import extra_var_names, parse_extra_vars
from llmfleet.declared_variables import Declaration, DeclaredVariables
from llmfleet.run_outcome import RunResult

ROOT = Path(__file__).resolve().parents[3]
runner = CliRunner()

# Every command that runs a playbook, with the arguments it needs besides -i and -e.
COMMANDS = {
    "up": [],
    "check": [],
    "bench": [],
    "upgrade": ["--profile", "other"],
    "tune": ["--grid", "max_num_seqs=8"],
    "down": [],
    "plan": [],
    "status": [],
    "logs": [],
    "doctor": [],
}


class Runs:
    """The playbook runs the commands asked for, in order: each one's extra variables."""

    def __init__(self) -> None:
        self.extravars: list[list[dict[str, Any] | Path]] = []
        self.write: dict[str, Any] = {}

    def run_playbook(self, *_args: Any, extravars: list[Any], **_kwargs: Any) -> RunResult:
        self.extravars.append(extravars)
        # What the playbook would write into run_collecting's folder (llmfleet_plan_dir...).
        folders = [v for item in extravars if isinstance(item, dict)
                   for k, v in item.items() if k.endswith("_dir")]  # fmt: skip
        for folder in folders:
            for stem, document in self.write.items():
                (Path(folder) / f"{stem}.json").write_text(json.dumps(document))
        return RunResult(rc=0, status="successful")

    def variables(self) -> dict[str, Any]:
        """The first run's variables, merged as ansible merges ``-e`` (later ones win)."""
        merged: dict[str, Any] = {}
        for item in self.extravars[0]:
            assert isinstance(item, dict), item
            merged |= item
        return merged


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Runs:
    """The collection (its roles, playbooks and declarations; its inventory a copy, what it writes
    in tmp_path) with every playbook run recorded instead."""
    collection = tmp_path / "collection"
    collection.mkdir()
    for name in ("galaxy.yml", "site.yml", "ansible.cfg", "roles", "playbooks", "plugins", "meta"):
        (collection / name).symlink_to(ROOT / name)
    shutil.copytree(ROOT / "inventory" / "sparks", collection / "inventory" / "sparks")
    monkeypatch.setenv("LLMFLEET_HOME", str(collection))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.chdir(collection)
    recorded = Runs()
    # The CLI runs its playbooks through llmfleet.converged (up asks there first whether
    # anything changed, then runs site.yml).
    for module in (converged, down, playbook_files, tune_run):
        monkeypatch.setattr(module, "run_playbook", recorded.run_playbook)
    monkeypatch.setattr(
        tune_run,
        "inventory_settings",
        lambda *_args: {"sparks": ["spark-1", "spark-2"], "vars": {}},
    )
    return recorded


def _invoke(command: str, *extra_vars: str) -> Any:
    args = [command, "-i", "inventory/sparks", *COMMANDS[command]]
    for value in extra_vars:
        args += ["-e", value]
    return runner.invoke(app, args)


def test_plan_gets_the_utilization_as_a_number(runs: Runs) -> None:
    """The issue's command: `plan -e llmfleet_gpu_memory_utilization=0.70` reached the checks
    as the string '0.70' ("expected a number")."""
    plan = {"hosts": ["spark-1", "spark-2"], "profile": "p", "plan": {"layout": {"fits": True}},
            "problems": []}  # fmt: skip
    runs.write = {"spark-1": plan}
    result = runner.invoke(
        app,
        ["plan", "-i", "inventory/sparks", "-e", "llmfleet_gpu_memory_utilization=0.70", "--json"],
    )
    assert result.exit_code == 0, result.output
    assert runs.variables()["llmfleet_gpu_memory_utilization"] == 0.7
    assert isinstance(runs.variables()["llmfleet_gpu_memory_utilization"], float)
    assert json.loads(result.stdout)["plans"] == [plan]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_types_key_value(runs: Runs, command: str) -> None:
    _invoke(
        command,
        "llmfleet_gpu_memory_utilization=0.70",
        "vllm_server_port=8001",
        "llmfleet_cluster_firewall=no",
        "llmfleet_vllm_profile=1",  # a str stays one
        "custom_setting=0.5",  # nothing declares it: as given
        '{"vllm_server_max_num_seqs": "16"}',  # JSON: as written
        'cluster_firewall_api_hosts=["gateway-1"]',  # a list, as JSON
        "benchmark_fabric_ports=1, 2",  # a list of ints, as ansible splits it
    )
    assert runs.extravars, "the command ran no playbook"
    variables = runs.variables()
    assert variables["llmfleet_gpu_memory_utilization"] == 0.7
    assert variables["vllm_server_port"] == 8001
    assert variables["llmfleet_cluster_firewall"] is False
    assert variables["llmfleet_vllm_profile"] == "1"
    assert variables["custom_setting"] == "0.5"
    assert variables["vllm_server_max_num_seqs"] == "16"
    assert variables["cluster_firewall_api_hosts"] == ["gateway-1"]
    assert variables["benchmark_fabric_ports"] == [1, 2]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_value_of_the_wrong_type_stops_every_command_before_it_runs(
    runs: Runs, command: str
) -> None:
    result = _invoke(command, "vllm_server_port=80x")
    assert result.exit_code == 1, result.output
    assert (
        "error: -e vllm_server_port is '80x'; expected an int "
        "(declared in roles/vllm_server/meta/argument_specs.yml)"
    ) in " ".join(result.output.split())
    assert runs.extravars == []
    assert "OK" not in result.output


def test_a_typo_is_named_with_the_closest_declared_name_and_the_run_goes_on(
    runs: Runs, tmp_path: Path
) -> None:
    vars_file = tmp_path / "vars.yml"
    vars_file.write_text("vllm_server_prot: 8001\nsecret: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n")
    result = runner.invoke(
        app,
        ["check", "-i", "inventory/sparks", "-e", "llmfleet_fabric_mut=9000",
         "-e", f"@{vars_file}", "-e", '{"ray_node_num_gpu": 1, "__ray_node_x": 1}'],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert [line.split(" (")[0] for line in warnings] == [
        "warning: -e llmfleet_fabric_mut: did you mean llmfleet_fabric_mtu?",
        "warning: -e vllm_server_prot: did you mean vllm_server_port?",
        "warning: -e ray_node_num_gpu: did you mean ray_node_num_gpus?",
    ]
    assert len(runs.extravars) == 1


def test_check_strict_refuses_a_typo_before_anything_runs(runs: Runs) -> None:
    result = runner.invoke(
        app, ["check", "-i", "inventory/sparks", "--strict", "-e", "llmfleet_fabric_mut=9000"]
    )
    assert result.exit_code == 1, result.output
    out = " ".join(result.stderr.split())
    assert "error: -e llmfleet_fabric_mut: did you mean llmfleet_fabric_mtu?" in out
    assert "--strict: -e and the inventory may only set variables the collection declares" in out
    assert runs.extravars == []
    assert "OK" not in result.output


def test_a_typo_in_the_inventory_is_named_with_its_file(runs: Runs) -> None:
    """The issue's typo, in the inventory a user copied: it was silently ignored and the
    default MTU used."""
    fabric = Path("inventory/sparks/group_vars/sparks/fabric.yml")
    fabric.write_text(fabric.read_text() + "llmfleet_fabric_mut: 1500\n")
    hosts = Path("inventory/sparks/hosts.yml")
    spark_1 = "ansible_host: 192.0.2.11"
    hosts.write_text(
        hosts.read_text().replace(spark_1, f"{spark_1}\n          nccl_env_gid_indx: 3")
    )
    result = runner.invoke(app, ["check", "-i", "inventory/sparks"])
    assert result.exit_code == 0, result.output
    warnings = [
        line.split(" (")[0] for line in result.stderr.splitlines() if line.startswith("warning:")
    ]
    assert warnings == [
        f"warning: {fabric}: llmfleet_fabric_mut: did you mean llmfleet_fabric_mtu?",
        f"warning: {hosts}: nccl_env_gid_indx: did you mean nccl_env_gid_index?",
    ]
    strict = runner.invoke(app, ["check", "-i", "inventory/sparks", "--strict"])
    assert strict.exit_code == 1, strict.output
    assert f"error: {fabric}: llmfleet_fabric_mut: did you mean" in " ".join(strict.stderr.split())
    assert len(runs.extravars) == 1


def test_check_strict_runs_when_every_name_is_declared(runs: Runs) -> None:
    result = runner.invoke(
        app,
        ["check", "-i", "inventory/sparks", "--strict", "-e", "llmfleet_fabric_mtu=9000",
         "-e", "ansible_user=admin"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert runs.variables()["llmfleet_fabric_mtu"] == 9000
    assert "warning" not in result.output


def test_the_help_says_which_values_are_typed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    result = runner.invoke(app, ["check", "--help"])
    out = " ".join(result.output.replace("│", " ").split())
    assert "--strict" in out
    assert "A VALUE becomes a number, a boolean, a list (a,b or [a, b]) or a dict where" in out
    assert "else stays a string" in out


def test_parse_extra_vars_types_only_key_value(tmp_path: Path) -> None:
    vars_file = tmp_path / "vars.yml"
    vars_file.write_text("a: '1'\n")
    declared = DeclaredVariables([Declaration("a", "int", "spec")], ["a"])
    assert parse_extra_vars(["a=1", f"@{vars_file}", '{"a": "1"}'], declared) == [
        {"a": 1},
        vars_file,
        {"a": "1"},
    ]


def test_extra_var_names_reads_files_whatever_their_tags(tmp_path: Path) -> None:
    tagged = tmp_path / "tagged.yml"
    tagged.write_text(
        "a: 1\nb: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  3031\nc: !unsafe '{{x}}'\n"
    )
    encrypted = tmp_path / "encrypted.yml"
    encrypted.write_text("$ANSIBLE_VAULT;1.1;AES256\n3031\n")
    broken = tmp_path / "broken.yml"
    broken.write_text("a: [\n")
    assert extra_var_names([{"x": 1}, tagged, encrypted, broken, {"y": 2}]) == [
        "x", "a", "b", "c", "y",
    ]  # fmt: skip
