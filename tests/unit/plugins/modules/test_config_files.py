"""modules/config_files (and its action): folders and files written in one call, with their
modes, only when they differ; a secret kept out of diffs and output; a validation that
refuses keeps the old file; check mode writes nothing; and through ansible-playbook, a
template renders byte for byte as ansible.builtin.template renders it."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmfleet.cluster.plugins.modules import config_files

from tests.unit.plugins.conftest import REPO

RunModule = Callable[..., tuple[int, dict[str, Any]]]
SECRET = "VLLM_API_KEY=sk-not-for-any-log"
LOAD_YAML = "import sys, yaml; yaml.safe_load(open(sys.argv[1]))"


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def service_args(root: Path, **extra: Any) -> dict[str, Any]:
    return {
        "directories": [{"path": str(root / "etc"), "mode": "0700"}],
        "files": [
            {"dest": str(root / "etc" / "serve.yaml"), "content": "port: 8000\n", "mode": "0644"},
            {"dest": str(root / "etc" / "vllm.env"), "mode": "0600", "diff": False},
        ],
        # Where the action plugin moves the content of a file with diff false.
        "secret_contents": {"1": f"{SECRET}\n"},
        **extra,
    }


def test_writes_folders_and_files_once(tmp_path: Path, run_module: RunModule) -> None:
    rc, first = run_module(config_files, service_args(tmp_path))
    assert rc == 0, first
    assert first["changed"] is True
    assert first["changed_directories"] == [str(tmp_path / "etc")]
    assert first["changed_files"] == [str(tmp_path / "etc" / n) for n in ("serve.yaml", "vllm.env")]
    assert (tmp_path / "etc" / "serve.yaml").read_text() == "port: 8000\n"
    assert (mode_of(tmp_path / "etc"), mode_of(tmp_path / "etc" / "serve.yaml")) == (0o700, 0o644)
    assert mode_of(tmp_path / "etc" / "vllm.env") == 0o600
    # Nothing left beside the files (the temporary files were renamed over them).
    assert sorted(p.name for p in (tmp_path / "etc").iterdir()) == ["serve.yaml", "vllm.env"]
    written = (tmp_path / "etc" / "serve.yaml").stat().st_mtime_ns

    rc, again = run_module(config_files, service_args(tmp_path))
    assert rc == 0, again
    assert (again["changed"], again["changed_files"], again["changed_directories"]) == (
        False,
        [],
        [],
    )
    assert (tmp_path / "etc" / "serve.yaml").stat().st_mtime_ns == written


def test_a_change_shows_its_diff_but_never_the_secret(
    tmp_path: Path, run_module: RunModule, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run_module(config_files, service_args(tmp_path))[0] == 0
    args = service_args(tmp_path, _ansible_diff=True)
    args["files"][0]["content"] = "port: 8001\n"
    args["secret_contents"] = {"1": f"{SECRET}-rotated\n"}
    logged: list[str] = []
    monkeypatch.setattr(AnsibleModule, "log", lambda _, msg, log_args=None: logged.append(msg))
    rc, result = run_module(config_files, args)
    assert rc == 0, result
    assert result["changed_files"] == [f["dest"] for f in args["files"]]
    assert result["diff"] == [
        {
            "before_header": args["files"][0]["dest"],
            "after_header": args["files"][0]["dest"],
            "before": "port: 8000\n",
            "after": "port: 8001\n",
        }
    ]
    assert SECRET not in json.dumps(result)
    # The invocation the module logs on the host (its journal) names the file, not the secret.
    assert any("serve.yaml" in line for line in logged), logged
    assert not any(SECRET in line for line in logged), logged
    assert (tmp_path / "etc" / "vllm.env").read_text() == f"{SECRET}-rotated\n"


def test_only_the_mode_changed_is_a_change_without_a_diff(
    tmp_path: Path, run_module: RunModule
) -> None:
    assert run_module(config_files, service_args(tmp_path))[0] == 0
    (tmp_path / "etc" / "serve.yaml").chmod(0o666)
    rc, result = run_module(config_files, service_args(tmp_path, _ansible_diff=True))
    assert rc == 0, result
    assert (result["changed_files"], result["diff"]) == ([str(tmp_path / "etc" / "serve.yaml")], [])
    assert mode_of(tmp_path / "etc" / "serve.yaml") == 0o644


def test_a_refused_validation_keeps_the_old_file(tmp_path: Path, run_module: RunModule) -> None:
    assert run_module(config_files, service_args(tmp_path))[0] == 0
    args = service_args(tmp_path)
    args["files"][0]["content"] = "port: [\n"
    args["files"][0]["validate"] = f"{sys.executable} -c '{LOAD_YAML}' %s"
    rc, result = run_module(config_files, args)
    assert rc == 1
    assert result["msg"].startswith(f"{tmp_path / 'etc' / 'serve.yaml'}: the new content fails")
    assert "the old file is kept" in result["msg"] and "yaml" in result["msg"]
    assert (tmp_path / "etc" / "serve.yaml").read_text() == "port: 8000\n"
    assert sorted(p.name for p in (tmp_path / "etc").iterdir()) == ["serve.yaml", "vllm.env"]


def test_a_validation_without_the_path_is_refused(tmp_path: Path, run_module: RunModule) -> None:
    args = service_args(tmp_path)
    args["files"][0]["validate"] = "true"
    rc, result = run_module(config_files, args)
    assert rc == 1
    assert "validate must contain %s" in result["msg"]


def test_check_mode_writes_nothing(tmp_path: Path, run_module: RunModule) -> None:
    rc, result = run_module(config_files, service_args(tmp_path, _ansible_check_mode=True))
    assert rc == 0, result
    assert result["changed"] is True
    assert len(result["changed_files"]) == 2
    assert not (tmp_path / "etc").exists()
    # The new file's diff all the same (its folder would be created first).
    rc, result = run_module(
        config_files, service_args(tmp_path, _ansible_check_mode=True, _ansible_diff=True)
    )
    assert [(d["before"], d["after"]) for d in result["diff"]] == [("", "port: 8000\n")]


def test_a_file_in_a_missing_folder_is_refused(tmp_path: Path, run_module: RunModule) -> None:
    args = {"files": [{"dest": str(tmp_path / "nowhere" / "a.conf"), "content": "x\n"}]}
    rc, result = run_module(config_files, args)
    assert rc == 1
    folder = tmp_path / "nowhere"
    assert result["msg"] == f"{folder / 'a.conf'}: its folder {folder} does not exist"


def test_a_new_file_without_a_mode_is_owner_only(tmp_path: Path, run_module: RunModule) -> None:
    args = {"files": [{"dest": str(tmp_path / "a.conf"), "content": "x\n"}]}
    assert run_module(config_files, args)[0] == 0
    assert mode_of(tmp_path / "a.conf") == 0o600


def test_a_template_renders_as_ansible_builtin_template_does(tmp_path: Path) -> None:
    """Both tasks in one play on this machine: the same bytes, and the second task (ours)
    finds nothing to change where the builtin wrote first."""
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "unit.j2").write_text(
        textwrap.dedent(
            """\
            # {{ ansible_managed }}
            [Service]
            {% for name, value in env.items() %}
            Environment={{ name }}={{ value }}
            {% endfor %}
            ExecStart=/usr/bin/true {{ port }}
            """
        )
    )
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {"env": {"A": "1", "B": "two"}, "port": 8000},
            "tasks": [
                {
                    "ansible.builtin.template": {
                        "src": "unit.j2",
                        "dest": str(tmp_path / "builtin.service"),
                        "mode": "0644",
                    }
                },
                {
                    "llmfleet.cluster.config_files": {
                        "files": [
                            *(
                                {"src": "unit.j2", "dest": str(tmp_path / name), "mode": "0644"}
                                for name in ("ours.service", "builtin.service")
                            ),
                            {"content": SECRET, "dest": str(tmp_path / "key.env"), "diff": False},
                        ]
                    },
                    "register": "written",
                },
                {"ansible.builtin.debug": {"var": "written"}},
            ],
        }
    ]
    (tmp_path / "play.yml").write_text(json.dumps(play))
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
    }
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i", "localhost,", "-c", "local",
            "-e", f"ansible_python_interpreter={sys.executable}",
            str(tmp_path / "play.yml"),
        ],
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (tmp_path / "ours.service").read_bytes() == (tmp_path / "builtin.service").read_bytes()
    rendered = (tmp_path / "ours.service").read_text()
    assert "Environment=B=two\nExecStart=/usr/bin/true 8000\n" in rendered
    ours = json.loads(proc.stdout)["plays"][0]["tasks"][1]["hosts"]["localhost"]
    assert ours["changed_files"] == [str(tmp_path / name) for name in ("ours.service", "key.env")]
    assert (tmp_path / "key.env").read_text() == SECRET
    # The invocation names the content's size, not the content; the secret went where the
    # module never logs it (its no_log option).
    invoked = ours["invocation"]["module_args"]["files"]
    assert [entry["content"] for entry in invoked] == [f"({len(rendered)} characters)"] * 2 + [None]
    assert ours["invocation"]["module_args"]["secret_contents"] == {
        "2": "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"
    }
    assert SECRET not in proc.stdout
