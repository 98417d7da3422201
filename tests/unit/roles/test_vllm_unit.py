"""vllm_server's systemd unit, rendered from the role's template, defaults and vars for each
way it runs vLLM: every stop waits, escalates to SIGKILL after vllm_server_stop_timeout and
leaves nothing behind; every start first requires nothing of vLLM left and its port free."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from tests.unit.roles.localhost_play import play_on_localhost

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
STOP = "/usr/local/sbin/llmfleet-vllm-stop"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("unit")
    proc = play_on_localhost(HERE / "render_vllm_unit.yml", {"out_dir": str(out)})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return out


def directives(path: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            found.setdefault(key, []).append(value)
    return found


def test_native_unit_checks_before_each_start_and_systemd_escalates(rendered: Path) -> None:
    unit = directives(rendered / "native.service")
    assert unit["ExecStartPre"] == [f"{STOP} --unit llmfleet-vllm.service --port 8000 --timeout 20"]
    # systemd itself sends SIGKILL to every process of the unit after the stop timeout.
    assert unit["TimeoutStopSec"] == ["20"]
    assert "ExecStopPost" not in unit
    # The check may stop what an earlier start left: its start timeout covers that.
    assert int(unit["TimeoutStartSec"][0]) >= 20 + 30 + 10
    assert "pkill" not in (rendered / "native.service").read_text()


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_in_ray_unit_stops_vllm_inside_the_container_and_checks_before_each_start(
    rendered: Path, engine: str
) -> None:
    text = (rendered / f"in-ray-{engine}.service").read_text()
    unit = directives(rendered / f"in-ray-{engine}.service")
    assert "pkill" not in text
    # The same command before each start and after each stop, never with "-" (its failure
    # fails the unit); then, before vLLM starts, every node of the group in the Ray cluster,
    # asked inside the head's container (the head's address, Ray's port).
    stop, wait = unit["ExecStartPre"]
    assert [stop] == unit["ExecStopPost"]
    assert shlex.split(wait) == [
        "/usr/local/sbin/llmfleet-vllm-ray-wait", "--nodes", "2", "--timeout", "180", "--",
        f"/usr/bin/{engine}", "exec", "llmfleet-ray", "ray", "status", "--address",
        "10.0.0.1:6379",
    ]  # fmt: skip
    argv = shlex.split(stop)
    assert argv[0] == STOP
    pairs = list(zip(argv[1::2], argv[2::2], strict=True))
    assert pairs == [
        ("--engine", f"/usr/bin/{engine}"),
        ("--container", "llmfleet-ray"),
        ("--match", "vllm serve --config /etc/llmfleet/vllm/serve.yaml"),
        ("--match", "VLLM::"),
        ("--reap", "ray::RayWorkerWrapper"),
        ("--port", "8010"),
        ("--timeout", "45"),
    ]
    assert unit["ExecStart"][0].startswith(f"/usr/bin/{engine} exec ")
    # systemd waits for the script, which escalates itself after vllm_server_stop_timeout
    # (45), then waits up to 30 s for the killed processes and 10 s for the port.
    assert int(unit["TimeoutStopSec"][0]) >= 45 + 30 + 10
    # The stop's budget, then the wait for the Ray cluster (vllm_server_ray_wait_timeout).
    assert int(unit["TimeoutStartSec"][0]) >= 45 + 30 + 10 + 180


def test_a_vllm_container_stops_with_the_timeout_and_restarts_only_on_a_free_port() -> None:
    """No unit: the container's stop timeout is vllm_server_stop_timeout (every stop and
    restart by the engine uses it), and the role's restart is stop, port check, start."""
    main = yaml.safe_load((ROOT / "roles/vllm_server/tasks/main.yml").read_text())
    include = next(task for task in main if "ansible.builtin.include_role" in task)
    assert include["vars"]["gpu_container_stop_timeout"] == "{{ vllm_server_stop_timeout }}"
    for engine in ("docker", "podman"):
        tasks = yaml.safe_load((ROOT / f"roles/gpu_container/tasks/{engine}.yml").read_text())
        module = next(task for task in tasks if "stop_timeout" in str(task))
        args = next(value for key, value in module.items() if key.endswith("_container"))
        assert "gpu_container_stop_timeout" in args["stop_timeout"], engine
    handlers = yaml.safe_load((ROOT / "roles/vllm_server/handlers/main.yml").read_text())
    restart = [
        handler["ansible.builtin.command"]["argv"]
        for handler in handlers
        if handler.get("listen") == "Restart vLLM"
        and "not __vllm_server_uses_unit" in str(handler.get("when"))
    ]
    assert restart == [
        [
            "{{ vllm_server_container_engine }}",
            "stop",
            "-t",
            "{{ vllm_server_stop_timeout }}",
            "{{ vllm_server_container_name }}",
        ],
        [
            "{{ __vllm_server_stop }}",
            "--port",
            "{{ vllm_server_port }}",
            "--timeout",
            "{{ vllm_server_stop_timeout }}",
        ],
        ["{{ vllm_server_container_engine }}", "start", "{{ vllm_server_container_name }}"],
    ]
