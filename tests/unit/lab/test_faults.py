"""lab/faults: when a group served again, from a stream of requests around a fault."""

from __future__ import annotations

from llmfleet.lab.faults import Sample, serving_again, settled


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
