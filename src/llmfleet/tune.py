"""``llmfleet tune``: sweep a grid of vLLM's options on the served cluster, benchmark Claude
Code-shaped sessions at each point, keep the best in the inventory.

Each point of the grid (the product of its values, in the order given) is served by
``site.yml --tags preflight,vllm_server`` with the point as extra variables (vLLM's options
as ``llmfleet_tuned_overrides``, which role vllm_server merges over the profile's
overrides; ``rails`` and ``transport`` as the fabric's own variables, served by the whole
``site.yml``; ``group_size``, the serving layout, too), then measured by
``playbooks/bench.yml`` with a warm-up and one session
scenario per session count. The winner (``choose``) goes to the inventory's
``group_vars/all/tuned.yml`` and the cluster is left serving it. Every point, its numbers and
its verdict are kept as JSON, markdown and PNG under ``artifacts/tune``.
"""

from __future__ import annotations

import importlib
import itertools
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from llmfleet.paths import ansible_env

TUNED_FILE = Path("group_vars", "all", "tuned.yml")
TUNED_VARIABLE = "llmfleet_tuned_overrides"
# Grid keys that are not vLLM options: the variable each sets and its values' meanings.
FABRIC_KEYS: dict[str, tuple[str, dict[str, Any]]] = {
    "rails": ("llmfleet_fabric_ports", {"single": [1], "dual": [1, 2]}),
    "transport": ("llmfleet_nccl_mode", {"rdma": "ib", "socket": "socket"}),
}
# What the field notes swept by hand (seed 000: --max-num-seqs 16 won), and on Sparks the rails
# and the transport.
DEFAULT_GRID: dict[str, list[Any]] = {
    "max_num_seqs": [8, 16, 32],
    "max_num_batched_tokens": [4096, 8192],
    "enable_prefix_caching": [True, False],
}
SPARK_GRID: dict[str, list[Any]] = {"rails": ["single", "dual"], "transport": ["rdma", "socket"]}
# Speculative decoding as a grid key: `off`, or vLLM's method and the tokens it proposes per
# step (`ngram:4`, `suffix`, `mtp:1`), served as the profile's speculative_config.
SPECULATIVE_KEY = "speculative"
SPECULATIVE_OFF = ("off", "none", None, False)
# The serving layout as a grid key: Sparks per serving group (``llmfleet_group_size``), or
# `all` for one group across every Spark. Each layout is served by the whole site.yml (a vLLM
# and a Ray cluster per group, the serving gateway in front of the groups) and measured
# through the inventory's endpoint, the gateway, at the sweep's session counts: one TP=2 pair
# against two Sparks serving alone, or on 8 Sparks one group of eight against pairs.
LAYOUT_KEY = "group_size"
LAYOUT_ALL = "all"
LAYOUT_VARIABLE = "llmfleet_group_size"
DEFAULT_SESSIONS = (4, 8)
# A point whose output tokens/s falls more than this below the best point's (at any session
# count) cannot win, however low its TTFT.
THROUGHPUT_SLACK = 0.10
WARMUP = {"name": "warmup", "warmup": True, "concurrency": 1, "requests": 2,
          "prompt_tokens": 64, "max_tokens": 8}  # fmt: skip
SESSION_SHAPE_KEYS = ("turns", "system_tokens", "tool_tokens", "prompt_tokens", "turn_tokens",
                      "max_tokens")  # fmt: skip


class TuneError(ValueError):
    """The sweep cannot start: a bad grid, or an inventory without what it needs."""


def parse_grid(values: Sequence[str]) -> dict[str, list[Any]]:
    """``KEY=V1,V2`` options as a grid, each value read as YAML (``8`` a number, ``true`` a
    bool); repeated keys are refused."""
    grid: dict[str, list[Any]] = {}
    for raw in values:
        key, sep, listed = raw.partition("=")
        key = key.strip()
        if not sep or not key or not listed.strip():
            raise TuneError(
                f"--grid {raw!r}: expected KEY=VALUE[,VALUE...], e.g. max_num_seqs=8,16"
            )
        if key in grid:
            raise TuneError(f"--grid names {key} twice")
        grid[key] = [yaml.safe_load(value.strip()) for value in listed.split(",")]
    return grid


def grid_points(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every combination of the grid's values, the first key varying slowest."""
    keys = list(grid)
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*grid.values())]


def point_label(point: dict[str, Any]) -> str:
    return " ".join(f"{key}={json.dumps(value)}" for key, value in point.items())


def speculative_config(value: Any) -> dict[str, Any] | None:
    """A ``speculative`` grid value as vLLM's speculative_config: None for ``off``;
    ``METHOD`` or ``METHOD:TOKENS`` a method and the tokens it proposes per step. Raises
    TuneError for anything else."""
    if value in SPECULATIVE_OFF:
        return None
    method, sep, tokens = str(value).partition(":")
    if not method.strip() or (sep and not tokens.strip().isdigit()):
        raise TuneError(
            f"grid key {SPECULATIVE_KEY} has {value!r}; expected off, or a method and the"
            " tokens it proposes per step (ngram:4, suffix, mtp:1)"
        )
    config: dict[str, Any] = {"method": method.strip()}
    if sep:
        config["num_speculative_tokens"] = int(tokens)
    return config


def point_variables(point: dict[str, Any]) -> dict[str, Any]:
    """The extra variables that serve a point (see the module's docstring)."""
    variables: dict[str, Any] = {TUNED_VARIABLE: {}}
    for key, value in point.items():
        if key in FABRIC_KEYS:
            variable, meanings = FABRIC_KEYS[key]
            variables[variable] = meanings[value]
        elif key == SPECULATIVE_KEY:
            variables[TUNED_VARIABLE]["speculative_config"] = speculative_config(value)
        elif key == LAYOUT_KEY:
            # Unset (null) is one group across every Spark.
            variables[LAYOUT_VARIABLE] = None if value == LAYOUT_ALL else value
        else:
            variables[TUNED_VARIABLE][key] = value
    return variables


def load_filter(root: Path, name: str) -> Any:
    """The collection's filter plugin ``name`` (plugins/filter/<name>.py), for its checks. It
    imports the collection's plugin_utils as ansible does (``ansible_collections.llmfleet.
    cluster``): the folder that holds that name for ``root`` goes on ``sys.path`` first (the
    checkout's ``collections/``; the wheel's site-packages already is)."""
    for holder in (root / "collections", *root.parents[2:3]):
        named = holder / "ansible_collections" / "llmfleet" / "cluster"
        if named.is_dir() and named.resolve() == root.resolve():
            if str(holder) not in sys.path:
                sys.path.append(str(holder))
            break
    return importlib.import_module(f"ansible_collections.llmfleet.cluster.plugins.filter.{name}")


def grid_problems(grid: dict[str, list[Any]], root: Path) -> list[str]:
    """What is wrong with a grid, found before any host changes: keys that are neither a vLLM
    profile option nor a fabric or layout key, values vLLM or the fabric would refuse (the
    layout's against the inventory: ``layout_problems``)."""
    checks = load_filter(root, "vllm")
    problems = []
    if not grid:
        problems.append("the grid is empty: give --grid KEY=V1,V2 or llmfleet_tune_grid")
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            problems.append(f"grid key {key} has no values; expected a list")
        elif key in FABRIC_KEYS:
            known = list(FABRIC_KEYS[key][1])
            problems += [
                f"grid key {key} has {value!r}; expected one of {known}"
                for value in values
                if value not in known
            ]
        elif key == SPECULATIVE_KEY:
            problems += speculative_problems(values, checks)
        elif key == LAYOUT_KEY:
            continue
        elif key not in checks.PROFILE_OPTIONS:
            problems.append(
                f"grid key {key} is not a vLLM profile option nor"
                f" {sorted([*FABRIC_KEYS, SPECULATIVE_KEY, LAYOUT_KEY])};"
                f" expected one of {list(checks.PROFILE_OPTIONS)}"
            )
        else:
            for value in values:
                try:
                    checks.check_values({key: value})
                except checks.AnsibleFilterError as error:
                    problems.append(f"grid key {key}: {error}")
    return problems


def speculative_problems(values: list[Any], checks: Any) -> list[str]:
    """What vLLM would refuse of the ``speculative`` grid key's values: their shape (the
    image's methods, the model's MTP layers and the profile's other options are checked by
    the validation of each point's run)."""
    problems = []
    for value in values:
        try:
            config = speculative_config(value)
        except TuneError as error:
            problems.append(str(error))
            continue
        problem = None if config is None else checks.speculative.shape_problem(config)
        if problem:
            problems.append(f"grid key {SPECULATIVE_KEY} has {value!r}: {problem}")
    return problems


def layout_problems(grid: dict[str, list[Any]], settings: dict[str, Any], root: Path) -> list[str]:
    """What the inventory cannot serve of the ``group_size`` grid key's values: what the
    validation of the point's run would refuse of the groups it cuts (plugins/filter/serving.py:
    a size of 2 Sparks or more that divides them), a value that is neither a whole number nor
    `all`, or several groups with no serving gateway to spread the sessions over them."""
    values = grid.get(LAYOUT_KEY)
    if not isinstance(values, list):
        return []
    sparks = settings["sparks"]
    if not sparks:
        return [f"grid key {LAYOUT_KEY} needs Sparks to cut into groups; the inventory has none"]
    serving, problems = load_filter(root, "serving"), []
    for value in values:
        if value == LAYOUT_ALL:
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            problems.append(
                f"grid key {LAYOUT_KEY} has {value!r}; expected Sparks per serving group (a"
                f" whole number) or {LAYOUT_ALL} (one group across every Spark)"
            )
            continue
        refused = serving.serving_group_problems({"sparks": sparks}, value)
        problems += [f"grid key {LAYOUT_KEY} has {value}: {problem}" for problem in refused]
        if not refused and value < len(sparks) and not settings["gateways"]:
            problems.append(
                f"grid key {LAYOUT_KEY} has {value}: {len(sparks) // value} serving groups, which"
                " the sessions reach only through a serving gateway; expected a host in group"
                " gateways"
            )
    return problems


def session_scenarios(shape: dict[str, Any], sessions: Sequence[int]) -> list[dict[str, Any]]:
    """A warm-up (vLLM just restarted), then one session scenario per session count."""
    return [WARMUP] + [
        {"name": f"sessions_c{count}", "kind": "session", "sessions": count,
         **{key: shape[key] for key in SESSION_SHAPE_KEYS if key in shape}}
        for count in sessions
    ]  # fmt: skip


def measurements(benchmark: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """Per measured session scenario: its TTFT p99, output tokens/s, the decode speed one
    request sees and, when vLLM decodes speculatively, its acceptance rate (vLLM's counters)."""
    return {
        str(s["name"]): {
            "ttft_p99_s": (s.get("ttft_s") or {}).get("p99"),
            "output_tokens_per_s": s.get("output_tokens_per_s"),
            "decode_tokens_per_s": s.get("decode_tokens_per_s"),
            "acceptance_rate": (s.get("speculative") or {}).get("acceptance_rate"),
            "errors": s.get("errors"),
        }
        for s in benchmark.get("scenarios") or []
        if s.get("kind") == "session" and not s.get("warmup")
    }


def single_session(names: list[str]) -> str | None:
    """The session scenario of one session alone (``sessions_c1``), if the sweep has one."""
    return next((name for name in names if name.rpartition("_c")[2] == "1"), None)


def choose(results: list[dict[str, Any]], slack: float = THROUGHPUT_SLACK) -> int | None:
    """The index of the winning point, and each result's ``verdict`` filled in: among the
    points measured without errors, those whose output tokens/s is within ``slack`` of the
    best at every session count and whose decode speed with one session alone is within
    ``slack`` of the best, when the sweep measures it; of those, the
    lowest TTFT p99 at its worst session count (the earlier point on a tie). None when no
    point was measured."""
    measured = [
        r for r in results
        if r.get("measured") and all(
            m["errors"] == 0 and m["ttft_p99_s"] is not None and m["output_tokens_per_s"]
            for m in r["measured"].values()
        )
    ]  # fmt: skip
    for result in results:
        if result not in measured:
            result["verdict"] = result.get("error") or "not measured without errors"
    if not measured:
        return None
    names = list(measured[0]["measured"])
    best = {
        name: max(r["measured"][name]["output_tokens_per_s"] for r in measured) for name in names
    }
    # What one person at the keyboard feels: the decode speed of a session alone
    # (speculative decoding's gain), when the sweep measures one and every point reports it.
    alone = single_session(names)
    decode = [r["measured"][alone].get("decode_tokens_per_s") for r in measured] if alone else []
    best_decode = max(decode) if decode and all(decode) else None
    eligible, decode_slow = [], []
    for result in measured:
        slow = [
            name for name in names
            if result["measured"][name]["output_tokens_per_s"] < (1 - slack) * best[name]
        ]  # fmt: skip
        result["worst_ttft_p99_s"] = max(result["measured"][name]["ttft_p99_s"] for name in names)
        own_decode = result["measured"][alone].get("decode_tokens_per_s") if alone else None
        if slow:
            result["verdict"] = (
                f"output tokens/s more than {slack:.0%} below the best in {', '.join(slow)}"
            )
        elif best_decode and own_decode < (1 - slack) * best_decode:
            decode_slow.append(result)
            result["verdict"] = (
                f"decode tokens/s of a session alone more than {slack:.0%} below the best ({alone})"
            )
        else:
            eligible.append(result)
            result["verdict"] = "eligible"
    if not eligible:
        # The fastest decode came with too little throughput: the throughput rule alone decides.
        eligible = decode_slow
        for result in eligible:
            result["verdict"] = "eligible"
    winner = min(eligible, key=lambda r: r["worst_ttft_p99_s"])
    winner["verdict"] = "winner"
    return results.index(winner)


def tuned_file_text(point: dict[str, Any], report: str) -> str:
    """The inventory file that keeps the winner."""
    header = (
        "---\n# Written by `llmfleet tune`: the best point of its sweep (report: "
        f"{report}).\n# Run `llmfleet tune` again to replace it; delete it to serve the profile"
        " as it is.\n"
    )
    return header + yaml.safe_dump(point_variables(point), sort_keys=False)


def inventory_settings(root: Path, inventory: Path) -> dict[str, Any]:
    """The variables of the inventory's first serving host (group ``sparks``, else ``gh200``)
    as ``ansible-inventory`` reads them (not templated), the Sparks and the number of serving
    gateways."""
    proc = subprocess.run(
        ["ansible-inventory", "-i", str(inventory), "--list"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env={**os.environ, **ansible_env(root, tty=False)},
    )
    if proc.returncode != 0:
        raise TuneError(f"ansible-inventory cannot read {inventory}: {proc.stderr.strip()[-500:]}")
    listing = json.loads(proc.stdout)
    sparks = listing.get("sparks", {}).get("hosts", [])
    serving = sparks or listing.get("gh200", {}).get("hosts", [])
    if not serving:
        raise TuneError(f"{inventory} has no serving host (no host in the sparks or gh200 group)")
    hostvars = listing.get("_meta", {}).get("hostvars", {}).get(serving[0], {})
    gateways = listing.get("gateways", {}).get("hosts", [])
    return {"sparks": sparks, "gateways": len(gateways), "vars": hostvars}


def sweep_plan(
    root: Path, settings: dict[str, Any], grid: dict[str, list[Any]], sessions: Sequence[int]
) -> tuple[dict[str, list[Any]], list[int], dict[str, Any]]:
    """The grid, session counts and session shape of a sweep: those given, else the
    inventory's (``llmfleet_tune_grid``, ``llmfleet_tune_sessions``), else the defaults (on
    two Sparks or more over RDMA, the rails and the transport too). The shape is the
    inventory's first session scenario in ``benchmark_scenarios``, else the role's."""
    found = settings["vars"]
    if not grid:
        grid = dict(found.get("llmfleet_tune_grid") or {})
    if not grid:
        grid = dict(DEFAULT_GRID)
        if len(settings["sparks"]) > 1 and found.get("llmfleet_nccl_mode", "ib") == "ib":
            grid.update(SPARK_GRID)
    counts = list(sessions or found.get("llmfleet_tune_sessions") or DEFAULT_SESSIONS)
    shapes = [s for s in found.get("benchmark_scenarios") or [] if s.get("kind") == "session"]
    if not shapes:
        role = root / "roles/benchmark/defaults/main.yml"
        defaults = yaml.safe_load(role.read_text(encoding="utf-8"))["benchmark_scenarios"]
        shapes = [s for s in defaults if s.get("kind") == "session"]
    return grid, counts, shapes[0]


def needs_whole_site(point: dict[str, Any]) -> bool:
    """A point that changes the fabric or the serving layout is served by the whole
    site.yml."""
    return any(key in FABRIC_KEYS or key == LAYOUT_KEY for key in point)
