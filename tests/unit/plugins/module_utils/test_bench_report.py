"""module_utils/_bench_report: stamps, percent changes and verdicts, the comparison, the
markdown, the previous-run lookup and the plot.

``make_benchmark`` / ``make_scenario`` build benchmarks in the shape llm_benchmark returns;
tests/unit/plugins/modules/test_bench_report.py uses them too.
"""

from __future__ import annotations

import copy
import datetime
import json
import struct
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils import _bench_report as br

STAT_KEYS = ("mean", "p50", "p90", "p99", "min", "max")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def stats(p50: float | None, p90: float | None = None, p99: float | None = None) -> dict:
    """A stats dict; all None when p50 is None (no successful request)."""
    if p50 is None:
        return dict.fromkeys(STAT_KEYS)
    p90 = p50 * 1.2 if p90 is None else p90
    p99 = p90 * 1.1 if p99 is None else p99
    return {"mean": p50, "p50": p50, "p90": p90, "p99": p99, "min": p50 * 0.8, "max": p99}


def make_scenario(
    name: str,
    *,
    warmup: bool = False,
    concurrency: int = 4,
    requests: int = 16,
    errors: int = 0,
    ttft: float | None = 0.212,
    latency: float | None = 1.62,
    out_rate: float | None = 78.4,
    decode_rate: float | None = 21.2,
    req_rate: float | None = 2.45,
) -> dict[str, Any]:
    return {
        "name": name,
        "warmup": warmup,
        "concurrency": concurrency,
        "requests": requests,
        "prompt_tokens_target": 64,
        "max_tokens": 32,
        "ok": requests - errors,
        "errors": errors,
        "error_samples": ["HTTP 503: overloaded"] if errors else [],
        "duration_s": 6.5,
        "ttft_s": stats(ttft),
        "latency_s": stats(latency),
        "tpot_s": stats(None if latency is None else 0.047),
        "prompt_tokens": 1040 if requests - errors else 0,
        "output_tokens": 512 if requests - errors else 0,
        "output_tokens_per_s": out_rate,
        "decode_tokens_per_s": decode_rate,
        "requests_per_s": req_rate,
    }


def make_benchmark(started: str = "2026-11-22T23:10:00Z", **short_c4: Any) -> dict[str, Any]:
    """warmup (warm-up), short_c4 (overridable) and long_c8."""
    return {
        "url": "http://10.0.0.1:8000",
        "model": "llmfleet-tiny",
        "api": "openai-chat",
        "started": started,
        "finished": (br.parse_time(started) + datetime.timedelta(minutes=4)).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        ),
        "ignore_eos": True,
        "tokens_per_word": 1.3,
        "scenarios": [
            make_scenario(
                "warmup",
                warmup=True,
                concurrency=1,
                requests=2,
                ttft=0.2,
                latency=1.0,
                out_rate=20.6,
                decode_rate=11.0,
                req_rate=0.64,
            ),
            make_scenario("short_c4", **short_c4),
            make_scenario(
                "long_c8",
                concurrency=8,
                requests=32,
                ttft=0.0456,
                latency=3.2,
                out_rate=160.0,
                decode_rate=50.0,
                req_rate=2.5,
            ),
        ],
    }


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk (the first chunk, right after the signature)."""
    assert data[:8] == PNG_SIGNATURE
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR"
    assert length == 13
    return struct.unpack(">II", data[16:24])


# ---------------------------------------------------------------------------
# stamps and names
# ---------------------------------------------------------------------------
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
    assert br.run_stamp(started) == stamp


@pytest.mark.parametrize("started", [None, "", "yesterday", "2026-13-01T00:00:00Z", 1732317000])
def test_run_stamp_rejects_what_is_not_a_time(started: Any) -> None:
    with pytest.raises(br.BenchReportError, match=r"benchmark\.started must be an ISO 8601"):
        br.run_stamp(started)


@pytest.mark.parametrize(
    ("prefix", "ok"),
    [("bench", True), ("h100.tp2_run-1", True), ("", False), ("../x", False), ("a b", False)],
)
def test_file_stem_and_prefix_check(prefix: str, ok: bool) -> None:
    if ok:
        assert br.file_stem(prefix, "2026-11-22T23:10:00Z") == f"{prefix}-20261122T231000Z"
    else:
        with pytest.raises(br.BenchReportError, match="name_prefix"):
            br.file_stem(prefix, "2026-11-22T23:10:00Z")


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
    problems = br.validate_benchmark(benchmark)
    assert any(needle in p for p in problems), problems


def test_validate_benchmark_accepts_a_real_one() -> None:
    assert br.validate_benchmark(make_benchmark()) == []


# ---------------------------------------------------------------------------
# percent change and verdicts
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("previous", "current", "change"),
    [
        (100, 110, 10.0),
        (0.2, 0.1, -50.0),
        (0.212, 0.212, 0.0),
        (3, 0, -100.0),
        (75.0, 78.4, 4.53),
        (0, 5, None),
        (0, 0, None),
        (None, 5, None),
        (5, None, None),
        (None, None, None),
        (True, 2, None),  # a bool is not a number here
    ],
)
def test_percent_change(previous: Any, current: Any, change: float | None) -> None:
    assert br.percent_change(previous, current) == change


@pytest.mark.parametrize(
    ("previous", "current", "time_verdict", "rate_verdict"),
    [
        (100, 125, "worse", "better"),  # went up: slower for a time, faster for a rate
        (100, 80, "better", "worse"),
        (100, 102, "same", "same"),  # the 2% boundary is still "same"
        (100, 98, "same", "same"),
        (100, 102.1, "worse", "better"),
        (100, 97.9, "better", "worse"),
        (0.2, 0.2039, "same", "same"),
        (0, 0, "same", "same"),
        (0, 3, "worse", "better"),  # from zero every move counts
        (None, 3, None, None),
        (3, None, None, None),
    ],
)
def test_verdict_direction(
    previous: Any, current: Any, time_verdict: str | None, rate_verdict: str | None
) -> None:
    assert br.verdict(previous, current, br.LOWER) == time_verdict
    assert br.verdict(previous, current, br.HIGHER) == rate_verdict


@pytest.mark.parametrize(
    ("key", "better"),
    [
        ("ttft_p50", "lower"),
        ("ttft_p90", "lower"),
        ("ttft_p99", "lower"),
        ("latency_p50", "lower"),
        ("latency_p90", "lower"),
        ("latency_p99", "lower"),
        ("errors", "lower"),
        ("output_tokens_per_s", "higher"),
        ("decode_tokens_per_s", "higher"),
        ("requests_per_s", "higher"),
    ],
)
def test_metric_directions(key: str, better: str) -> None:
    assert {m[0]: m[4] for m in br.METRICS}[key] == better


def test_metric_value_reads_stats_and_tolerates_none() -> None:
    scenario = make_scenario("s", ttft=0.3)
    assert br.metric_value(scenario, "ttft_p50") == 0.3
    assert br.metric_value(scenario, "ttft_p90") == pytest.approx(0.36)
    assert br.metric_value(scenario, "errors") == 0
    assert br.metric_value(make_scenario("s", ttft=None), "ttft_p50") is None
    assert br.metric_value({"name": "s", "ttft_s": None}, "ttft_p99") is None
    assert br.metric_value({"name": "s"}, "requests_per_s") is None


# ---------------------------------------------------------------------------
# comparison
# ---------------------------------------------------------------------------
def test_compare_signs_and_verdicts() -> None:
    before = make_benchmark("2026-11-21T18:05:00Z", ttft=0.2, out_rate=75.0, errors=0)
    after = make_benchmark(ttft=0.25, out_rate=90.0, errors=2, latency=1.62)
    comparison = br.compare(before, after, "bench-20261121T180500Z.json")
    assert comparison["previous"] == "bench-20261121T180500Z.json"
    # the warm-up is not compared; both measured scenarios are, in the current run's order
    assert list(comparison["scenarios"]) == ["short_c4", "long_c8"]
    short = comparison["scenarios"]["short_c4"]
    assert list(short) == list(br.METRIC_KEYS)
    assert short["ttft_p50"] == {
        "previous": 0.2,
        "current": 0.25,
        "change_pct": 25.0,
        "verdict": "worse",
    }
    assert short["output_tokens_per_s"]["change_pct"] == 20.0
    assert short["output_tokens_per_s"]["verdict"] == "better"
    assert short["errors"] == {"previous": 0, "current": 2, "change_pct": None, "verdict": "worse"}
    assert short["latency_p50"]["verdict"] == "same"
    assert all(v["verdict"] == "same" for v in comparison["scenarios"]["long_c8"].values())


def test_compare_only_scenarios_in_both_runs_and_none_values() -> None:
    before = make_benchmark("2026-11-21T18:05:00Z")
    before["scenarios"] = [s for s in before["scenarios"] if s["name"] != "long_c8"]
    before["scenarios"].append(make_scenario("gone_c2", concurrency=2))
    after = make_benchmark(ttft=None, latency=None, out_rate=None, decode_rate=None, errors=16)
    comparison = br.compare(before, after, "bench-x.json")
    assert list(comparison["scenarios"]) == ["short_c4"]
    short = comparison["scenarios"]["short_c4"]
    assert short["ttft_p99"]["current"] is None
    assert short["ttft_p99"]["change_pct"] is None
    assert short["ttft_p99"]["verdict"] is None
    assert short["errors"]["verdict"] == "worse"
    assert br.verdict_counts(short) == {"better": 0, "worse": 1, "same": 1}


def test_compare_without_previous_run() -> None:
    assert br.compare(None, make_benchmark()) == {"previous": None, "scenarios": {}}


def test_compare_does_not_match_a_warmup_to_a_measured_scenario() -> None:
    before = make_benchmark("2026-11-21T18:05:00Z")
    after = make_benchmark()
    after["scenarios"][0]["warmup"] = False  # "warmup" measured now, a warm-up before
    assert "warmup" not in br.compare(before, after)["scenarios"]


# ---------------------------------------------------------------------------
# record
# ---------------------------------------------------------------------------
def test_record_layout_and_stable_json() -> None:
    bench = make_benchmark()
    extra = {"claude_code": {"mean": 12.3}, "transport": {"rdma": True}}
    record = br.build_record(bench, {"model": "m"}, extra, {"previous": None, "scenarios": {}})
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
    text = br.record_json(record)
    assert text.endswith("}\n")
    assert json.loads(text) == record
    assert br.record_json(copy.deepcopy(record)) == text


@pytest.mark.parametrize("key", ["schema", "benchmark", "config", "comparison"])
def test_record_refuses_extra_keys_of_its_own(key: str) -> None:
    with pytest.raises(br.BenchReportError, match=f"rename {key}"):
        br.build_record(make_benchmark(), {}, {key: 1})


# ---------------------------------------------------------------------------
# formatting and markdown
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("func", "value", "text"),
    [
        (br.fmt_ms, 0.2123, "212"),
        (br.fmt_ms, 0.1, "100"),
        (br.fmt_ms, 0.0999, "99.9"),
        (br.fmt_ms, 0.0456, "45.6"),
        (br.fmt_ms, None, "—"),
        (br.fmt_s, 1.6234, "1.62"),
        (br.fmt_s, 0.4567, "0.457"),
        (br.fmt_s, None, "—"),
        (br.fmt_rate, 78.44, "78.4"),
        (br.fmt_rate, 160, "160.0"),
        (br.fmt_rate, None, "—"),
        (br.fmt_reqrate, 0.64, "0.64"),
        (br.fmt_reqrate, 24.56, "24.6"),
        (br.fmt_count, 16, "16"),
        (br.fmt_count, 16.0, "16"),
        (br.fmt_count, None, "—"),
        (br.fmt_pct, 6.0, "+6.0%"),
        (br.fmt_pct, -3.33, "-3.3%"),
        (br.fmt_pct, None, "—"),
        (br.fmt_value, True, "true"),
        (br.fmt_value, 12.3456, "12.346"),
        (br.fmt_value, 13.0, "13.0"),
        (br.fmt_value, 0.00012, "0.00012"),
        (br.fmt_value, ["a", 1], "a, 1"),
        (br.fmt_value, list(range(20)), "20 values"),
        (br.fmt_value, None, "—"),
    ],
)
def test_number_formats(func: Any, value: Any, text: str) -> None:
    assert func(value) == text


@pytest.mark.parametrize(
    ("entry", "text"),
    [
        ({"previous": 0.2, "current": 0.212, "change_pct": 6.0}, "212 (+6.0%)"),
        ({"previous": 0.05, "current": 0.0456, "change_pct": -8.8}, "45.6 (-8.8%)"),
        ({"previous": 0.2, "current": None, "change_pct": None}, "—"),
        ({"previous": None, "current": 0.2, "change_pct": None}, "200 (—)"),
    ],
)
def test_comparison_cell(entry: dict, text: str) -> None:
    assert br.comparison_cell("ttft_p50", entry) == text


@pytest.mark.parametrize(
    ("entry", "text"),
    [
        ({"previous": 0, "current": 0, "change_pct": None}, "0 (+0.0%)"),
        ({"previous": 0, "current": 3, "change_pct": None}, "3 (was 0)"),
    ],
)
def test_comparison_cell_from_zero_errors(entry: dict, text: str) -> None:
    assert br.comparison_cell("errors", entry) == text


def _table_rows(markdown: str, header_start: str) -> list[list[str]]:
    """The body rows of the table whose header starts with header_start, split in cells."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split(" | ")])
    return rows


RESULTS_HEADER = (
    "| scenario | concurrency | requests | errors | prompt tok | out tok | TTFT p50 (ms) | "
    "TTFT p90 (ms) | TTFT p99 (ms) | latency p50 (s) | latency p90 (s) | latency p99 (s) | "
    "out tok/s | decode tok/s | req/s |"
)


def test_markdown_results_table() -> None:
    bench = make_benchmark()
    bench["scenarios"].append(
        make_scenario(
            "broken_c2", concurrency=2, errors=16, ttft=None, latency=None, out_rate=None,
            decode_rate=None, req_rate=None,
        )
    )  # fmt: skip
    markdown = br.render_markdown(br.build_record(bench))
    assert markdown.startswith("# Benchmark of llmfleet-tiny at http://10.0.0.1:8000\n")
    assert "2026-11-22T23:10:00Z" in markdown
    assert "2026-11-22T23:14:00Z (4 min 0 s)" in markdown
    assert RESULTS_HEADER in markdown.splitlines()
    rows = _table_rows(markdown, "| scenario | concurrency")
    assert rows == [
        ["warmup (warm-up)", "1", "2", "0", "1040", "512", "200", "240", "264", "1.00", "1.20",
         "1.32", "20.6", "11.0", "0.64"],
        ["short_c4", "4", "16", "0", "1040", "512", "212", "254", "280", "1.62", "1.94", "2.14",
         "78.4", "21.2", "2.45"],
        ["long_c8", "8", "32", "0", "1040", "512", "45.6", "54.7", "60.2", "3.20", "3.84", "4.22",
         "160.0", "50.0", "2.50"],
        ["broken_c2", "2", "16", "16", "0", "0", "—", "—", "—", "—", "—", "—", "—", "—", "—"],
    ]  # fmt: skip
    assert "Compared with the previous run" not in markdown


def test_markdown_configuration_is_flattened() -> None:
    config = {
        "topology": {"name": "tp2", "nodes": {"head": "spark1", "count": 2}},
        "model": "llmfleet-tiny",
        "hosts": ["spark1", "spark2"],
        "vllm": {"max_model_len": 8192, "enforce_eager": False},
    }
    markdown = br.render_markdown(br.build_record(make_benchmark(), config))
    section = markdown.split("## Configuration\n\n", 1)[1].split("\n\n", 1)[0]
    assert section.splitlines() == [
        "- topology.name: tp2",
        "- topology.nodes.head: spark1",
        "- topology.nodes.count: 2",
        "- model: llmfleet-tiny",
        "- hosts: spark1, spark2",
        "- vllm.max_model_len: 8192",
        "- vllm.enforce_eager: false",
    ]


def test_markdown_comparison_table() -> None:
    before = make_benchmark("2026-11-21T18:05:00Z", ttft=0.2, out_rate=75.0)
    after = make_benchmark(ttft=0.212, out_rate=78.4)
    comparison = br.compare(before, after, "bench-20261121T180500Z.json")
    markdown = br.render_markdown(br.build_record(after, comparison=comparison))
    assert "Previous run: `bench-20261121T180500Z.json`" in markdown
    rows = _table_rows(markdown, "| scenario | TTFT p50 (ms)")
    assert [r[0] for r in rows] == ["short_c4", "long_c8"]
    short = rows[0]
    assert short[1] == "212 (+6.0%)"
    assert short[7] == "78.4 (+4.5%)"
    assert short[10] == "0 (+0.0%)"
    assert short[11] == "1 better, 3 worse, 6 same"
    assert rows[1][1] == "45.6 (+0.0%)"


def test_markdown_extra_sections_as_key_value_tables() -> None:
    extra = {
        "claude_code": {
            "command": "claude -p 'say hi | tee'",
            "mean": 12.3456,
            "stddev": 0.41,
            "min": 11.9,
            "max": 13.0,
            "times": [12.0] * 20,
        },
        "transport": {"rdma": {"ok": True, "gbits": 106.0}},
        "note": "first run after the firmware update",
    }
    markdown = br.render_markdown(br.build_record(make_benchmark(), extra=extra))
    assert _table_rows(markdown.split("## claude_code")[1], "| key | value |") == [
        ["command", "claude -p 'say hi \\| tee'"],
        ["mean", "12.346"],
        ["stddev", "0.41"],
        ["min", "11.9"],
        ["max", "13.0"],
        ["times", "20 values"],
    ]
    assert _table_rows(markdown.split("## transport")[1], "| key | value |") == [
        ["rdma.ok", "true"],
        ["rdma.gbits", "106.0"],
    ]
    assert _table_rows(markdown.split("## note")[1], "| key | value |") == [
        ["value", "first run after the firmware update"]
    ]


def test_summary_lines() -> None:
    before = make_benchmark("2026-11-21T18:05:00Z", ttft=0.2, out_rate=75.0)
    after = make_benchmark()
    after["scenarios"][2] = make_scenario("long_c8", errors=32, requests=32, ttft=None)
    assert br.summary_lines(after) == [
        "warmup (warm-up): 2 ok, 0 errors, TTFT p50 200 ms, 20.6 out tok/s",
        "short_c4: 16 ok, 0 errors, TTFT p50 212 ms, 78.4 out tok/s",
        "long_c8: 0 ok, 32 errors, TTFT p50 —, 78.4 out tok/s",
    ]
    lines = br.summary_lines(after, br.compare(before, after, "x.json"))
    assert lines[1] == (
        "short_c4: 16 ok, 0 errors, TTFT p50 212 ms, 78.4 out tok/s; "
        "vs previous: 1 better, 3 worse, 6 same"
    )
    assert "vs previous" not in lines[0]


# ---------------------------------------------------------------------------
# previous run
# ---------------------------------------------------------------------------
def _write_record(directory: Path, name: str, started: str) -> Path:
    path = directory / name
    path.write_text(br.record_json(br.build_record(make_benchmark(started))), encoding="utf-8")
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

    path, record, skipped = br.find_previous(str(tmp_path), "bench", "20261122T231000Z")
    assert path == str(older)
    assert record["benchmark"]["started"] == "2026-11-20T08:00:00Z"
    assert sorted(Path(p).name for p in skipped) == [
        "bench-20261121T080000Z.json",
        "bench-20261122T080000Z.json",
        "bench-20261122T090000Z.json",
    ]
    # an earlier run sees only what came before it
    path, _record, skipped = br.find_previous(str(tmp_path), "bench", "20261120T080000Z")
    assert path == str(oldest)
    assert skipped == []
    # the other prefix has its own history
    path, _record, _skipped = br.find_previous(str(tmp_path), "smoke", "20261123T000000Z")
    assert Path(path).name == "smoke-20261122T220000Z.json"


@pytest.mark.parametrize("files", [[], ["bench-20261123T080000Z.json"]])
def test_find_previous_none(tmp_path: Path, files: list[str]) -> None:
    for name in files:
        _write_record(tmp_path, name, "2026-11-23T08:00:00Z")
    assert br.find_previous(str(tmp_path), "bench", "20261122T231000Z") == (None, None, [])


def test_find_previous_in_a_missing_directory(tmp_path: Path) -> None:
    assert br.find_previous(str(tmp_path / "nope"), "bench", "20261122T231000Z") == (
        None,
        None,
        [],
    )


# ---------------------------------------------------------------------------
# plot
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("with_previous", [False, True])
def test_render_png_size(with_previous: bool) -> None:
    pytest.importorskip("matplotlib")
    bench = make_benchmark(ttft=None, latency=None, out_rate=None, errors=16)
    previous = br.build_record(make_benchmark("2026-11-21T18:05:00Z")) if with_previous else None
    data = br.render_png(br.build_record(bench), previous)
    assert png_size(data) == br.PNG_SIZE == (1200, 900)


def test_render_png_without_measured_scenarios() -> None:
    pytest.importorskip("matplotlib")
    bench = make_benchmark()
    bench["scenarios"] = bench["scenarios"][:1]  # the warm-up only
    assert png_size(br.render_png(br.build_record(bench))) == (1200, 900)
