"""modules/bench_report: the files of a run, idempotence, check mode, the plot, the comparison
with the previous run, and failures; in-process and through `ansible`."""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.llmfleet.cluster.plugins.modules import bench_report

from tests.unit.plugins.bench_samples import make_benchmark, png_size
from tests.unit.plugins.conftest import ansible_adhoc

RunModule = Callable[..., tuple[int, dict[str, Any]]]

STEM = "bench-20261122T231000Z"
PREVIOUS_STEM = "bench-20261121T180500Z"
CONFIG = {
    "topology": {"name": "tp2", "nodes": 2},
    "model": {"name": "llmfleet-tiny", "max_model_len": 4096},
    "hosts": ["spark1", "spark2"],
    "transport": "rdma",
}
EXTRA = {
    "claude_code": {"mean": 12.3456, "stddev": 0.41, "min": 11.9, "max": 13.0},
    "transport": {"rdma_gbits": 106.0, "ok": True},
}


def _args(out: Path, **more: Any) -> dict[str, Any]:
    args = {
        "benchmark": make_benchmark(),
        "config": CONFIG,
        "extra": EXTRA,
        "output_dir": str(out),
    }
    args.update(more)
    return args


def _snapshot(directory: Path) -> dict[str, tuple[int, int]]:
    """name -> (mtime_ns, size) of every file."""
    return {p.name: (p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(directory.iterdir())}


def test_writes_the_three_files(tmp_path: Path, run_module: RunModule) -> None:
    out = tmp_path / "reports" / "nested"
    rc, result = run_module(bench_report, _args(out))
    assert rc == 0, result
    assert result["changed"] is True
    assert result["json_path"] == str(out / f"{STEM}.json")
    assert result["markdown_path"] == str(out / f"{STEM}.md")
    assert result["png_path"] == str(out / f"{STEM}.png")
    assert result["previous"] is None
    assert result["comparison"] == {"previous": None, "scenarios": {}}
    assert sorted(p.name for p in out.iterdir()) == [f"{STEM}.json", f"{STEM}.md", f"{STEM}.png"]
    for path in out.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path

    record = json.loads((out / f"{STEM}.json").read_text(encoding="utf-8"))
    assert list(record) == [
        "schema",
        "benchmark",
        "config",
        "claude_code",
        "transport",
        "comparison",
    ]
    assert record["schema"] == 1
    assert record["benchmark"] == make_benchmark()
    assert record["config"] == CONFIG
    assert record["claude_code"] == EXTRA["claude_code"]
    assert record["transport"] == EXTRA["transport"]
    assert record["comparison"] == {"previous": None, "scenarios": {}}

    markdown = (out / f"{STEM}.md").read_text(encoding="utf-8")
    assert markdown.startswith("# Benchmark of llmfleet-tiny at http://10.0.0.1:8000\n")
    assert "- topology.name: tp2\n" in markdown
    assert "- model.max_model_len: 4096\n" in markdown
    assert "| warmup (warm-up) | 1 | 2 | 0 |" in markdown
    assert "| short_c4 | 4 | 16 | 0 | 1040 | 512 | 212 | 254 | 280 |" in markdown
    assert "## claude_code" in markdown
    assert "| mean | 12.346 |" in markdown
    assert "| rdma_gbits | 106.0 |" in markdown
    assert "Compared with the previous run" not in markdown

    assert png_size((out / f"{STEM}.png").read_bytes()) == (1200, 900)
    assert result["summary"] == [
        "warmup (warm-up): 2 ok, 0 errors, TTFT p50 200 ms, 20.6 out tok/s",
        "short_c4: 16 ok, 0 errors, TTFT p50 212 ms, 78.4 out tok/s",
        "long_c8: 32 ok, 0 errors, TTFT p50 45.6 ms, 160.0 out tok/s",
    ]


def test_second_run_changes_nothing(tmp_path: Path, run_module: RunModule) -> None:
    rc, first = run_module(bench_report, _args(tmp_path))
    assert rc == 0, first
    before = _snapshot(tmp_path)
    rc, second = run_module(bench_report, _args(tmp_path))
    assert rc == 0, second
    assert second["changed"] is False
    assert _snapshot(tmp_path) == before  # the PNG was not redrawn either
    assert {k: v for k, v in second.items() if k != "changed"} == {
        k: v for k, v in first.items() if k != "changed"
    }


def test_a_changed_record_rewrites_everything(tmp_path: Path, run_module: RunModule) -> None:
    run_module(bench_report, _args(tmp_path))
    png = tmp_path / f"{STEM}.png"
    os.utime(png, ns=(0, 0))
    rc, result = run_module(bench_report, _args(tmp_path, config={**CONFIG, "transport": "tcp"}))
    assert rc == 0, result
    assert result["changed"] is True
    assert "- transport: tcp\n" in (tmp_path / f"{STEM}.md").read_text(encoding="utf-8")
    assert png.stat().st_mtime_ns != 0


@pytest.mark.parametrize("missing", [f"{STEM}.png", f"{STEM}.md"])
def test_a_missing_file_is_written_again(
    tmp_path: Path, run_module: RunModule, missing: str
) -> None:
    run_module(bench_report, _args(tmp_path))
    (tmp_path / missing).unlink()
    rc, result = run_module(bench_report, _args(tmp_path))
    assert rc == 0, result
    assert result["changed"] is True
    assert (tmp_path / missing).is_file()


@pytest.mark.parametrize("suffix", [".png", ".json", ".md"])
def test_a_wrong_mode_is_a_change(tmp_path: Path, run_module: RunModule, suffix: str) -> None:
    run_module(bench_report, _args(tmp_path))
    path = tmp_path / f"{STEM}{suffix}"
    path.chmod(0o600)
    rc, result = run_module(bench_report, {**_args(tmp_path), "_ansible_check_mode": True})
    assert rc == 0, result
    assert result["changed"] is True
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    rc, result = run_module(bench_report, _args(tmp_path))
    assert rc == 0, result
    assert result["changed"] is True
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_check_mode_writes_nothing(tmp_path: Path, run_module: RunModule) -> None:
    out = tmp_path / "reports"
    rc, result = run_module(bench_report, {**_args(out), "_ansible_check_mode": True})
    assert rc == 0, result
    assert result["changed"] is True
    assert result["json_path"] == str(out / f"{STEM}.json")
    assert not out.exists()

    run_module(bench_report, _args(out))
    before = _snapshot(out)
    rc, result = run_module(bench_report, {**_args(out), "_ansible_check_mode": True})
    assert rc == 0, result
    assert result["changed"] is False

    changed_args = _args(out, extra={"note": "other"})
    rc, result = run_module(bench_report, {**changed_args, "_ansible_check_mode": True})
    assert rc == 0, result
    assert result["changed"] is True
    assert _snapshot(out) == before


def test_check_mode_with_the_plan_of_a_benchmark(tmp_path: Path, run_module: RunModule) -> None:
    plan = {**make_benchmark(), "started": None, "finished": None, "tokens_per_word": None}
    args = {**_args(tmp_path / "out", benchmark=plan), "_ansible_check_mode": True}
    rc, result = run_module(bench_report, args)
    assert rc == 0, result
    assert result["changed"] is True
    assert result["json_path"] is None
    assert result["summary"] == []
    assert not (tmp_path / "out").exists()
    # outside check mode a benchmark that did not run is an error
    rc, result = run_module(bench_report, _args(tmp_path / "out", benchmark=plan))
    assert rc == 1
    assert "benchmark.started must be an ISO 8601 time" in result["msg"]


def test_comparison_with_the_previous_run(tmp_path: Path, run_module: RunModule) -> None:
    older = make_benchmark("2026-11-21T18:05:00Z", ttft=0.2, out_rate=75.0, errors=3)
    rc, result = run_module(bench_report, _args(tmp_path, benchmark=older))
    assert rc == 0, result
    newer = make_benchmark("2026-11-23T08:00:00Z", ttft=0.1, out_rate=10.0)
    rc, result = run_module(bench_report, _args(tmp_path, benchmark=newer))
    assert rc == 0, result
    (tmp_path / "bench-20261122T000000Z.json").write_text("{truncated", encoding="utf-8")

    current = make_benchmark(ttft=0.25, out_rate=90.0, errors=1)
    rc, result = run_module(bench_report, _args(tmp_path, benchmark=current))
    assert rc == 0, result
    assert result["previous"] == str(tmp_path / f"{PREVIOUS_STEM}.json")
    comparison = result["comparison"]
    assert comparison["previous"] == f"{PREVIOUS_STEM}.json"
    assert list(comparison["scenarios"]) == ["short_c4", "long_c8"]
    short = comparison["scenarios"]["short_c4"]
    assert short["ttft_p50"] == {
        "previous": 0.2,
        "current": 0.25,
        "change_pct": 25.0,
        "verdict": "worse",
    }
    assert short["output_tokens_per_s"]["change_pct"] == 20.0
    assert short["output_tokens_per_s"]["verdict"] == "better"
    assert short["errors"]["change_pct"] == pytest.approx(-66.67)
    assert short["errors"]["verdict"] == "better"
    assert short["requests_per_s"]["verdict"] == "same"
    # ansible-core 2.19 modules emit structured warnings; older ones plain strings
    assert "bench-20261122T000000Z.json is not a readable" in json.dumps(result["warnings"])

    record = json.loads(Path(result["json_path"]).read_text(encoding="utf-8"))
    assert record["comparison"] == comparison
    markdown = Path(result["markdown_path"]).read_text(encoding="utf-8")
    assert f"Previous run: `{PREVIOUS_STEM}.json`" in markdown
    assert "| short_c4 | 250 (+25.0%) |" in markdown
    assert "| 90.0 (+20.0%) |" in markdown
    assert result["summary"][1].endswith("vs previous: 2 better, 3 worse, 5 same")
    assert png_size(Path(result["png_path"]).read_bytes()) == (1200, 900)

    # the same run again: same previous, nothing changes
    rc, again = run_module(bench_report, _args(tmp_path, benchmark=current))
    assert rc == 0, again
    assert again["changed"] is False
    assert again["comparison"] == comparison


def test_compare_false_ignores_the_previous_run(tmp_path: Path, run_module: RunModule) -> None:
    older = make_benchmark("2026-11-21T18:05:00Z", ttft=0.2)
    run_module(bench_report, _args(tmp_path, benchmark=older))
    rc, result = run_module(bench_report, _args(tmp_path, compare=False))
    assert rc == 0, result
    assert result["previous"] is None
    assert result["comparison"] == {"previous": None, "scenarios": {}}


def test_plot_false_writes_no_png(tmp_path: Path, run_module: RunModule) -> None:
    rc, result = run_module(bench_report, _args(tmp_path, plot=False, name_prefix="smoke"))
    assert rc == 0, result
    assert result["png_path"] is None
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "smoke-20261122T231000Z.json",
        "smoke-20261122T231000Z.md",
    ]


def test_missing_matplotlib_says_what_to_install(
    tmp_path: Path, run_module: RunModule, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)
    rc, result = run_module(bench_report, _args(tmp_path / "out"))
    assert rc == 1
    assert "matplotlib" in result["msg"]
    assert "Python that runs Ansible on the controller" in result["msg"]
    assert "pip install" in result["msg"]
    assert not (tmp_path / "out").exists()
    # without the plot matplotlib is not needed
    rc, result = run_module(bench_report, _args(tmp_path / "out", plot=False))
    assert rc == 0, result


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"benchmark": {**make_benchmark(), "started": "soon"}}, "benchmark.started"),
        ({"benchmark": {"started": "2026-11-22T23:10:00Z"}}, "benchmark.scenarios"),
        ({"extra": {"config": {}}}, "rename config"),
        ({"name_prefix": "../up"}, "name_prefix"),
    ],
)
def test_bad_input_fails_clearly(
    tmp_path: Path, run_module: RunModule, change: dict[str, Any], needle: str
) -> None:
    rc, result = run_module(bench_report, {**_args(tmp_path / "out"), **change})
    assert rc == 1
    assert needle in result["msg"]
    assert not (tmp_path / "out").exists()


def test_required_options(run_module: RunModule) -> None:
    rc, result = run_module(bench_report, {})
    assert rc == 1
    assert "benchmark" in result["msg"]
    assert "output_dir" in result["msg"]


def test_end_to_end(tmp_path: Path) -> None:
    args = json.dumps(_args(tmp_path, extra={}, config={}))
    status, result = ansible_adhoc("llmfleet.cluster.bench_report", args)
    assert status == "CHANGED", result
    assert png_size(Path(result["png_path"]).read_bytes()) == (1200, 900)
    status, result = ansible_adhoc("llmfleet.cluster.bench_report", args)
    assert status == "SUCCESS", result
    assert result["changed"] is False
