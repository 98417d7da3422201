# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""The metrics of a benchmark scenario from its request records (pure).

TTFT, time per output token and latency as mean, p50, p90, p99, min and max
(percentiles interpolated linearly, as numpy's default), throughputs and errors,
as ``vllm bench serve`` defines them; ``summary_line`` says it in one line.
"""

from __future__ import annotations

import statistics

ERROR_SAMPLES = 5
STAT_KEYS = ("mean", "p50", "p90", "p99", "min", "max")


def percentile(values, q):
    """The q-th percentile (0..100) by linear interpolation, as numpy's default does."""
    if not values:
        return None
    ordered = sorted(values)
    if not 0 <= q <= 100:
        raise ValueError("percentile must be between 0 and 100, got {0}".format(q))
    rank = (len(ordered) - 1) * q / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    fraction = rank - low
    return ordered[low] + (ordered[high] - ordered[low]) * fraction


def _round(value, digits=6):
    return None if value is None else round(value, digits)


def summarize(values, digits=6):
    """mean, p50, p90, p99, min and max of ``values`` (every one None when empty)."""
    if not values:
        return dict.fromkeys(STAT_KEYS)
    return {
        "mean": _round(statistics.fmean(values), digits),
        "p50": _round(percentile(values, 50), digits),
        "p90": _round(percentile(values, 90), digits),
        "p99": _round(percentile(values, 99), digits),
        "min": _round(min(values), digits),
        "max": _round(max(values), digits),
    }


def _rate(count, seconds):
    return round(count / seconds, 4) if seconds and seconds > 0 else None


def scenario_metrics(records, duration_s):
    """Metrics of one scenario from its request records (see ``Client.chat``).

    Times in seconds. Failed requests count in ``errors`` only; every other metric
    is over the successful ones. ``tpot_s`` and ``decode_tokens_per_s`` use the
    requests with more than one output token (the first token is TTFT's).
    """
    good = [r for r in records if r["ok"]]
    failed = [r for r in records if not r["ok"]]
    samples = []
    for record in failed:
        message = record.get("error") or "unknown error"
        if message not in samples and len(samples) < ERROR_SAMPLES:
            samples.append(message)
    ttft = [r["first"] - r["start"] for r in good if r["first"] is not None]
    latency = [r["end"] - r["start"] for r in good]
    decoding = [
        r
        for r in good
        if r["first"] is not None and r["output_tokens"] > 1 and r["end"] > r["first"]
    ]
    tpot = [(r["end"] - r["first"]) / (r["output_tokens"] - 1) for r in decoding]
    # Tokens after the first over the time spent decoding them, summed over requests: a
    # request whose tokens arrived in one burst (a busy server flushing late) weighs by
    # its time, not as an endless rate.
    decoded = sum(r["output_tokens"] - 1 for r in decoding)
    decode_time = sum(r["end"] - r["first"] for r in decoding)
    prompt_counts = [r["prompt_tokens"] for r in good if r.get("prompt_tokens") is not None]
    output_tokens = sum(r["output_tokens"] for r in good)
    return {
        "ok": len(good),
        "errors": len(failed),
        "error_samples": samples,
        "duration_s": _round(duration_s),
        "requests_per_s": _rate(len(good), duration_s),
        "ttft_s": summarize(ttft),
        "tpot_s": summarize(tpot),
        "latency_s": summarize(latency),
        "prompt_tokens": sum(prompt_counts),
        "prompt_tokens_per_request": (
            round(statistics.fmean(prompt_counts), 1) if prompt_counts else None
        ),
        "output_tokens": output_tokens,
        "output_tokens_per_s": _rate(output_tokens, duration_s),
        "decode_tokens_per_s": _rate(decoded, decode_time) if decoding else None,
    }


def summary_line(scenario):
    """One human line about a finished scenario."""
    ttft = scenario["ttft_s"]["p50"]
    rate = scenario["output_tokens_per_s"]
    return "{0}{1}: {2}/{3} ok, TTFT p50 {4}, {5} output tok/s".format(
        scenario["name"],
        " (warm-up)" if scenario["warmup"] else "",
        scenario["ok"],
        scenario["requests"],
        "n/a" if ttft is None else "{0:.3f} s".format(ttft),
        "n/a" if rate is None else "{0:.1f}".format(rate),
    )
