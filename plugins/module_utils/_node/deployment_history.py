# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""The history of llmfleet.cluster.deployment_history: every switch of what a node serves
(``up``, ``upgrade``, ``rollback``) with its outcome, oldest first; what runs now, read back
from it; and the images worth keeping on the node.

Standard library only: it runs on the managed hosts.
"""

from __future__ import annotations

import json
from datetime import timezone

HISTORY_VERSION = 1
# heal: the serving probe restarted what serves (or saw it restarted); what serves is the same.
ACTIONS = ("up", "upgrade", "rollback", "heal")
OUTCOMES = ("ok", "rolled back", "failed")
EXPECTED = (
    '{"version": 1, "entries": [...]}, each entry a mapping of time, action, from, to,'
    " outcome and reason"
)


class HistoryError(ValueError):
    """A history file, or a state to record, is not what it should be."""


def served_state_problem(state, what):
    """Why ``state`` (a mapping of what is served) is not one, or None when it is: a mapping
    of text to text or null (``image`` null for a native deployment)."""
    if not isinstance(state, dict):
        return f"{what} is {state!r}, not a mapping of what is served (image, profile, ...)"
    for key, value in state.items():
        if not isinstance(key, str):
            return f"{what} has the key {key!r}, not text"
        if value is not None and not isinstance(value, str):
            return f"{what}.{key} is {value!r}: each value is text or null"
    return None


def _entry_problem(entry):
    if not isinstance(entry, dict):
        return f"it is {type(entry).__name__}, not a mapping"
    checks = [
        (not isinstance(entry.get("time"), str), "its time is not text"),
        (entry.get("action") not in ACTIONS, f"its action is not one of {', '.join(ACTIONS)}"),
        (
            entry.get("outcome") not in OUTCOMES,
            f"its outcome is not one of {', '.join(OUTCOMES)}",
        ),
        (
            entry.get("reason") is not None and not isinstance(entry.get("reason"), str),
            "its reason is neither text nor null",
        ),
    ]
    why = next((why for failed, why in checks if failed), None)
    if why:
        return why
    if entry.get("from") is not None:
        why = served_state_problem(entry["from"], "its from")
    return why or served_state_problem(entry.get("to"), "its to")


def parse_history(text):
    """The entries of a history file's text, oldest first: none for a missing (None) or empty
    file. Raises HistoryError saying what is wrong with any other file."""
    if text is None or not text.strip():
        return []
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise HistoryError(f"it is no JSON ({exc})") from exc
    if not isinstance(document, dict) or document.get("version") != HISTORY_VERSION:
        raise HistoryError(f"it is no history of version {HISTORY_VERSION}")
    entries = document.get("entries")
    if not isinstance(entries, list):
        raise HistoryError("its entries are not a list")
    for number, entry in enumerate(entries, start=1):
        why = _entry_problem(entry)
        if why:
            raise HistoryError(f"its entry {number} is no history entry: {why}")
    return entries


def utc_timestamp(moment):
    """``moment`` (an aware datetime) in UTC as ISO 8601 to the second, with a Z."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_entry(moment, action, from_state, to_state, *, outcome="ok", reason=None):
    """One entry of the history; ``from_state`` None where nothing was served before.
    Raises HistoryError for an action, outcome or state that is not one."""
    if action not in ACTIONS:
        raise HistoryError(f"the action {action!r} is not one of {', '.join(ACTIONS)}")
    if outcome not in OUTCOMES:
        raise HistoryError(f"the outcome {outcome!r} is not one of {', '.join(OUTCOMES)}")
    why = (
        served_state_problem(from_state, "from_state") if from_state is not None else None
    ) or served_state_problem(to_state, "to_state")
    if why:
        raise HistoryError(why)
    return {
        "time": utc_timestamp(moment),
        "action": action,
        "from": None if from_state is None else dict(from_state),
        "to": dict(to_state),
        "outcome": outcome,
        "reason": reason,
    }


def current_state(entries):
    """``(current, uncertain)``: what the node serves after ``entries``, and whether the newest
    entry failed (then what runs is unknown, and ``current`` is what ran before it).

    Newest to oldest: an entry that went ok serves its ``to``; one rolled back serves its
    ``from`` again; a failed one is passed over. None where no entry says."""
    uncertain = bool(entries) and entries[-1].get("outcome") == "failed"
    for entry in reversed(entries):
        if entry.get("outcome") == "ok":
            return entry.get("to"), uncertain
        if entry.get("outcome") == "rolled back":
            return entry.get("from"), uncertain
    return None, uncertain


def images_to_keep(current, entries, keep):
    """The distinct images (not null) of ``current``, then of the ``to`` and ``from`` of each
    entry that went ok, newest first: at most ``keep`` of them."""
    states = [current]
    for entry in reversed(entries):
        if entry.get("outcome") == "ok":
            states.extend([entry.get("to"), entry.get("from")])
    images = []
    for state in states:
        image = state.get("image") if isinstance(state, dict) else None
        if image and image not in images:
            images.append(image)
    return images[: max(keep, 0)]


def appended(entries, entry, keep):
    """The entries with ``entry`` last, the oldest dropped beyond ``keep``."""
    return [*entries, entry][-keep:] if keep > 0 else []


def render(entries):
    """The history file's text: stable (sorted keys), one entry after the other."""
    document = {"version": HISTORY_VERSION, "entries": entries}
    return json.dumps(document, indent=1, sort_keys=True) + "\n"
