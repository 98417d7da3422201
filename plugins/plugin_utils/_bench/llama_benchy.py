# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""llama-benchy, the community's benchmark, beside ours (pure): which of a profile's context
depths fit the served model, how many requests the run sends, and its JSON results
(``--format json``) as the rows of the report."""

from __future__ import annotations

LIST_KEYS = ("pp", "tg", "depth", "concurrency")


def _int_list(profile, key):
    value = profile.get(key)
    values = value if isinstance(value, list) else [value]
    if not values or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in values):
        raise ValueError(
            "{0} is {1!r}; expected a list of whole numbers, 0 or more".format(key, value)
        )
    if key != "depth" and 0 in values:
        raise ValueError("{0} is {1!r}; expected numbers above 0".format(key, value))
    return values


def profile_problems(profile):
    """Why a profile cannot be run, each naming its key (empty when it can)."""
    if not isinstance(profile, dict):
        return [
            "the profile is {0!r}; expected a mapping of {1} and runs".format(
                profile, ", ".join(LIST_KEYS)
            )
        ]
    problems = []
    for key in LIST_KEYS:
        try:
            _int_list(profile, key)
        except ValueError as error:
            problems.append(str(error))
    runs = profile.get("runs", 3)
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        problems.append("runs is {0!r}; expected a whole number, 1 or more".format(runs))
    unknown = sorted(set(profile) - set(LIST_KEYS) - {"runs", "prefix_caching"})
    if unknown:
        problems.append(
            "{0} is not known; expected only {1}, runs and prefix_caching".format(
                ", ".join(unknown), ", ".join(LIST_KEYS)
            )
        )
    return problems


def plan(profile, max_model_len):
    """The profile fitted to the served context: the depths whose deepest request (depth +
    prompt + output tokens) fits, those left out, and the requests the run will send (each
    test: runs x concurrency, twice with a depth and prefix caching: the context is loaded
    first)."""
    problems = profile_problems(profile)
    if problems:
        raise ValueError("; ".join(problems))
    pp, tg = _int_list(profile, "pp"), _int_list(profile, "tg")
    depths, concurrency = _int_list(profile, "depth"), _int_list(profile, "concurrency")
    runs = profile.get("runs", 3)
    caching = bool(profile.get("prefix_caching", True))
    deepest = max(pp) + max(tg)
    fit = [d for d in depths if d + deepest <= int(max_model_len)]
    left_out = [d for d in depths if d not in fit]
    requests = (
        len(pp)
        * len(tg)
        * sum(runs * c * (2 if d > 0 and caching else 1) for d in fit for c in concurrency)
    )
    return {
        # Every list as a list (a single number is accepted for one), for arguments().
        "profile": dict(
            profile,
            pp=pp,
            tg=tg,
            depth=fit,
            concurrency=concurrency,
            runs=runs,
            prefix_caching=caching,
        ),
        "left_out": left_out,
        "requests": requests,
    }


def arguments(fitted):
    """llama-benchy's options for a fitted profile (``plan(...)["profile"]``)."""
    argv = []
    for key in LIST_KEYS:
        argv += ["--" + key] + [str(v) for v in fitted[key]]
    argv += ["--runs", str(fitted["runs"])]
    if fitted.get("prefix_caching"):
        argv.append("--enable-prefix-caching")
    return argv


def _mean(run, key):
    metric = run.get(key)
    if isinstance(metric, dict):
        return metric.get("mean")
    return None


def rows(results):
    """One row per measured test of a llama-benchy JSON result (the loads of a depth's
    context that come before its measured requests left out), in the order it ran."""
    found = []
    for run in (results or {}).get("benchmarks") or []:
        if not isinstance(run, dict) or run.get("is_context_prefill_phase"):
            continue
        metric = run.get("tg_throughput") or run.get("pp_throughput") or {}
        found.append(
            {
                "depth": run.get("context_size"),
                "concurrency": run.get("concurrency"),
                "prompt_tokens": run.get("prompt_size"),
                "output_tokens": run.get("response_size"),
                "pp_tps": _mean(run, "pp_throughput"),
                "tg_tps": _mean(run, "tg_throughput"),
                "tg_tps_per_request": _mean(run, "tg_req_throughput"),
                "peak_tps": _mean(run, "peak_throughput"),
                "ttfr_ms": _mean(run, "ttfr"),
                "e2e_ttft_ms": _mean(run, "e2e_ttft"),
                "runs": len(metric.get("values") or []) if isinstance(metric, dict) else 0,
            }
        )
    return found


def summary(results, fitted=None):
    """What the report keeps of a llama-benchy run: its version, the profile it ran, the
    depths left out, and its rows."""
    results = results or {}
    return {
        "tool": "llama-benchy",
        "version": results.get("version"),
        "model": results.get("model"),
        "latency_mode": results.get("latency_mode"),
        "profile": (fitted or {}).get("profile"),
        "left_out_depths": (fitted or {}).get("left_out", []),
        "rows": rows(results),
    }
