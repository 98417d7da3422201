"""plugin_utils/_converged/items: what each known module's result says it managed (files, units,
containers, packages, kernel settings, readiness checks), from the arguments it ran with; loops
read item by item; what was skipped or failed, and what an unknown module did, is not read."""

from __future__ import annotations

from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._node.converged import ITEM_KINDS
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._converged.items import (
    KINDS,
    READERS,
    merge,
    result_items,
    task_items,
)

OK = {"changed": True}

# Every module READERS knows, with arguments it ran with and the items they name.
CASES = [
    ("ansible.builtin.copy", {"dest": "/etc/a", "content": "x"}, {"files": ["/etc/a"]}),
    ("ansible.builtin.template", {"src": "a.j2", "dest": "/etc/a"}, {"files": ["/etc/a"]}),
    ("ansible.builtin.file", {"path": "/etc/d", "state": "directory"}, {"files": ["/etc/d"]}),
    ("ansible.builtin.file", {"dest": "/etc/d", "state": "absent"}, {"files": ["/etc/d"]}),
    ("ansible.builtin.lineinfile", {"path": "/etc/hosts", "line": "x"}, {"files": ["/etc/hosts"]}),
    ("ansible.builtin.blockinfile", {"dest": "/etc/hosts", "block": "x"},
     {"files": ["/etc/hosts"]}),
    ("ansible.builtin.replace", {"path": "/etc/a", "regexp": "x"}, {"files": ["/etc/a"]}),
    ("community.general.ini_file", {"path": "/etc/a.ini", "section": "s"},
     {"files": ["/etc/a.ini"]}),
    (
        "llmfleet.cluster.config_files",
        {"directories": [{"path": "/etc/llmfleet", "mode": "0755"}, {"mode": "0700"}],
         "files": [{"dest": "/etc/llmfleet/a.yaml"}, {"dest": "/etc/llmfleet/b.env"}, {}]},
        {"files": ["/etc/llmfleet", "/etc/llmfleet/a.yaml", "/etc/llmfleet/b.env"]},
    ),
    ("ansible.builtin.systemd_service", {"name": "llmfleet-vllm.service", "state": "started"},
     {"units": ["llmfleet-vllm.service"]}),
    ("ansible.builtin.systemd", {"name": "llmfleet-ray", "enabled": True},
     {"units": ["llmfleet-ray"]}),
    ("ansible.builtin.service", {"name": "nftables", "state": "restarted"},
     {"units": ["nftables"]}),
    ("community.docker.docker_container", {"name": "llmfleet-vllm", "image": "v"},
     {"containers": [{"name": "llmfleet-vllm", "engine": "docker"}]}),
    ("containers.podman.podman_container", {"name": "llmfleet-vllm", "image": "v"},
     {"containers": [{"name": "llmfleet-vllm", "engine": "podman"}]}),
    ("ansible.builtin.apt", {"name": ["nvidia-container-toolkit=1.17.8-1", "jq"]},
     {"packages": ["nvidia-container-toolkit", "jq"]}),
    ("ansible.builtin.apt", {"pkg": "podman/bookworm-backports, jq"},
     {"packages": ["podman", "jq"]}),
    ("ansible.builtin.package", {"name": "chrony"}, {"packages": ["chrony"]}),
    ("ansible.posix.sysctl", {"name": "net.core.rmem_max", "value": "4194304"},
     {"sysctls": ["net.core.rmem_max"]}),
    ("llmfleet.cluster.service_wait", {"url": "http://127.0.0.1:8000/health", "headers": {}},
     {"probes": [{"url": "http://127.0.0.1:8000/health"}]}),
    (
        "llmfleet.cluster.service_wait",
        {"command": ["ray", "status"], "pattern": "node_", "min_matches": 2, "unit": "ray"},
        {"probes": [{"command": ["ray", "status"], "pattern": "node_", "min_matches": 2}]},
    ),
    ("llmfleet.cluster.service_wait", {"command": ["/usr/local/bin/probe", "--ready"]},
     {"probes": [{"command": ["/usr/local/bin/probe", "--ready"]}]}),
]  # fmt: skip


@pytest.mark.parametrize(("action", "args", "items"), CASES)
def test_each_module_is_read_from_its_arguments(
    action: str, args: dict[str, Any], items: dict[str, Any]
) -> None:
    assert task_items(action, args, OK) == items
    # The same arguments reported in the result's invocation (what the module ran with)
    assert task_items(action, {}, {**OK, "invocation": {"module_args": args}}) == items


def test_every_reader_is_tested_and_names_kinds_the_record_keeps() -> None:
    assert {case[0] for case in CASES} == set(READERS)
    assert KINDS == ITEM_KINDS  # what the callback gathers is what the module records
    kinds = {kind for case in CASES for kind in case[2]}
    assert kinds == {*KINDS, "probes"}


@pytest.mark.parametrize(
    ("action", "args", "result", "items"),
    [
        # The module ran with what its invocation says (a relative or templated path resolved).
        pytest.param(
            "ansible.builtin.copy", {"dest": "{{ raw }}"},
            {**OK, "invocation": {"module_args": {"dest": "/etc/resolved"}}},
            {"files": ["/etc/resolved"]}, id="invocation over the task's arguments",
        ),
        pytest.param(
            "ansible.builtin.copy", {"dest": "/etc/a"},
            {**OK, "invocation": {"module_args": {"mode": "0644"}}},
            {"files": ["/etc/a"]}, id="the task's arguments fill what the invocation lacks",
        ),
        pytest.param(
            "ansible.builtin.copy", {}, {**OK, "dest": "/etc/from-result"},
            {"files": ["/etc/from-result"]}, id="a path only in the result",
        ),
        pytest.param(
            "ansible.builtin.systemd_service", {}, {**OK, "name": "cron.service"},
            {"units": ["cron.service"]}, id="a unit only in the result",
        ),
        pytest.param(
            "ansible.builtin.copy", {"dest": "/etc/a"},
            {"censored": "the output has been hidden due to no_log", "changed": True},
            {"files": ["/etc/a"]}, id="no_log: read from the arguments alone",
        ),
        pytest.param(
            "ansible.builtin.copy", {"dest": "/etc/a"}, {"skipped": True}, {}, id="skipped",
        ),
        pytest.param(
            "ansible.builtin.copy", {"dest": "/etc/a"}, {"failed": True, "msg": "x"}, {},
            id="failed",
        ),
        pytest.param("ansible.builtin.command", {"_raw_params": "true"}, OK, {}, id="unknown"),
        pytest.param("copy", {"dest": "/etc/a"}, OK, {}, id="not the resolved name"),
        pytest.param("ansible.builtin.copy", {"dest": "/etc/a"}, None, {}, id="no result"),
        pytest.param("ansible.builtin.systemd_service", {"daemon_reload": True}, OK, {},
                     id="a unit task without a unit"),
        pytest.param("community.docker.docker_container", {}, OK, {}, id="no container name"),
        pytest.param("ansible.posix.sysctl", {}, OK, {}, id="no setting name"),
        pytest.param("ansible.builtin.apt", {"upgrade": "dist"}, OK, {"packages": []},
                     id="apt without names"),
        # A check that needs a header (a key) is not kept to be passed again.
        pytest.param(
            "llmfleet.cluster.service_wait",
            {"url": "http://127.0.0.1:4000/health",
             "headers": {"Authorization": "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"}},
            OK, {}, id="service_wait with headers",
        ),
        pytest.param("llmfleet.cluster.service_wait", {"unit": "x"}, OK, {},
                     id="service_wait without a check"),
        pytest.param(
            "llmfleet.cluster.service_wait",
            {"command": ["probe"], "pattern": "ok", "min_matches": None},
            OK, {"probes": [{"command": ["probe"], "pattern": "ok", "min_matches": 1}]},
            id="service_wait: at least one match by default",
        ),
    ],
)  # fmt: skip
def test_what_a_result_says(
    action: str, args: dict[str, Any], result: Any, items: dict[str, Any]
) -> None:
    assert task_items(action, args, result) == items


def test_a_loop_is_read_item_by_item() -> None:
    result = {
        "changed": True,
        "results": [
            {**OK, "item": "a", "invocation": {"module_args": {"dest": "/etc/a"}}},
            {"skipped": True, "item": "b", "invocation": {"module_args": {"dest": "/etc/b"}}},
            {"failed": True, "item": "c", "invocation": {"module_args": {"dest": "/etc/c"}}},
            {**OK, "item": "d", "dest": "/etc/d"},
            {**OK, "item": "a again", "invocation": {"module_args": {"dest": "/etc/a"}}},
        ],
    }
    # The task's own arguments are not each item's: only the items' results are read.
    assert result_items("ansible.builtin.copy", {"dest": "/etc/{{ item }}"}, result) == {
        "files": ["/etc/a", "/etc/d"]
    }
    assert result_items("ansible.builtin.copy", {"dest": "/etc/x"}, OK) == {"files": ["/etc/x"]}


def test_merge_keeps_each_item_once_in_order() -> None:
    into: dict[str, list[Any]] = {"files": ["/a"]}
    merge(into, {"files": ["/b", "/a"], "containers": [{"name": "c", "engine": "docker"}]})
    merge(into, {"containers": [{"name": "c", "engine": "docker"}], "units": []})
    assert into == {
        "files": ["/a", "/b"],
        "containers": [{"name": "c", "engine": "docker"}],
        "units": [],
    }
