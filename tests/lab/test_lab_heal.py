"""Serving that heals itself, on the served lab (TP=2 across spark-1 and spark-2): the fault
matrix (`llmfleet lab faults`: reboots, a killed rank, a wedged engine, a link down, Ray's head
killed, each during a stream of requests) heals every case without a person (its bounds are
`make bench`'s);
the first request after a start is as fast as the next ones; status shows the last heal; the
doctor tells an API that answers /health but does not generate."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from .conftest import ROOT, Lab
from .test_lab_operate import by_place, doctor, status

ARTIFACTS = ROOT / "artifacts" / "bench"
IN_MAKE_TEST = (
    # The two heals only the probe makes: a wedged engine found by its requests, a runaway
    # allocation by its memory guard. A rank lost and its group restarted (rank 1 killed,
    # spark-1 or spark-2 rebooted) is walked in make test on the Spark sample's path, where
    # Sparks reboot (test_lab_ray_path.py: spark-2 rebooted); the native path is the GH200
    # box's, one host. `make bench` runs them all (262 s of make test's test-lab worker).
    "wedged_rank_0",
    "memory_hog_rank_0",
)


def test_the_fault_matrix_heals_every_case_by_itself(lab: Lab, site, tmp_path: Path) -> None:
    # The reboots, the killed ranks, Ray's head killed and a fabric link down for 30 s
    # (healed as a killed rank is, by the engine's own failure) run in `make bench` (the
    # whole matrix): make test keeps the probe's own heals within CI's time.
    only = [arg for case in IN_MAKE_TEST for arg in ("--case", case)]
    proc = lab.run(
        "llmfleet", "lab", "faults", "--name", lab.name, "--output", str(tmp_path), *only,
        timeout=3600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    [path] = tmp_path.glob("faults-*.json")
    result = json.loads(path.read_text())
    print(path.with_suffix(".md").read_text())
    # Kept beside the benchmark's results, to compare between versions.
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for kept in (path, path.with_suffix(".md")):
        shutil.copy(kept, ARTIFACTS / kept.name)
    cases = {case["name"]: case for case in result["cases"]}
    assert set(cases) == set(IN_MAKE_TEST)
    for case in cases.values():
        # Healed by itself: serving again before the matrix gives up on the case (its bound
        # plus 120 s). Whether within the bound is a speed target, the benchmark's: `make
        # bench` runs the whole matrix on a machine to itself, and its report says it. Here
        # the Ray-path lab starts beside it on two cores (a load average of 16 to 19): a
        # kill healed in 147 s against the bound's 120 (2026-11-28).
        assert case["serving_after_back_s"] is not None, case
        # Once the heal began, requests meet a refused connection (a gateway sends them to
        # another group), never a 500 from a half-dead group.
        assert case["http_500_after_heal"] == 0, case
    # The wedged engine never left /health: only the probe's requests found it.
    [wedged_heal] = cases["wedged_rank_0"]["heals"]
    assert wedged_heal["by"] == "probe"
    assert wedged_heal["reason"].startswith("3 requests in a row got no answer"), wedged_heal
    # The runaway allocation took the node's memory under the floor: the probe's memory guard
    # killed vLLM (and the hog with it) before the node ran out; systemd started vLLM again.
    assert [heal["by"] for heal in cases["memory_hog_rank_0"]["heals"]][:1] == ["memory guard"]
    # Ready means warmed up: the first request after a start is as fast as the next ones
    # (18 s against 0.09 s before the probe's warm-up). Within 2x, plus a second of slack for
    # the other lab's load on this machine's two cores.
    first = result["first_request"]
    assert first["first_s"] <= max(2 * first["next_median_s"], first["next_median_s"] + 1.0), first

    # The node's history lists the heals beside the switches, what serves unchanged.
    history = json.loads(lab.out("spark-1", "cat /var/lib/llmfleet/history.json"))
    heals = [entry for entry in history["entries"] if entry["action"] == "heal"]
    assert len(heals) >= sum(len(case["heals"]) for case in cases.values()), heals
    assert all(entry["from"] == entry["to"] for entry in heals)

    # What else runs on spark-1 answers after the heals (after a reboot of spark-1, in `make
    # bench`'s matrix, claude-code-router once stayed down: its PID file named another process).
    lab.sh(
        "spark-1",
        "for i in $(seq 30); do curl -sf -o /dev/null localhost:3456/health && exit 0; sleep 2;"
        " done; systemctl status llmfleet-claude-code-router --no-pager; exit 1",
        timeout=120,
    )

    # The probe says in its journal what it healed and why, and `llmfleet logs` merges its
    # lines with the ranks'. Its newest 200 entries per host by default: vLLM's line per
    # request of the stream and of the probe's checks took all of spark-1's 200 after the
    # last heal (2026-11-29), hence more of them here.
    journal = lab.out("spark-1", "journalctl -u llmfleet-vllm-probe --no-pager -o cat")
    assert "healing: 3 requests in a row got no answer" in journal, journal[-3000:]
    assert "ready: answered its warm-up requests" in journal
    logs = lab.run(
        "llmfleet", "logs", "-i", "inventory/lab", "--host", "spark-1", "--since", "30m",
        "--lines", "5000", timeout=600,
    )  # fmt: skip
    assert logs.returncode == 0, logs.stderr[-3000:]
    assert [line for line in logs.stdout.splitlines() if "llmfleet-vllm-probe" in line]

    head = status(lab)["hosts"]["spark-1"]
    probe = head["node"]["probe"]
    assert probe["phase"] == "ready", probe
    assert probe["last_heal"]["reason"], probe


def test_the_doctor_tells_an_api_that_answers_health_but_does_not_generate(lab: Lab, site) -> None:
    """The engine core stopped (SIGSTOP) with the probe stopped too, so that nothing heals it
    while the doctor looks: /health stays 200, the doctor's one-token request gets nothing."""
    lab.sh("spark-1", "systemctl stop llmfleet-vllm-probe")
    lab.sh("spark-1", "kill -STOP $(pgrep -f '^VLLM::EngineCore')")
    try:
        code, report = doctor(lab)
    finally:
        lab.sh("spark-1", "kill -CONT $(pgrep -f '^VLLM::EngineCore')")
        lab.sh("spark-1", "systemctl start llmfleet-vllm-probe")
    assert code == 2
    evidence = by_place(report, "evidence")[("generation", "spark-1")]
    assert evidence.startswith("answers /health but does not generate"), evidence
    # Back: the probe answers again for the same start of vLLM.
    lab.sh(
        "spark-1",
        "for i in $(seq 60); do /usr/local/sbin/llmfleet-vllm-probe --ready"
        " /etc/llmfleet/vllm/probe.json && exit 0; sleep 3; done; exit 1",
        timeout=240,
    )
