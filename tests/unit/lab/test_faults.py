"""lab/faults: when a group served again, from a stream of requests around a fault."""

from __future__ import annotations

import pytest
from llmfleet_lab import fault_cases, faults
from llmfleet_lab.faults import Sample, serving_again, settled
from rich.console import Console


def stream(*statuses: int, start: float = 100.0) -> list[Sample]:
    return [Sample(start + i, start + i + 0.2, status) for i, status in enumerate(statuses)]


def test_serving_again_is_the_first_answer_after_the_last_failure() -> None:
    samples = stream(200, 200, 500, 0, 0, 200, 0, 200, 200)
    assert serving_again(samples, back_at=103.5) == 107.0


def test_a_fault_that_fails_nothing_serves_from_the_moment_it_was_back() -> None:
    assert serving_again(stream(200, 200, 200, 200), back_at=101.5) == 102.0


def test_a_stream_that_still_fails_has_not_served_again() -> None:
    assert serving_again(stream(200, 0, 0), back_at=100.5) is None


def test_settled_needs_the_observation_time_and_answers_in_a_row() -> None:
    samples = stream(200, 0, 200, 200, 200, 200, 200)
    assert not settled(samples, back_at=100.0, observe_s=30, answers=5)
    assert settled(samples, back_at=100.0, observe_s=5, answers=5)
    assert not settled(stream(200, 200, 200, 200, 0), back_at=100.0, observe_s=1, answers=5)


def test_a_case_that_waits_for_a_heal_is_not_over_before_that_heal() -> None:
    """The runaway allocation: vLLM answers until the memory guard kills it."""
    [hog] = [c for c in fault_cases.CASES if c.name == "memory_hog_rank_0"]
    [reboot] = [c for c in fault_cases.CASES if c.name == "reboot_rank_1"]
    assert not faults.healed(hog, [])
    assert not faults.healed(hog, [{"epoch": 1.0, "by": "probe"}])
    assert faults.healed(hog, [{"epoch": 1.0, "by": "memory guard"}])
    assert faults.healed(reboot, [])


class ScriptedLab(faults.Lab):
    """A lab whose shell commands are recorded, on a given serving path."""

    def __init__(self, serving_path: str) -> None:
        super().__init__("lab", Console())
        self._serving_path = serving_path
        self.commands: list[tuple[str, str]] = []

    def sh(self, node: str, script: str, *, check: bool = True, timeout: float = 120) -> str:
        self.commands.append((node, script))
        return ""


@pytest.mark.parametrize(
    ("case", "serving_path", "expected"),
    [
        ("sigkill_rank_1", "native",
         ("spark-2", "kill -9 $(systemctl show -p MainPID --value llmfleet-vllm)")),
        ("sigkill_rank_1", "ray-container", ("spark-2", "pkill --signal KILL -f RayWorkerProc")),
        ("ray_head_killed", "native", ("spark-1", "systemctl kill --signal=KILL llmfleet-ray")),
        # Its main process, as a crash ends it: Docker's restart policy skips `docker kill`.
        (
            "ray_head_killed",
            "ray-container",
            ("spark-1", "kill -KILL $(docker inspect --format '{{.State.Pid}}' llmfleet-ray)"),
        ),
    ],
)  # fmt: skip
def test_each_case_breaks_what_runs_on_the_labs_path(
    case: str, serving_path: str, expected: tuple[str, str]
) -> None:
    lab = ScriptedLab(serving_path)
    [chosen] = [c for c in fault_cases.CASES if c.name == case]
    chosen.inject(lab)
    assert lab.commands == [expected]


@pytest.mark.parametrize(
    ("serving_path", "vllm_pid"),
    [
        ("native", "vllm=$(systemctl show -p MainPID --value llmfleet-vllm)"),
        # the process in the Ray head container, not the unit's `docker exec` client
        ("ray-container", "vllm=$(pgrep -of 'bin/vllm serve --config')"),
    ],
)
def test_the_runaway_allocation_lives_as_long_as_rank_0s_vllm(
    serving_path: str, vllm_pid: str
) -> None:
    lab = ScriptedLab(serving_path)
    [hog] = [c for c in fault_cases.CASES if c.name == "memory_hog_rank_0"]
    hog.inject(lab)
    [(node, script)] = lab.commands
    assert node == "spark-1" and vllm_pid in script.splitlines(), script
