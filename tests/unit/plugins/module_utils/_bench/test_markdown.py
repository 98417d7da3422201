"""module_utils/_bench/markdown: the comparison cells and the markdown report."""

from __future__ import annotations

import pytest
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench import (
    comparison as _bench_comparison,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench import (
    markdown as _bench_markdown,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench import record as _bench_record

from tests.unit.plugins.bench_samples import (
    make_benchmark,
    make_scenario,
    make_session_scenario,
)


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
    assert _bench_markdown.comparison_cell("ttft_p50", entry) == text


@pytest.mark.parametrize(
    ("entry", "text"),
    [
        ({"previous": 0, "current": 0, "change_pct": None}, "0 (+0.0%)"),
        ({"previous": 0, "current": 3, "change_pct": None}, "3 (was 0)"),
    ],
)
def test_comparison_cell_from_zero_errors(entry: dict, text: str) -> None:
    assert _bench_markdown.comparison_cell("errors", entry) == text


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
    markdown = _bench_markdown.render_markdown(_bench_record.build_record(bench))
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
    markdown = _bench_markdown.render_markdown(_bench_record.build_record(make_benchmark(), config))
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
    comparison = _bench_comparison.compare(before, after, "bench-20261121T180500Z.json")
    markdown = _bench_markdown.render_markdown(
        _bench_record.build_record(after, comparison=comparison)
    )
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
    markdown = _bench_markdown.render_markdown(
        _bench_record.build_record(make_benchmark(), extra=extra)
    )
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


def test_markdown_shows_each_session_scenario_turn_by_turn_against_the_previous_run() -> None:
    before = make_benchmark("2026-11-21T18:05:00Z")
    before["scenarios"].append(make_session_scenario(ttft_p99=(1.0, 0.3)))
    after = make_benchmark()
    after["scenarios"].append(make_session_scenario())
    comparison = _bench_comparison.compare(before, after, "bench-20261121T180500Z.json")
    markdown = _bench_markdown.render_markdown(
        _bench_record.build_record(after, comparison=comparison)
    )
    assert "### sessions_c4: 4 sessions x 3 turns" in markdown
    assert "Session wall time p50 6.10 s, max 6.60 s." in markdown
    rows = _table_rows(markdown, "| turn | ok |")
    assert [row[:10] for row in rows] == [
        ["1", "4", "0", "3000.0", "2400", "9600", "20.0%", "540", "900", "64.0"],
        ["2", "4", "0", "4000.0", "11200", "800", "95.0%", "180", "300", "64.0"],
        ["3", "4", "0", "5000.0", "15200", "800", "95.0%", "210", "350", "64.0"],
    ]
    assert [row[10] for row in rows] == ["-10.0%, 20.0% before", "+0.0%, 95.0% before", "—"]
    # Without a previous run, no comparison column; without session scenarios, no section.
    alone = _bench_markdown.render_markdown(_bench_record.build_record(after))
    assert _table_rows(alone, "| turn | ok |")[0][-1] == "64.0"
    assert "turn by turn" not in _bench_markdown.render_markdown(
        _bench_record.build_record(make_benchmark())
    )


def test_markdown_shows_decode_speed_by_sessions_at_once_with_speculative_acceptance() -> None:
    bench = make_benchmark()
    alone = make_session_scenario("sessions_c1", sessions=1, decode_rate=48.5)
    alone["speculative"] = {
        "drafts": 26,
        "draft_tokens": 104,
        "accepted_tokens": 96,
        "acceptance_rate": 0.9231,
        "mean_acceptance_length": 4.692,
    }
    bench["scenarios"] += [make_session_scenario(decode_rate=30.25), alone]
    markdown = _bench_markdown.render_markdown(_bench_record.build_record(bench))
    assert "## Decode speed by sessions at once" in markdown
    # By number of sessions, whatever the scenarios' order; no speculative counters: —.
    assert _table_rows(markdown, "| sessions | scenario |") == [
        ["1", "sessions_c1", "48.5", "212", "78.4", "92.3%", "4.692"],
        ["4", "sessions_c4", "30.2", "212", "78.4", "—", "—"],
    ]
    assert "Decode speed" not in _bench_markdown.render_markdown(
        _bench_record.build_record(make_benchmark())
    )


def test_markdown_shows_the_load_of_each_serving_group() -> None:
    bench = make_benchmark()
    short = bench["scenarios"][1]
    short["by_group"] = [
        {"name": "serving_1", "requests": 9, "share": 0.5625},
        {"name": "serving_2", "requests": 7, "share": 0.4375},
    ]
    bench["scenarios"][2]["by_group"] = [
        {"name": "serving_1", "requests": 16, "share": 0.5},
        {"name": "serving_2", "requests": None, "share": None},
    ]
    markdown = _bench_markdown.render_markdown(_bench_record.build_record(bench))
    assert "## Load per serving group" in markdown
    assert _table_rows(markdown, "| scenario | serving_1") == [
        ["short_c4", "9 (56%)", "7 (44%)"],
        ["long_c8", "16 (50%)", "—"],
    ]


def test_markdown_without_groups_has_no_load_section() -> None:
    markdown = _bench_markdown.render_markdown(_bench_record.build_record(make_benchmark()))
    assert "Load per serving group" not in markdown
