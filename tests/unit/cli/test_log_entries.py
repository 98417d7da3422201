"""llmfleet.log_entries: journal JSON and timestamped container output become one kind of entry,
merged in time order across hosts; --since as a duration or a date/time."""

from __future__ import annotations

import json

import pytest

from llmfleet.host_access import HostAccess
from llmfleet.log_entries import (
    Entry,
    container_entries,
    container_time,
    format_time,
    journal_entries,
    last_cursor,
    merged,
    parse_since,
    plain_line,
)
from llmfleet.logs import follow_commands

NOW = 1_795_550_000.0


def journal_line(micros: int, unit: str, message: object, cursor: str) -> str:
    return json.dumps(
        {
            "__REALTIME_TIMESTAMP": str(micros),
            "__CURSOR": cursor,
            "_SYSTEMD_UNIT": unit,
            "MESSAGE": message,
            "PRIORITY": "6",
        }
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10m", NOW - 600),
        ("2h", NOW - 7200),
        ("1h30m", NOW - 5400),
        ("1d", NOW - 86400),
        ("45s", NOW - 45),
        ("2026-11-24", 1_795_478_400.0),
        ("2026-11-24T10:00", 1_795_514_400.0),
        ("2026-11-24 10:00:00", 1_795_514_400.0),
        ("2026-11-24T11:00:00+01:00", 1_795_514_400.0),
    ],
)
def test_since_is_a_duration_ago_or_a_utc_date_time(text: str, expected: float) -> None:
    assert parse_since(text, NOW) == expected


def test_a_since_that_is_neither_says_what_is_expected() -> None:
    with pytest.raises(ValueError, match=r"'yesterday' is neither a duration \(10m"):
        parse_since("yesterday", NOW)


def test_journal_json_gives_time_unit_message_and_cursor() -> None:
    text = "\n".join(
        [
            journal_line(1_795_549_000_123_456, "llmfleet-vllm.service", "Started.", "c1"),
            # A message that is not UTF-8: journalctl writes its bytes.
            journal_line(1_795_549_001_000_000, "llmfleet-ray.service", [104, 105, 255], "c2"),
            "not json",
            "",
        ]
    )
    first, second = journal_entries("spark-1", text)
    assert first == Entry(1_795_549_000.123456, "spark-1", "llmfleet-vllm", "Started.", "c1")
    assert (second.source, second.message) == ("llmfleet-ray", "hi\ufffd")


def test_container_lines_carry_docker_and_podman_stamps() -> None:
    docker = container_time("2026-11-24T10:00:00.123456789Z INFO ready")
    podman = container_time("2026-11-24T11:00:00.5+01:00 INFO ready")
    assert docker == (1_795_514_400.123456, "INFO ready")
    assert podman == (1_795_514_400.5, "INFO ready")
    assert container_time("no stamp") is None
    # A line without a stamp (a traceback's continuation) keeps the time before it.
    entries = container_entries(
        "spark-1", "llmfleet-vllm", ["2026-11-24T10:00:00Z Traceback:", "  File x"]
    )
    assert [entry.time for entry in entries] == [1_795_514_400.0, 1_795_514_400.0]


def test_hosts_merge_in_time_order_and_the_last_cursor_is_the_hosts_newest() -> None:
    spark_1 = {
        "host": "spark-1",
        "journal": "\n".join(
            [
                journal_line(1_000_000, "llmfleet-vllm.service", "a", "s1-1"),
                journal_line(3_000_000, "llmfleet-vllm.service", "c", "s1-2"),
            ]
        ),
        "containers": [
            {"item": "llmfleet-ray", "rc": 0, "stdout_lines": ["1970-01-01T00:00:02Z b"],
             "stderr_lines": ["1970-01-01T00:00:04Z d"]},
            {"item": "llmfleet-vllm", "rc": 1, "stdout_lines": [], "stderr_lines": ["no such"]},
        ],
    }  # fmt: skip
    spark_2 = {
        "host": "spark-2",
        "journal": journal_line(2_500_000, "llmfleet-vllm.service", "b2", "s2-1"),
        "containers": [],
    }
    entries = merged([spark_1, spark_2])
    assert [(e.host, e.message) for e in entries] == [
        ("spark-1", "a"),
        ("spark-1", "b"),
        ("spark-2", "b2"),
        ("spark-1", "c"),
        ("spark-1", "d"),
    ]
    assert last_cursor(entries, "spark-1") == "s1-2"
    assert last_cursor(entries, "spark-3") is None
    assert plain_line(entries[0], 8) == "1970-01-01T00:00:01.000Z spark-1  llmfleet-vllm | a"
    assert format_time(0.5) == "1970-01-01T00:00:00.500Z"


MAC = {
    "host": "mac-studio-1",
    "journal": None,
    "unit_args": [],
    "containers": [],
    "files": [
        {
            "item": "vllm-mlx",
            "path": "/Users/dev/Library/Logs/llmfleet/vllm-mlx.log",
            "rc": 0,
            "stdout_lines": [
                "1970-01-01T00:00:01.500000Z INFO loading the model",
                "1970-01-01T00:00:05.000000Z INFO Uvicorn running on http://0.0.0.0:8000",
            ],
        }
    ],
}


def test_a_macs_log_file_merges_by_its_launchers_stamps_and_since_drops_older_lines() -> None:
    spark_1 = {
        "host": "spark-1",
        "journal": journal_line(3_000_000, "llmfleet-vllm.service", "c", "s1-1"),
        "containers": [],
    }
    entries = merged([spark_1, MAC])
    assert [(e.host, e.source, e.message) for e in entries] == [
        ("mac-studio-1", "vllm-mlx", "INFO loading the model"),
        ("spark-1", "llmfleet-vllm", "c"),
        ("mac-studio-1", "vllm-mlx", "INFO Uvicorn running on http://0.0.0.0:8000"),
    ]
    # The journal was read --since already; the file is cut here.
    assert [e.message for e in merged([MAC], since=2.0)] == [
        "INFO Uvicorn running on http://0.0.0.0:8000"
    ]
    # A log file that is not there yet (never started) gives nothing.
    missing = {**MAC, "files": [{**MAC["files"][0], "rc": 1, "stdout_lines": []}]}
    assert merged([missing]) == []


def test_following_a_mac_tails_its_log_file_and_no_journal() -> None:
    access = HostAccess("mac-studio-1", ("ssh", "mac-studio-1"), ())
    assert follow_commands(MAC, merged([MAC]), access) == [
        (
            "vllm-mlx",
            ["ssh", "mac-studio-1", "tail -n 0 -F /Users/dev/Library/Logs/llmfleet/vllm-mlx.log"],
        )
    ]
    spark = {"host": "spark-1", "journal": "", "unit_args": ["--unit=llmfleet-vllm.service"]}
    ((source, argv),) = follow_commands(spark, [], HostAccess("spark-1", (), ()))
    assert source == "journal" and argv[:2] == ["journalctl", "--no-pager"]
    assert argv[-2:] == ["--lines=0", "--unit=llmfleet-vllm.service"]
