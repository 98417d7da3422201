"""module_utils/_bench/record: stamps and names, the record, the previous-run lookup."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench import record as _bench_record

from tests.unit.plugins.bench_samples import (
    make_benchmark,
)


@pytest.mark.parametrize(
    ("started", "stamp"),
    [
        ("2026-11-22T23:10:00Z", "20261122T231000Z"),
        ("2026-11-22T23:10:00.734512Z", "20261122T231000Z"),
        ("2026-11-23T00:10:00+01:00", "20261122T231000Z"),
        ("2026-11-22T18:10:00-05:00", "20261122T231000Z"),
        ("2026-11-22T23:10:00", "20261122T231000Z"),  # no zone: UTC
        ("2026-01-02T03:04:05z", "20260102T030405Z"),
    ],
)
def test_run_stamp_is_utc(started: str, stamp: str) -> None:
    assert _bench_record.run_stamp(started) == stamp


@pytest.mark.parametrize("started", [None, "", "yesterday", "2026-13-01T00:00:00Z", 1732317000])
def test_run_stamp_rejects_what_is_not_a_time(started: Any) -> None:
    with pytest.raises(
        _bench_record.BenchReportError, match=r"benchmark\.started must be an ISO 8601"
    ):
        _bench_record.run_stamp(started)


@pytest.mark.parametrize(
    ("prefix", "ok"),
    [("bench", True), ("h100.tp2_run-1", True), ("", False), ("../x", False), ("a b", False)],
)
def test_file_stem_and_prefix_check(prefix: str, ok: bool) -> None:
    if ok:
        assert (
            _bench_record.file_stem(prefix, "2026-11-22T23:10:00Z") == f"{prefix}-20261122T231000Z"
        )
    else:
        with pytest.raises(_bench_record.BenchReportError, match="name_prefix"):
            _bench_record.file_stem(prefix, "2026-11-22T23:10:00Z")


@pytest.mark.parametrize(
    ("benchmark", "needle"),
    [
        ([], "benchmark must be the dict"),
        ({"scenarios": []}, "benchmark.started"),
        ({"started": "2026-11-22T23:10:00Z"}, "benchmark.scenarios must be a list"),
        ({"started": "2026-11-22T23:10:00Z", "scenarios": [{"x": 1}]}, "scenarios[0]"),
    ],
)
def test_validate_benchmark(benchmark: Any, needle: str) -> None:
    problems = _bench_record.validate_benchmark(benchmark)
    assert any(needle in p for p in problems), problems


def test_validate_benchmark_accepts_a_real_one() -> None:
    assert _bench_record.validate_benchmark(make_benchmark()) == []


# ---------------------------------------------------------------------------
# record
# ---------------------------------------------------------------------------
def test_record_layout_and_stable_json() -> None:
    bench = make_benchmark()
    extra = {"claude_code": {"mean": 12.3}, "transport": {"rdma": True}}
    record = _bench_record.build_record(
        bench, {"model": "m"}, extra, {"previous": None, "scenarios": {}}
    )
    assert list(record) == [
        "schema",
        "benchmark",
        "config",
        "claude_code",
        "transport",
        "comparison",
    ]
    assert record["schema"] == 1
    assert record["benchmark"] is bench
    text = _bench_record.record_json(record)
    assert text.endswith("}\n")
    assert json.loads(text) == record
    assert _bench_record.record_json(copy.deepcopy(record)) == text


@pytest.mark.parametrize("key", ["schema", "benchmark", "config", "comparison"])
def test_record_refuses_extra_keys_of_its_own(key: str) -> None:
    with pytest.raises(_bench_record.BenchReportError, match=f"rename {key}"):
        _bench_record.build_record(make_benchmark(), {}, {key: 1})


# ---------------------------------------------------------------------------
# previous run
# ---------------------------------------------------------------------------
def _write_record(directory: Path, name: str, started: str) -> Path:
    path = directory / name
    path.write_text(
        _bench_record.record_json(_bench_record.build_record(make_benchmark(started))),
        encoding="utf-8",
    )
    return path


def test_find_previous_picks_the_newest_older_readable_record(tmp_path: Path) -> None:
    oldest = _write_record(tmp_path, "bench-20261101T080000Z.json", "2026-11-01T08:00:00Z")
    older = _write_record(tmp_path, "bench-20261120T080000Z.json", "2026-11-20T08:00:00Z")
    (tmp_path / "bench-20261121T080000Z.json").write_text("{not json", encoding="utf-8")
    (tmp_path / "bench-20261122T080000Z.json").write_text("[1, 2]", encoding="utf-8")
    (tmp_path / "bench-20261122T090000Z.json").write_text('{"schema": 1}', encoding="utf-8")
    _write_record(tmp_path, "bench-20261122T231000Z.json", "2026-11-22T23:10:00Z")  # this run
    _write_record(tmp_path, "bench-20261123T080000Z.json", "2026-11-23T08:00:00Z")  # newer
    _write_record(tmp_path, "smoke-20261122T220000Z.json", "2026-11-22T22:00:00Z")  # other prefix
    _write_record(tmp_path, "bench-x-20261122T220000Z.json", "2026-11-22T22:00:00Z")
    _write_record(tmp_path, "bench-20261122T220000Z.json.bak", "2026-11-22T22:00:00Z")
    (tmp_path / "bench-20261122T210000Z.md").write_text("# x", encoding="utf-8")

    path, record, skipped = _bench_record.find_previous(str(tmp_path), "bench", "20261122T231000Z")
    assert path == str(older)
    assert record["benchmark"]["started"] == "2026-11-20T08:00:00Z"
    assert sorted(Path(p).name for p in skipped) == [
        "bench-20261121T080000Z.json",
        "bench-20261122T080000Z.json",
        "bench-20261122T090000Z.json",
    ]
    # an earlier run sees only what came before it
    path, _record, skipped = _bench_record.find_previous(str(tmp_path), "bench", "20261120T080000Z")
    assert path == str(oldest)
    assert skipped == []
    # the other prefix has its own history
    path, _record, _skipped = _bench_record.find_previous(
        str(tmp_path), "smoke", "20261123T000000Z"
    )
    assert Path(path).name == "smoke-20261122T220000Z.json"


@pytest.mark.parametrize("files", [[], ["bench-20261123T080000Z.json"]])
def test_find_previous_none(tmp_path: Path, files: list[str]) -> None:
    for name in files:
        _write_record(tmp_path, name, "2026-11-23T08:00:00Z")
    assert _bench_record.find_previous(str(tmp_path), "bench", "20261122T231000Z") == (
        None,
        None,
        [],
    )


def test_find_previous_in_a_missing_directory(tmp_path: Path) -> None:
    assert _bench_record.find_previous(str(tmp_path / "nope"), "bench", "20261122T231000Z") == (
        None,
        None,
        [],
    )
