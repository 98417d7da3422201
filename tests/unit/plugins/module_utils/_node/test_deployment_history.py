"""module_utils/_node/deployment_history: the history file read (and refused, saying why), entries
made with a UTC time, what runs now read back through ok, rolled-back and failed switches,
the images to keep, and the oldest entries dropped."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._node.deployment_history import (
    HISTORY_VERSION,
    HistoryError,
    appended,
    current_state,
    images_to_keep,
    new_entry,
    parse_history,
    render,
    served_state_problem,
    utc_timestamp,
)

HEX = "0123456789abcdef" * 4
V10 = {
    "image": f"vllm/vllm-openai:v0.10.2@sha256:{'a' * 64}",
    "profile": "p",
    "model_revision": "r1",
}
V11 = {"image": f"vllm/vllm-openai:v0.11.0@sha256:{HEX}", "profile": "p", "model_revision": "r1"}
V12 = {
    "image": f"vllm/vllm-openai:v0.12.0@sha256:{'c' * 64}",
    "profile": "p",
    "model_revision": "r2",
}
NATIVE = {"image": None, "profile": "p", "model_revision": "r1"}
MOMENT = datetime(2025, 11, 24, 7, 13, 5, 123456, tzinfo=UTC)


def entry(
    action: str, before: dict[str, Any] | None, after: dict[str, Any], outcome: str = "ok"
) -> dict[str, Any]:
    return new_entry(MOMENT, action, before, after, outcome=outcome)


def test_an_entry_holds_the_switch_and_the_time_in_utc_to_the_second() -> None:
    made = new_entry(MOMENT, "upgrade", V10, V11, outcome="rolled back", reason="no /health")
    assert made == {
        "time": "2025-11-24T07:13:05Z",
        "action": "upgrade",
        "from": V10,
        "to": V11,
        "outcome": "rolled back",
        "reason": "no /health",
    }
    assert new_entry(MOMENT, "up", None, NATIVE)["from"] is None


def test_a_time_in_another_zone_is_written_in_utc() -> None:
    paris = datetime(2025, 11, 24, 8, 13, 5, tzinfo=timezone(timedelta(hours=1)))
    assert utc_timestamp(paris) == "2025-11-24T07:13:05Z"


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (("deploy", None, V11), "action 'deploy' is not one of up, upgrade, rollback"),
        (("up", None, None), "to_state is None, not a mapping"),
        (("up", "v0.10", V11), "from_state is 'v0.10', not a mapping"),
        (("up", None, {"image": 3}), r"to_state.image is 3: each value is text or null"),
        (("up", None, {"image": ["a"]}), r"to_state.image is \['a'\]"),
    ],
)
def test_an_entry_that_is_not_one_says_why(args: tuple[Any, ...], why: str) -> None:
    with pytest.raises(HistoryError, match=why):
        new_entry(MOMENT, *args)


def test_an_outcome_that_is_not_one_is_refused() -> None:
    with pytest.raises(HistoryError, match="outcome 'done' is not one of ok, rolled back, failed"):
        new_entry(MOMENT, "up", None, V11, outcome="done")


def test_any_keys_of_text_or_null_are_a_served_state() -> None:
    assert served_state_problem({"image": None, "extra": "x"}, "to") is None
    assert served_state_problem({}, "to") is None
    assert served_state_problem({1: "x"}, "to") == "to has the key 1, not text"


def test_a_missing_or_empty_file_is_no_entries_and_a_written_one_reads_back() -> None:
    assert parse_history(None) == []
    assert parse_history("") == []
    assert parse_history(" \n") == []
    entries = [entry("up", None, V11), entry("upgrade", V11, V12, "failed")]
    text = render(entries)
    assert json.loads(text) == {"version": HISTORY_VERSION, "entries": entries}
    assert parse_history(text) == entries
    assert render(parse_history(text)) == text


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("not json", "it is no JSON"),
        ("[]", "it is no history of version 1"),
        ('{"version": 2, "entries": []}', "it is no history of version 1"),
        ('{"version": 1}', "its entries are not a list"),
        ('{"version": 1, "entries": [3]}', "its entry 1 is no history entry: it is int"),
        (
            json.dumps({"version": 1, "entries": [{"time": "t", "action": "up", "to": {}}]}),
            "its entry 1 is no history entry: its outcome is not one of ok, rolled back, failed",
        ),
        (
            json.dumps(
                {
                    "version": 1,
                    "entries": [
                        {"time": "t", "action": "up", "to": {}, "outcome": "ok"},
                        {"time": "t", "action": "go", "to": {}, "outcome": "ok"},
                    ],
                }
            ),
            "its entry 2 is no history entry: its action is not one of up, upgrade, rollback",
        ),
        (
            json.dumps(
                {"version": 1, "entries": [{"time": 1, "action": "up", "to": {}, "outcome": "ok"}]}
            ),
            "its time is not text",
        ),
        (
            json.dumps(
                {
                    "version": 1,
                    "entries": [
                        {"time": "t", "action": "up", "to": {}, "outcome": "ok", "reason": 2}
                    ],
                }
            ),
            "its reason is neither text nor null",
        ),
        (
            json.dumps(
                {
                    "version": 1,
                    "entries": [{"time": "t", "action": "up", "to": "x", "outcome": "ok"}],
                }
            ),
            "its to is 'x', not a mapping",
        ),
        (
            json.dumps(
                {
                    "version": 1,
                    "entries": [
                        {"time": "t", "action": "up", "from": [], "to": {}, "outcome": "ok"}
                    ],
                }
            ),
            r"its from is \[\], not a mapping",
        ),
    ],
)
def test_a_file_that_is_no_history_says_why(text: str, why: str) -> None:
    with pytest.raises(HistoryError, match=why):
        parse_history(text)


def test_nothing_runs_where_nothing_was_recorded() -> None:
    assert current_state([]) == (None, False)


def test_an_ok_switch_serves_its_to() -> None:
    entries = [entry("up", None, V10), entry("upgrade", V10, V11)]
    assert current_state(entries) == (V11, False)


def test_a_rolled_back_upgrade_serves_its_from_again() -> None:
    entries = [entry("up", None, V10), entry("upgrade", V10, V11, "rolled back")]
    assert current_state(entries) == (V10, False)
    # A first deployment rolled back leaves nothing running.
    assert current_state([entry("up", None, V10, "rolled back")]) == (None, False)


def test_a_failed_switch_is_passed_over_and_the_newest_makes_it_uncertain() -> None:
    entries = [entry("up", None, V10), entry("upgrade", V10, V11, "failed")]
    assert current_state(entries) == (V10, True)
    entries.append(entry("rollback", None, V10))
    assert current_state(entries) == (V10, False)
    entries.append(entry("upgrade", V10, V12, "failed"))
    entries.append(entry("upgrade", V10, V12, "failed"))
    assert current_state(entries) == (V10, True)
    assert current_state([entry("up", None, V10, "failed")]) == (None, True)


def test_images_to_keep_are_current_then_the_ok_switches_newest_first() -> None:
    entries = [
        entry("up", None, V10),
        entry("upgrade", V10, V11),
        entry("upgrade", V11, V12, "rolled back"),
    ]
    current, uncertain = current_state(entries)
    assert (current, uncertain) == (V11, False)
    assert images_to_keep(current, entries, 3) == [V11["image"], V10["image"]]
    assert images_to_keep(current, entries, 1) == [V11["image"]]


def test_images_to_keep_leave_out_native_deployments_and_failed_switches() -> None:
    entries = [
        entry("up", None, V10),
        entry("upgrade", V10, NATIVE),
        entry("upgrade", NATIVE, V12, "failed"),
    ]
    current, uncertain = current_state(entries)
    assert (current, uncertain) == (NATIVE, True)
    assert images_to_keep(current, entries, 3) == [V10["image"]]
    assert images_to_keep(None, [], 3) == []


def test_images_to_keep_lists_each_image_once() -> None:
    entries = [
        entry("up", None, V10),
        entry("upgrade", V10, V11),
        entry("rollback", V11, V10),
        entry("upgrade", V10, V12),
    ]
    assert images_to_keep(V12, entries, 5) == [V12["image"], V10["image"], V11["image"]]


def test_appending_drops_the_oldest_beyond_keep() -> None:
    first, second, third = (entry("up", None, state) for state in (V10, V11, V12))
    assert appended([first], second, 5) == [first, second]
    assert appended([first, second], third, 2) == [second, third]
    assert appended([first, second], third, 1) == [third]
