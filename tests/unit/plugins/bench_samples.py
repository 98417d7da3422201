"""Benchmarks in the shape llm_benchmark returns, for the tests of the bench_report pieces
(tests/unit/plugins/module_utils/_bench/test_*.py) and of the module
(tests/unit/plugins/modules/test_bench_report.py)."""

from __future__ import annotations

import datetime
import struct
from typing import Any

from ansible_collections.llmfleet.cluster.plugins.module_utils._bench import record as _bench_record

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


def make_session_scenario(
    name: str = "sessions_c4",
    *,
    ttft_p99: tuple[float, ...] = (0.9, 0.3, 0.35),
    sessions: int = 4,
    decode_rate: float = 21.2,
) -> dict[str, Any]:
    """A session scenario of 4 sessions (or ``sessions``), one turn per TTFT p99 given: the
    first computes the shared prefix, the later ones find it in the prefix cache."""
    turns = [
        {
            "turn": number,
            "ok": 4,
            "errors": 0,
            "duration_s": 2.0,
            "ttft_s": stats(p99 * 0.6, p99=p99),
            "prompt_tokens_per_request": 3000.0 + 1000 * (number - 1),
            "output_tokens_per_s": 64.0,
            "prefill_cached_tokens": 2400 if number == 1 else 11200 + 4000 * (number - 2),
            "prefill_computed_tokens": 9600 if number == 1 else 800,
            "prefix_cache_hit_ratio": 0.2 if number == 1 else 0.95,
        }
        for number, p99 in enumerate(ttft_p99, start=1)
    ]
    scenario = make_scenario(
        name, concurrency=sessions, requests=4 * len(turns), decode_rate=decode_rate
    )
    scenario.update(
        kind="session",
        sessions=sessions,
        turns=len(turns),
        by_turn=turns,
        system_tokens=2000,
        tool_tokens=8000,
        turn_tokens=1000,
        session_wall_s=stats(6.1, p99=6.6),
    )
    return scenario


def make_benchmark(started: str = "2026-11-22T23:10:00Z", **short_c4: Any) -> dict[str, Any]:
    """warmup (warm-up), short_c4 (overridable) and long_c8."""
    return {
        "url": "http://10.0.0.1:8000",
        "model": "llmfleet-tiny",
        "api": "openai-chat",
        "started": started,
        "finished": (_bench_record.parse_time(started) + datetime.timedelta(minutes=4)).strftime(
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
