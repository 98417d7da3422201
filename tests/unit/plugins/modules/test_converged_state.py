"""modules/converged_state: a record written owner-only and read back, over stand-ins for
systemctl, docker and dpkg-query (each prints what the real tool prints, from a file the test
edits) and a kernel-settings tree; a new run's ID alone is no change; the comparison names what
changed, says why it has nothing to compare with, and passes the readiness checks again only
when the rest is as it was."""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._node.converged import boot_id
from ansible_collections.llmfleet.cluster.plugins.modules import converged_state

RunModule = Callable[..., tuple[int, dict[str, Any]]]
INVOCATION = "6b3c1e0e2f8a4d7e9b1c0a2f3e4d5c6b"

# Each tool reads what the host has from host.json (the test edits it) and prints it as the
# real tool does.
TOOLS = {
    # `systemctl show -p ... -- UNIT...`: a block per unit, a unit it does not know not-found.
    "systemctl": """
units = host["units"]
blocks = []
for name in sys.argv[sys.argv.index("--") + 1:]:
    unit_id = name if "." in name else name + ".service"
    load, enabled, active, invocation = units.get(unit_id, ("not-found", "", "inactive", ""))
    blocks.append(f"Id={unit_id}\\nLoadState={load}\\nActiveState={active}\\n"
                  f"UnitFileState={enabled}\\nInvocationID={invocation}\\n")
print("\\n".join(blocks))
""",
    # `docker container inspect NAME`
    "docker": """
name = sys.argv[3]
if name in host["containers"]:
    cid, status, restarts = host["containers"][name]
    print(json.dumps([{"Id": cid, "Name": "/" + name, "RestartCount": restarts,
                       "State": {"Status": status, "Running": status == "running"}}]))
else:
    print("[]")
    sys.stderr.write(f"Error: No such container: {name}\\n")
    sys.exit(1)
""",
    # `dpkg-query -W -f '${Package}\\t${db:Status-Status}\\t${Version}\\n' -- NAME...`
    "dpkg-query": """
missing = 0
for name in sys.argv[sys.argv.index("--") + 1:]:
    if name in host["packages"]:
        print(f"{name}\\tinstalled\\t{host['packages'][name]}")
    else:
        missing = 1
        sys.stderr.write(f"dpkg-query: no packages found matching {name}\\n")
sys.exit(missing)
""",
}


class Host:
    """A node in tmp_path: the tools' answers (host.json), files, kernel settings."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.state = root / "host.json"
        self.proc_sys = root / "proc_sys"
        self.record = root / "var" / "lib" / "llmfleet" / "converged.json"
        self.etc = root / "etc"
        self.serve = self.etc / "serve.yaml"

    def answer(self, **changes: Any) -> None:
        current = json.loads(self.state.read_text()) if self.state.exists() else {}
        self.state.write_text(json.dumps({**current, **changes}))

    def sysctl(self, name: str, value: str) -> None:
        path = self.proc_sys.joinpath(*name.split("."))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value + "\n")

    def items(self) -> dict[str, Any]:
        return {
            "files": [str(self.etc), str(self.serve), str(self.root / "removed")],
            "units": ["llmfleet-vllm", "llmfleet-ray.service"],
            "containers": [{"name": "llmfleet-vllm", "engine": "docker"}],
            "packages": ["nvidia-container-toolkit", "nosuchpkg"],
            "sysctls": ["net.core.rmem_max"],
        }

    def args(self, mode: str, **extra: Any) -> dict[str, Any]:
        args: dict[str, Any] = {
            "mode": mode,
            "path": str(self.record),
            "inputs": "digest-1",
            "proc_sys": str(self.proc_sys),
        }
        if mode == "record":
            args |= {"run_id": "r1", "items": self.items(), "probes": []}
        return {**args, **extra}


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Host:
    node = Host(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in TOOLS.items():
        script = bin_dir / name
        script.write_text(
            f"#!{sys.executable}\nimport json, sys\n"
            f"host = json.load(open({str(node.state)!r}))\n{body}"
        )
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin:/bin")
    node.answer(
        units={
            "llmfleet-vllm.service": ["loaded", "enabled", "active", INVOCATION],
            "llmfleet-ray.service": ["loaded", "disabled", "inactive", "0f1e2d3c"],
        },
        containers={"llmfleet-vllm": ["9f3c" + "0" * 60, "running", 0]},
        packages={"nvidia-container-toolkit": "1.17.8-1"},
    )
    node.sysctl("net.core.rmem_max", "4194304")
    node.etc.mkdir()
    node.etc.chmod(0o755)
    node.serve.write_text("port: 8000\n")
    node.serve.chmod(0o644)
    return node


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_record_is_owner_only_and_says_what_the_run_left(
    host: Host, run_module: RunModule
) -> None:
    rc, result = run_module(converged_state, host.args("record"))
    assert rc == 0, result
    assert (result["changed"], result["converged"], result["changes"]) == (True, True, [])
    assert (result["run"], result["inputs"]) == ("r1", "digest-1")
    assert mode_of(host.record) == 0o600
    record = json.loads(host.record.read_text())
    assert {k: record[k] for k in ("version", "run", "inputs", "boot_id", "probes")} == {
        "version": 1,
        "run": "r1",
        "inputs": "digest-1",
        "boot_id": boot_id(),
        "probes": [],
    }
    assert record["items"] == host.items()
    states = record["states"]
    assert states["files"][str(host.etc)]["type"] == "directory"
    assert states["files"][str(host.serve)]["mode"] == "0644"
    assert len(states["files"][str(host.serve)]["sha256"]) == 64
    assert states["files"][str(host.root / "removed")] == {"exists": False}
    assert states["units"] == {
        "llmfleet-vllm": {
            "load": "loaded",
            "enabled": "enabled",
            "active": "active",
            "invocation": INVOCATION,
        },
        "llmfleet-ray.service": {
            "load": "loaded",
            "enabled": "disabled",
            "active": "inactive",
            "invocation": "",
        },
    }
    assert states["containers"] == {
        "docker/llmfleet-vllm": {
            "exists": True,
            "id": "9f3c" + "0" * 60,
            "status": "running",
            "restarts": 0,
        }
    }
    assert states["packages"] == {"nvidia-container-toolkit": "1.17.8-1", "nosuchpkg": None}
    assert states["sysctls"] == {"net.core.rmem_max": "4194304"}


def test_a_new_run_alone_is_no_change(host: Host, run_module: RunModule) -> None:
    run_module(converged_state, host.args("record"))
    rc, result = run_module(converged_state, host.args("record", run_id="r2"))
    assert rc == 0, result
    assert (result["changed"], result["run"]) == (False, "r2")
    assert json.loads(host.record.read_text())["run"] == "r2"  # the latest run is the one named
    assert mode_of(host.record) == 0o600
    # Other inputs are a change of the record.
    rc, result = run_module(converged_state, host.args("record", run_id="r3", inputs="digest-2"))
    assert result["changed"] is True


def test_a_run_of_the_same_inputs_keeps_what_the_one_before_managed(
    host: Host, run_module: RunModule
) -> None:
    # A second full run skips what the first installed (a task that found its work done
    # reports no path): its record keeps the first one's items, and nothing changed.
    run_module(converged_state, host.args("record"))
    fewer = {"files": [str(host.serve)], "units": ["llmfleet-vllm"]}
    again = host.args("record", run_id="r2", items=fewer, probes=[{"url": "http://a/health"}])
    rc, result = run_module(converged_state, again)
    assert (rc, result["changed"]) == (0, True), result  # a check that was not there before
    kept = json.loads(host.record.read_text())
    assert kept["items"] == {**host.items(), "units": host.items()["units"]}
    assert kept["probes"] == [{"url": "http://a/health"}]
    rc, result = run_module(converged_state, {**again, "run_id": "r3"})
    assert (rc, result["changed"]) == (0, False), result
    # Other inputs, other code or values: only what this run managed.
    rc, result = run_module(converged_state, {**again, "run_id": "r4", "inputs": "digest-2"})
    assert json.loads(host.record.read_text())["items"]["files"] == [str(host.serve)]


def test_in_check_mode_a_record_is_not_written(host: Host, run_module: RunModule) -> None:
    rc, result = run_module(converged_state, host.args("record", _ansible_check_mode=True))
    assert rc == 0, result
    assert result["changed"] is True
    assert not host.record.exists()


def test_a_broken_record_is_replaced_owner_only(host: Host, run_module: RunModule) -> None:
    host.record.parent.mkdir(parents=True)
    host.record.write_text("{not json")
    host.record.chmod(0o644)
    rc, result = run_module(converged_state, host.args("record"))
    assert (rc, result["changed"]) == (0, True), result
    assert json.loads(host.record.read_text())["run"] == "r1"
    assert mode_of(host.record) == 0o600


def test_compare_says_converged_then_names_what_changed(host: Host, run_module: RunModule) -> None:
    run_module(converged_state, host.args("record"))
    rc, result = run_module(converged_state, host.args("compare"))
    assert rc == 0, result
    result.pop("invocation", None)
    assert result == {
        "changed": False,
        "converged": True,
        "changes": [],
        "changed_inputs": [],
        "run": "r1",
        "inputs": "digest-1",
    }

    host.serve.write_text("port: 8001\n")
    rc, result = run_module(converged_state, host.args("compare"))
    assert (rc, result["converged"], result["changed"]) == (0, False, False), result
    assert result["changes"] == [f"{host.serve}: its content changed"]
    assert result["run"] == "r1"


def test_compare_names_every_kind_of_change(host: Host, run_module: RunModule) -> None:
    run_module(converged_state, host.args("record"))
    host.serve.chmod(0o600)
    (host.root / "removed").write_text("back")
    host.answer(
        units={"llmfleet-vllm.service": ["loaded", "enabled", "active", "a-new-invocation"]},
        containers={"llmfleet-vllm": ["9f3c" + "0" * 60, "running", 1]},
        packages={"nvidia-container-toolkit": "1.18.0-1", "nosuchpkg": "1"},
    )
    host.sysctl("net.core.rmem_max", "212992")
    rc, result = run_module(converged_state, host.args("compare"))
    assert rc == 0, result
    assert result["changes"] == [
        f"{host.serve}: its mode changed",
        f"{host.root / 'removed'}: created",
        "unit llmfleet-vllm: restarted since",
        "unit llmfleet-ray.service: not-found, was loaded",
        "container docker/llmfleet-vllm: restarted since",
        "package nvidia-container-toolkit: 1.18.0-1, was 1.17.8-1",
        "package nosuchpkg: 1, was absent",
        "kernel setting net.core.rmem_max: 212992, was 4194304",
    ]


def test_other_inputs_are_said_first_then_what_else_changed(
    host: Host, run_module: RunModule
) -> None:
    # What else changed is said after the inputs' line: `llmfleet up` limits its walk to what
    # the changed variables reach only when nothing else did.
    run_module(converged_state, host.args("record"))
    rc, result = run_module(converged_state, host.args("compare", inputs="digest-2"))
    assert rc == 0, result
    assert result["changes"] == [
        "the inputs changed since run r1 (the collection, a variable or a group)"
    ]
    assert (result["inputs"], result["changed_inputs"]) == ("digest-2", ["*"])
    host.serve.write_text("changed too\n")
    rc, result = run_module(converged_state, host.args("compare", inputs="digest-2"))
    assert result["changes"] == [
        "the inputs changed since run r1 (the collection, a variable or a group)",
        f"{host.serve}: its content changed",
    ]


def test_a_check_that_fails_is_said_after_other_inputs_when_nothing_else_changed(
    host: Host, run_module: RunModule
) -> None:
    probes = [{"command": [sys.executable, "-c", "import sys; sys.exit(3)"]}]
    parts = {"var:vllm_server_profile_overrides": "a"}
    run_module(converged_state, host.args("record", probes=probes, input_parts=parts))
    other = {"var:vllm_server_profile_overrides": "b"}
    rc, result = run_module(
        converged_state, host.args("compare", inputs="digest-2", input_parts=other)
    )
    assert rc == 0, result
    assert result["changed_inputs"] == ["var:vllm_server_profile_overrides"]
    assert result["changes"] == [
        "the inputs changed since run r1: vllm_server_profile_overrides",
        f"{sys.executable} -c import sys; sys.exit(3): not ready (exit 3)",
    ]


def test_a_limited_walk_extends_the_record_of_the_run_it_started_from(
    host: Host, run_module: RunModule
) -> None:
    # `llmfleet up` walked only what a changed variable reaches, from run r1's state: the
    # record of the new inputs keeps r1's items and checks, which the walk did not touch.
    probes = [{"url": "http://a/health"}]
    run_module(converged_state, host.args("record", probes=probes))
    fewer = {"files": [str(host.serve)]}
    limited = host.args("record", run_id="r2", inputs="digest-2", items=fewer, extends="r1")
    rc, result = run_module(converged_state, limited)
    assert rc == 0, result
    kept = json.loads(host.record.read_text())
    assert (kept["run"], kept["inputs"]) == ("r2", "digest-2")
    assert kept["items"] == host.items() and kept["probes"] == probes
    # A record of another run is not extended.
    rc, result = run_module(
        converged_state,
        {**limited, "run_id": "r3", "inputs": "digest-3", "extends": "r1"},
    )
    assert json.loads(host.record.read_text())["items"]["files"] == [str(host.serve)]


def test_compare_without_a_record(host: Host, run_module: RunModule) -> None:
    rc, result = run_module(converged_state, host.args("compare"))
    assert rc == 0, result
    assert (result["converged"], result["changes"], result["run"]) == (
        False,
        ["no record of a full run"],
        "",
    )


@pytest.mark.parametrize(
    ("text", "says"),
    [
        pytest.param("{broken", "the record is not JSON (", id="not JSON"),
        pytest.param('{"version": 99}', "the record is of another version", id="another version"),
    ],
)
def test_compare_with_a_record_it_cannot_read(
    host: Host, run_module: RunModule, text: str, says: str
) -> None:
    host.record.parent.mkdir(parents=True)
    host.record.write_text(text)
    rc, result = run_module(converged_state, host.args("compare"))
    assert rc == 0, result
    assert result["converged"] is False
    (line,) = result["changes"]
    assert line.startswith(f"{host.record}: {says}"), line


def test_a_check_that_fails_is_said_only_when_the_rest_is_as_it_was(
    host: Host, run_module: RunModule
) -> None:
    mark = host.root / "checked"
    command = [
        sys.executable, "-c",
        f"import pathlib, sys; pathlib.Path({str(mark)!r}).touch(); sys.exit(3)",
    ]  # fmt: skip
    ready = [sys.executable, "-c", "print('ready')"]
    probes = [{"command": ready, "pattern": "^ready$", "min_matches": 1}, {"command": command}]
    rc, result = run_module(converged_state, host.args("record", probes=probes))
    assert rc == 0, result
    assert json.loads(host.record.read_text())["probes"] == probes
    assert not mark.exists()  # a record runs no check

    rc, result = run_module(converged_state, host.args("compare"))
    assert rc == 0, result
    assert result["converged"] is False
    assert result["changes"] == [f"{' '.join(command)}: not ready (exit 3)"]
    assert mark.exists()

    mark.unlink()
    host.serve.write_text("port: 8001\n")
    rc, result = run_module(converged_state, host.args("compare"))
    assert result["changes"] == [f"{host.serve}: its content changed"]
    assert not mark.exists()  # the checks take seconds: not run when something else changed


def test_mode_inputs_is_the_action_plugins(host: Host, run_module: RunModule) -> None:
    rc, result = run_module(converged_state, {"mode": "inputs"})
    assert rc == 1
    assert result["failed"] is True
    assert result["msg"] == "mode=inputs is computed by the action plugin, on the controller"


@pytest.mark.parametrize("mode", ["record", "compare"])
def test_record_and_compare_need_the_inputs(host: Host, run_module: RunModule, mode: str) -> None:
    args = host.args(mode)
    del args["inputs"]
    rc, result = run_module(converged_state, args)
    assert rc == 1
    assert "inputs" in result["msg"]
