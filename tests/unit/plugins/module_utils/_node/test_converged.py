"""module_utils/_node/converged: a path's state (file, folder, link, absent, a big file by size and
mtime), systemctl's, the engines' and dpkg-query's output as data, kernel settings from a tree,
the record read back, and a line for every way a host can differ from what the last full run
left."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._node import converged

Run = Callable[[list[str]], tuple[int, str, str]]
INVOCATION = "6b3c1e0e2f8a4d7e9b1c0a2f3e4d5c6b"

# What `systemctl show -p Id,LoadState,UnitFileState,ActiveState,InvocationID -- A B C D`
# prints: a block per unit in the order asked, the properties in systemd's own order, a
# blank line between blocks. A stopped unit keeps the invocation of its last run; a unit
# systemd does not know is "not-found" with an empty unit-file state.
SYSTEMCTL_SHOW = f"""\
Id=llmfleet-vllm.service
LoadState=loaded
ActiveState=active
UnitFileState=enabled
InvocationID={INVOCATION}

Id=llmfleet-ray.service
LoadState=loaded
ActiveState=inactive
UnitFileState=disabled
InvocationID=0f1e2d3c4b5a69788796a5b4c3d2e1f0

Id=nope.service
LoadState=not-found
ActiveState=inactive
UnitFileState=
InvocationID=

Id=llmfleet-gateway.timer
LoadState=loaded
ActiveState=activating
UnitFileState=static
InvocationID=11112222333344445555666677778888
"""

# What `docker container inspect NAME` prints (trimmed to a few of its keys; the engine prints
# dozens): a list of one object.
DOCKER_INSPECT = json.dumps(
    [
        {
            "Id": "9f3c" + "0" * 60,
            "Created": "2026-12-01T18:00:00.000000000Z",
            "Path": "vllm",
            "Args": ["serve", "--config", "/etc/llmfleet/vllm/serve.yaml"],
            "State": {
                "Status": "running",
                "Running": True,
                "Paused": False,
                "Restarting": False,
                "OOMKilled": False,
                "Dead": False,
                "Pid": 4242,
                "ExitCode": 0,
                "Error": "",
                "StartedAt": "2026-12-01T18:00:01.000000000Z",
                "FinishedAt": "0001-01-01T00:00:00Z",
            },
            "Image": "sha256:" + "a" * 64,
            "Name": "/llmfleet-vllm",
            "RestartCount": 2,
            "HostConfig": {"RestartPolicy": {"Name": "unless-stopped", "MaximumRetryCount": 0}},
        }
    ],
    indent=4,
)

# `dpkg-query -W -f '${Package}\t${db:Status-Status}\t${Version}\n' -- A B C D`: a line per
# package it knows (multi-arch ones by name alone), removed-but-not-purged ones as
# config-files; it says on stderr (and exit 1) which it does not know.
DPKG_QUERY = (
    "nvidia-container-toolkit\tinstalled\t1.17.8-1\n"
    "libc6\tinstalled\t2.36-9+deb12u14\n"
    "podman\tconfig-files\t4.3.1+ds1-8+deb12u1\n"
)
DPKG_QUERY_ERR = "dpkg-query: no packages found matching nosuchpkg\n"


def answers(table: dict[str, tuple[int, str, str]], calls: list[list[str]] | None = None) -> Run:
    """A ``run`` answering by the command's first word, recording the calls."""

    def run(argv: list[str]) -> tuple[int, str, str]:
        if calls is not None:
            calls.append(argv)
        if argv[0] not in table:
            raise FileNotFoundError(2, "No such file or directory", argv[0])
        return table[argv[0]]

    return run


# ---------------------------------------------------------------------------
# file_state
# ---------------------------------------------------------------------------
def test_a_file_is_its_type_mode_owner_and_sha256(tmp_path: Path) -> None:
    path = tmp_path / "serve.yaml"
    path.write_bytes(b"port: 8000\n")
    path.chmod(0o640)
    assert converged.file_state(str(path)) == {
        "exists": True,
        "type": "file",
        "mode": "0640",
        "owner": f"{os.getuid()}:{os.getgid()}",
        "sha256": hashlib.sha256(b"port: 8000\n").hexdigest(),
    }


def test_a_folder_and_a_link_are_not_followed(tmp_path: Path) -> None:
    folder = tmp_path / "etc"
    folder.mkdir(mode=0o750)
    folder.chmod(0o750)
    link = tmp_path / "current"
    link.symlink_to("/nowhere/at/all")  # dangling: only the link itself is read
    assert converged.file_state(str(folder)) == {
        "exists": True,
        "type": "directory",
        "mode": "0750",
        "owner": f"{os.getuid()}:{os.getgid()}",
    }
    state = converged.file_state(str(link))
    assert (state["type"], state["target"]) == ("link", "/nowhere/at/all")
    assert "sha256" not in state


def test_a_missing_path_is_just_absent(tmp_path: Path) -> None:
    assert converged.file_state(str(tmp_path / "gone")) == {"exists": False}


def test_a_file_it_may_not_read_is_its_size_and_mtime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The tests run as root, who reads everything: the refusal a user meets is made here.
    secret = tmp_path / "api.key"
    secret.write_text("key\n")
    os.utime(secret, (1_700_000_000, 1_700_000_000))
    real_open = open

    def refusing_open(path: Any, *args: Any, **kwargs: Any) -> Any:
        if str(path) == str(secret):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", refusing_open)
    state = converged.file_state(str(secret))
    assert (state["type"], state["size"], state["mtime"]) == ("file", 4, 1_700_000_000)
    assert "sha256" not in state


def test_a_file_above_the_limit_is_its_size_and_mtime_not_its_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(converged, "HASH_LIMIT_BYTES", 4)
    small, big = tmp_path / "small", tmp_path / "weights.safetensors"
    small.write_bytes(b"1234")  # at the limit: hashed
    big.write_bytes(b"12345")
    os.utime(big, (1_700_000_000.7, 1_700_000_000.7))
    assert "sha256" in converged.file_state(str(small))
    state = converged.file_state(str(big))
    assert (state["size"], state["mtime"]) == (5, 1_700_000_000)
    assert "sha256" not in state
    # The same bytes written again later: a new mtime reads as a change of content.
    os.utime(big, (1_700_000_100, 1_700_000_100))
    (line,) = converged.differences(
        {"files": {str(big): state}}, {"files": {str(big): converged.file_state(str(big))}}
    )
    assert line == f"{big}: its content changed"


# ---------------------------------------------------------------------------
# systemd units
# ---------------------------------------------------------------------------
def test_systemctl_show_becomes_a_state_per_unit() -> None:
    units = converged.parse_units(SYSTEMCTL_SHOW)
    assert units == {
        "llmfleet-vllm.service": {
            "load": "loaded",
            "enabled": "enabled",
            "active": "active",
            "invocation": INVOCATION,
        },
        # Stopped: the invocation of its last run is not its state.
        "llmfleet-ray.service": {
            "load": "loaded",
            "enabled": "disabled",
            "active": "inactive",
            "invocation": "",
        },
        "nope.service": {
            "load": "not-found",
            "enabled": "",
            "active": "inactive",
            "invocation": "",
        },
        # Neither is that of a unit on its way up.
        "llmfleet-gateway.timer": {
            "load": "loaded",
            "enabled": "static",
            "active": "activating",
            "invocation": "",
        },
    }


ABSENT_UNIT = {"load": "not-found", "enabled": "", "active": "inactive", "invocation": ""}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("", {}, id="nothing"),
        pytest.param("\n\n", {}, id="blank lines"),
        pytest.param("LoadState=loaded\nActiveState=active\n", {}, id="a block without Id"),
        pytest.param("Id=a.service\n", {"a.service": dict(ABSENT_UNIT)}, id="only the Id"),
        pytest.param(
            "Id=a.service\nActiveState=active\nInvocationID=x=y\n",
            {"a.service": {**ABSENT_UNIT, "active": "active", "invocation": "x=y"}},
            id="a value with =",
        ),
    ],
)
def test_parse_units_edges(text: str, expected: dict[str, Any]) -> None:
    assert converged.parse_units(text) == expected


def test_unit_states_asks_once_and_names_units_as_the_run_did() -> None:
    calls: list[list[str]] = []
    run = answers({"systemctl": (0, SYSTEMCTL_SHOW, "")}, calls)
    states = converged.unit_states(run, ["llmfleet-vllm", "llmfleet-ray.service", "nope", "other"])
    assert calls == [
        ["systemctl", "show", "-p", "Id,LoadState,UnitFileState,ActiveState,InvocationID", "--",
         "llmfleet-vllm", "llmfleet-ray.service", "nope", "other"],
    ]  # fmt: skip
    # systemctl answers with the full Id: found again under the name the task used.
    assert states["llmfleet-vllm"]["invocation"] == INVOCATION
    assert states["llmfleet-ray.service"]["enabled"] == "disabled"
    assert states["nope"]["load"] == "not-found"
    # A unit systemctl did not answer for at all: absent, as an unknown one.
    assert states["other"] == {
        "load": "not-found",
        "enabled": "",
        "active": "inactive",
        "invocation": "",
    }


def test_unit_states_without_systemd_reads_every_unit_as_absent() -> None:
    run = answers({"systemctl": (1, "", "System has not been booted with systemd")})
    assert converged.unit_states(run, ["a", "b"]) == {
        name: {"load": "not-found", "enabled": "", "active": "inactive", "invocation": ""}
        for name in ("a", "b")
    }
    assert converged.unit_states(answers({}), []) == {}  # nothing asked of systemctl


# ---------------------------------------------------------------------------
# containers
# ---------------------------------------------------------------------------
def test_container_states_read_the_id_status_and_restarts() -> None:
    calls: list[list[str]] = []
    run = answers({"docker": (0, DOCKER_INSPECT, "")}, calls)
    states = converged.container_states(run, [{"name": "llmfleet-vllm", "engine": "docker"}])
    assert calls == [["docker", "container", "inspect", "llmfleet-vllm"]]
    assert states == {
        "docker/llmfleet-vllm": {
            "exists": True,
            "id": "9f3c" + "0" * 60,
            "status": "running",
            "restarts": 2,
        }
    }


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(
            (1, "[]\n", "Error: No such container: llmfleet-vllm\n"), id="docker: unknown"
        ),
        pytest.param(
            (125, "[]\n", "Error: no such container llmfleet-vllm\n"), id="podman: unknown"
        ),
        pytest.param((127, "", "docker: not found"), id="engine missing (the module's runner)"),
        pytest.param((0, "[]", ""), id="an empty list"),
        pytest.param((0, "not json", ""), id="not JSON"),
        pytest.param((0, "[{}]", ""), id="an empty object"),
    ],
)
def test_a_container_that_cannot_be_inspected_is_absent(answer: tuple[int, str, str]) -> None:
    run = answers({"docker": answer})
    states = converged.container_states(run, [{"name": "llmfleet-vllm", "engine": "docker"}])
    assert states == {"docker/llmfleet-vllm": {"exists": False}}


def test_an_engine_that_is_not_installed_reads_as_the_container_absent() -> None:
    # run raises OSError (FileNotFoundError) for a program that is not there
    states = converged.container_states(
        answers({}), [{"name": "llmfleet-vllm", "engine": "podman"}]
    )
    assert states == {"podman/llmfleet-vllm": {"exists": False}}


def test_a_podman_object_not_in_a_list_is_read_too() -> None:
    inspected = json.loads(DOCKER_INSPECT)[0]
    run = answers({"podman": (0, json.dumps(inspected), "")})
    states = converged.container_states(run, [{"name": "x", "engine": "podman"}])
    assert states["podman/x"]["status"] == "running"


# ---------------------------------------------------------------------------
# packages and kernel settings
# ---------------------------------------------------------------------------
def test_package_states_are_installed_versions_or_none() -> None:
    calls: list[list[str]] = []
    run = answers({"dpkg-query": (1, DPKG_QUERY, DPKG_QUERY_ERR)}, calls)
    names = ["nvidia-container-toolkit", "libc6", "podman", "nosuchpkg"]
    assert converged.package_states(run, names) == {
        "nvidia-container-toolkit": "1.17.8-1",
        "libc6": "2.36-9+deb12u14",
        "podman": None,  # removed, its configuration kept
        "nosuchpkg": None,
    }
    assert calls[0][:3] == ["dpkg-query", "-W", "-f"]
    assert calls[0][3] == "${Package}\t${db:Status-Status}\t${Version}\n"
    assert calls[0][4:] == ["--", *names]


def test_package_states_without_dpkg_and_without_names() -> None:
    assert converged.package_states(answers({"dpkg-query": (127, "", "")}), ["a"]) == {"a": None}
    assert converged.package_states(answers({}), []) == {}


def test_sysctl_states_read_the_tree(tmp_path: Path) -> None:
    (tmp_path / "net" / "core").mkdir(parents=True)
    (tmp_path / "net" / "core" / "rmem_max").write_text("4194304\n")
    (tmp_path / "net" / "ipv4").mkdir()
    (tmp_path / "net" / "ipv4" / "tcp_rmem").write_text("4096\t131072\t6291456\n")
    names = ["net.core.rmem_max", "net/ipv4/tcp_rmem", "net.core.wmem_max"]
    assert converged.sysctl_states(names, str(tmp_path)) == {
        "net.core.rmem_max": "4194304",
        "net/ipv4/tcp_rmem": "4096 131072 6291456",  # whitespace as sysctl prints it
        "net.core.wmem_max": None,
    }


def test_a_sysctl_name_with_slashes_keeps_the_dots_of_an_interface(tmp_path: Path) -> None:
    (tmp_path / "net" / "ipv4" / "conf" / "eth0.100").mkdir(parents=True)
    (tmp_path / "net" / "ipv4" / "conf" / "eth0.100" / "rp_filter").write_text("2\n")
    name = "net/ipv4/conf/eth0.100/rp_filter"
    assert converged.sysctl_states([name], str(tmp_path)) == {name: "2"}


def test_read_states_asks_each_tool_only_for_its_items(tmp_path: Path) -> None:
    calls: list[list[str]] = []
    run = answers({"systemctl": (0, SYSTEMCTL_SHOW, "")}, calls)
    (tmp_path / "f").write_text("x")
    states = converged.read_states(
        run, {"files": [str(tmp_path / "f")], "units": ["llmfleet-vllm"]}, str(tmp_path)
    )
    assert [argv[0] for argv in calls] == ["systemctl"]
    assert set(states) == set(converged.ITEM_KINDS)
    assert states["containers"] == states["packages"] == states["sysctls"] == {}
    assert states["files"][str(tmp_path / "f")]["type"] == "file"


def test_boot_id(tmp_path: Path) -> None:
    (tmp_path / "boot_id").write_text("5af79e15-1957-43ff-9761-0867edfce2f5\n")
    assert converged.boot_id(str(tmp_path / "boot_id")) == "5af79e15-1957-43ff-9761-0867edfce2f5"
    assert converged.boot_id(str(tmp_path / "none")) == ""


# ---------------------------------------------------------------------------
# the record
# ---------------------------------------------------------------------------
def test_a_record_reads_back_as_it_was_made() -> None:
    record = converged.make_record(
        "20261201T190512Z-4242",
        inputs="3f0c",
        boot="b1",
        items={"files": ["/etc/x"], "other": ["ignored"]},
        states={"files": {"/etc/x": {"exists": False}}},
        probes=[{"url": "http://127.0.0.1:8000/health"}],
    )
    assert record["items"] == {
        "files": ["/etc/x"],
        "units": [],
        "containers": [],
        "packages": [],
        "sysctls": [],
    }
    assert converged.parse_record(json.dumps(record)) == record


@pytest.mark.parametrize(
    ("text", "says"),
    [
        pytest.param("{", "the record is not JSON", id="broken"),
        pytest.param("", "the record is not JSON", id="empty"),
        pytest.param("[]", "another version", id="a list"),
        pytest.param('{"version": 0}', "another version", id="an older version"),
        pytest.param('{"run": "x"}', "another version", id="no version"),
    ],
)
def test_a_record_that_cannot_be_read(text: str, says: str) -> None:
    with pytest.raises(converged.RecordError, match=says):
        converged.parse_record(text)


# ---------------------------------------------------------------------------
# what differs
# ---------------------------------------------------------------------------
FILE = {"exists": True, "type": "file", "mode": "0644", "owner": "0:0", "sha256": "aa"}
BIG = {"exists": True, "type": "file", "mode": "0644", "owner": "0:0", "size": 9, "mtime": 1}
LINK = {"exists": True, "type": "link", "mode": "0777", "owner": "0:0", "target": "/a"}
UNIT = {"load": "loaded", "enabled": "enabled", "active": "active", "invocation": "i1"}
CONTAINER = {"exists": True, "id": "c1", "status": "running", "restarts": 0}


@pytest.mark.parametrize(
    ("kind", "name", "before", "after", "line"),
    [
        ("files", "/f", FILE, {**FILE, "sha256": "bb"}, "/f: its content changed"),
        ("files", "/f", BIG, {**BIG, "size": 10}, "/f: its content changed"),
        ("files", "/f", BIG, {**BIG, "mtime": 2}, "/f: its content changed"),
        ("files", "/f", FILE, {**FILE, "mode": "0600"}, "/f: its mode changed"),
        ("files", "/f", FILE, {**FILE, "owner": "1000:1000"}, "/f: its owner changed"),
        ("files", "/f", FILE, {"exists": False}, "/f: removed"),
        ("files", "/f", {"exists": False}, FILE, "/f: created"),
        ("files", "/f", FILE, {**LINK}, "/f: its type changed"),
        ("files", "/f", LINK, {**LINK, "target": "/b"}, "/f: its link target changed"),
        ("files", "/f", FILE, {**FILE, "extra": 1}, "/f: changed"),
        ("units", "u", UNIT, {**UNIT, "invocation": "i2"}, "unit u: restarted since"),
        ("units", "u", UNIT, {**UNIT, "enabled": "disabled"}, "unit u: disabled, was enabled"),
        (
            "units", "u", UNIT, {**UNIT, "active": "inactive", "invocation": ""},
            "unit u: inactive, was active",
        ),
        (
            "units", "u", UNIT, {**UNIT, "load": "not-found", "enabled": ""},
            "unit u: not-found, was loaded",
        ),
        ("units", "u", {**UNIT, "enabled": ""}, UNIT, "unit u: enabled, was no unit file"),
        ("units", "u", UNIT, {**UNIT, "enabled": ""}, "unit u: no unit file, was enabled"),
        ("containers", "docker/c", CONTAINER, {"exists": False}, "container docker/c: gone"),
        (
            "containers", "docker/c", {"exists": False}, CONTAINER,
            "container docker/c: created since",
        ),
        (
            "containers", "docker/c", CONTAINER, {**CONTAINER, "id": "c2"},
            "container docker/c: another container since",
        ),
        (
            "containers", "docker/c", CONTAINER, {**CONTAINER, "status": "exited"},
            "container docker/c: exited, was running",
        ),
        (
            "containers", "docker/c", CONTAINER, {**CONTAINER, "restarts": 1},
            "container docker/c: restarted since",
        ),
        ("packages", "vllm", "1.0", "1.1", "package vllm: 1.1, was 1.0"),
        ("packages", "vllm", "1.0", None, "package vllm: absent, was 1.0"),
        ("packages", "vllm", None, "1.0", "package vllm: 1.0, was absent"),
        (
            "sysctls", "net.core.rmem_max", "4194304", "212992",
            "kernel setting net.core.rmem_max: 212992, was 4194304",
        ),
        (
            "sysctls", "net.core.rmem_max", "4194304", None,
            "kernel setting net.core.rmem_max: absent, was 4194304",
        ),
    ],
)  # fmt: skip
def test_each_difference_is_a_line(
    kind: str, name: str, before: Any, after: Any, line: str
) -> None:
    assert converged.differences({kind: {name: before}}, {kind: {name: after}}) == [line]


def test_what_is_as_it_was_says_nothing_and_every_difference_is_listed_in_kind_order() -> None:
    before = {
        "files": {"/a": FILE, "/b": FILE},
        "units": {"u": UNIT},
        "containers": {"docker/c": CONTAINER},
        "packages": {"p": "1"},
        "sysctls": {"s": "1"},
    }
    assert converged.differences(before, json.loads(json.dumps(before))) == []
    after = {
        "sysctls": {"s": "2"},
        "packages": {"p": "1"},
        "containers": {"docker/c": {"exists": False}},
        "units": {"u": {**UNIT, "invocation": "i2"}},
        "files": {"/a": FILE, "/b": {"exists": False}},
    }
    assert converged.differences(before, after) == [
        "/b: removed",
        "unit u: restarted since",
        "container docker/c: gone",
        "kernel setting s: 2, was 1",
    ]


RECORD = {
    "run": "r1",
    "inputs": "digest",
    "boot_id": "boot",
    "states": {"files": {"/f": FILE}},
}


@pytest.mark.parametrize(
    ("inputs", "boot", "states", "lines"),
    [
        pytest.param("digest", "boot", {"files": {"/f": FILE}}, [], id="as it was"),
        pytest.param(
            "other", "boot2", {"files": {"/f": {"exists": False}}},
            ["the inputs changed since run r1 (the collection, a variable or a group)",
             "rebooted since run r1"],
            id="other inputs, then a reboot alone",
        ),
        pytest.param(
            "other", "boot", {"files": {"/f": {"exists": False}}},
            ["the inputs changed since run r1 (the collection, a variable or a group)",
             "/f: removed"],
            id="other inputs, then each item",
        ),
        pytest.param(
            "other", "boot", {"files": {"/f": FILE}},
            ["the inputs changed since run r1 (the collection, a variable or a group)"],
            id="other inputs alone",
        ),
        pytest.param(
            "digest", "boot2", {"files": {"/f": {"exists": False}}},
            ["rebooted since run r1"],
            id="a reboot: the items are not compared",
        ),
        pytest.param(
            "digest", "boot", {"files": {"/f": {"exists": False}}}, ["/f: removed"],
            id="an item",
        ),
    ],
)  # fmt: skip
def test_compare(inputs: str, boot: str, states: dict[str, Any], lines: list[str]) -> None:
    assert converged.compare(RECORD, inputs, boot, states) == lines


# ---------------------------------------------------------------------------
# readiness checks
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("probe", "label"),
    [
        ({"url": "http://127.0.0.1:8000/health"}, "http://127.0.0.1:8000/health"),
        ({"command": ["ray", "status"], "pattern": "node_", "min_matches": 2}, "ray status"),
        ({}, ""),
    ],
)
def test_probe_label(probe: dict[str, Any], label: str) -> None:
    assert converged.probe_label(probe) == label


def test_probe_failures_name_each_check_that_does_not_pass() -> None:
    probes = [
        {"url": "http://127.0.0.1:8000/health"},
        {"command": ["ray", "status"], "pattern": "node_", "min_matches": 2},
        {"url": "http://127.0.0.1:4000/health"},
    ]
    said = {
        "http://127.0.0.1:8000/health": (True, "HTTP 200"),
        "ray status": (False, "1 of 2 lines match 'node_'"),
        "http://127.0.0.1:4000/health": (False, "Connection refused"),
    }
    seen: list[dict[str, Any]] = []

    def check(probe: dict[str, Any]) -> tuple[bool, str]:
        seen.append(probe)
        return said[converged.probe_label(probe)]

    assert converged.probe_failures(probes, check) == [
        "ray status: not ready (1 of 2 lines match 'node_')",
        "http://127.0.0.1:4000/health: not ready (Connection refused)",
    ]
    assert seen == probes
    assert converged.probe_failures([], check) == []


@pytest.mark.parametrize(
    ("recorded", "current", "changed"),
    [
        pytest.param({"var:a": "1", "files": "f"}, {"var:a": "1", "files": "f"}, [], id="same"),
        pytest.param({"var:a": "1", "files": "f"}, {"var:a": "2", "files": "f"}, ["var:a"],
                     id="a value"),
        pytest.param({"var:a": "1"}, {"var:a": "1", "var:b": "1"}, ["var:b"], id="a new one"),
        pytest.param({"var:a": "1", "var:b": "1"}, {"var:a": "1"}, ["var:b"], id="one gone"),
        pytest.param({}, {"var:a": "1"}, ["*"], id="a record without parts"),
    ],
)  # fmt: skip
def test_changed_inputs(
    recorded: dict[str, str], current: dict[str, str], changed: list[str]
) -> None:
    assert converged.changed_inputs(recorded, current) == changed


@pytest.mark.parametrize(
    ("changed", "line"),
    [
        pytest.param(["*"],
                     "the inputs changed since run r1 (the collection, a variable or a group)",
                     id="unknown"),
        pytest.param(["var:vllm_server_profile_overrides"],
                     "the inputs changed since run r1: vllm_server_profile_overrides",
                     id="a variable"),
        pytest.param(["files", "groups", "versions"],
                     "the inputs changed since run r1: the collection's files, the inventory's"
                     " groups, the versions of Ansible", id="the rest"),
        pytest.param([f"var:v{i}" for i in range(8)],
                     "the inputs changed since run r1: v0, v1, v2, v3, v4, v5 and 2 more",
                     id="many"),
    ],
)  # fmt: skip
def test_the_inputs_line_names_what_changed(changed: list[str], line: str) -> None:
    assert converged.inputs_line("r1", changed) == line


def test_compare_names_the_variable_that_changed() -> None:
    record = {**RECORD, "input_parts": {"var:vllm_server_port": "a", "files": "f"}}
    now = {"var:vllm_server_port": "b", "files": "f"}
    assert converged.compare(record, "other", "boot", {}, now) == [
        "the inputs changed since run r1: vllm_server_port"
    ]
