"""`llmfleet upgrade` on the served lab, as `llmfleet up` left it (vLLM native, from the
node's virtualenv, the mp executor: the GH200 box's path).

A profile with an option the installed vLLM refuses is switched to on both ranks, fails at
once with vLLM's own reason and is rolled back by itself; the endpoint answers from the
profile that served before and the history on each node says what happened. Another revision
of the model is fetched, copied and served, and the next `llmfleet up` serves the
inventory's again.

The upgrades of vLLM's image (one that refuses its arguments rolls back by itself, a good
one sticks through the benchmark gate, the images beyond the last ones that served go, a
slower profile fails the gate) run on the path where an image serves, the Spark sample's:
test_lab_ray_path.py."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from .conftest import ROOT, Lab, run_up, vllm_started

NODES = ("spark-1", "spark-2")
KEY = "llmfleet-lab-key"  # inventory/lab/group_vars/all/serving.yml
HUB_TOKEN = "llmfleet-lab-hub-token"  # the same file's model_weights_hub_token
MODEL = "/opt/models/llmfleet-tiny"
# Where model_weights keeps the files a revision replaced (model_weights_keep_replaced).
KEPT = "/opt/models/.llmfleet-tiny.replaced"
PROFILES = yaml.safe_load((ROOT / "roles/vllm_server/defaults/main.yml").read_text())[
    "vllm_server_profiles"
]


def history(lab: Lab, node: str) -> list[dict]:
    """The node's switches (up, upgrade, rollback), without the serving probe's heals: a
    rank that crashes during an upgrade is healed, and recorded, beside it."""
    entries = json.loads(lab.out(node, "cat /var/lib/llmfleet/history.json"))["entries"]
    return [entry for entry in entries if entry["action"] != "heal"]


def answers(lab: Lab) -> bool:
    body = json.dumps(
        {"model": "llmfleet-tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    )
    run = lab.sh(
        "spark-1",
        f"curl -sf -H 'Authorization: Bearer {KEY}' -H 'Content-Type: application/json'"
        f" -d '{body}' http://127.0.0.1:8000/v1/chat/completions",
        check=False,
    )
    return run.returncode == 0 and bool(json.loads(run.stdout).get("choices"))


# The lab's profile with a KV cache dtype this vLLM build does not know: the validation play
# cannot tell (it is vLLM's own list), vLLM refuses it as it starts.
REFUSED_PROFILES = {
    "tiny_lab": PROFILES["tiny_lab"],
    "tiny_lab_fp4": {**PROFILES["tiny_lab"], "kv_cache_dtype": "fp4"},
}


# Extended: the rollback of an upgrade whose vLLM refuses to start, failed at once with vLLM's
# reason, is walked in make test on the Sparks' path (test_lab_ray_path.py's broken image);
# this is the native deployment's (the GH200 box's), 4.7 of CI's minutes (2026-11-27).
@pytest.mark.extended
def test_a_profile_vllm_refuses_fails_at_once_and_is_rolled_back(lab: Lab, site) -> None:
    """The native deployment's upgrade: both ranks restart with the new profile, the wait
    fails as soon as they exit (with vLLM's reason, not after the start timeout), and both
    go back to the profile that served, proved by the same checks."""
    started = {node: vllm_started(lab, node) for node in NODES}
    profiles = json.dumps({"vllm_server_profiles": REFUSED_PROFILES})
    run = lab.run(
        "llmfleet", "upgrade", "-i", "inventory/lab", "--plain", "--profile", "tiny_lab_fp4",
        "-e", profiles, timeout=1800,
    )  # fmt: skip
    out = " ".join(run.stdout.split())
    assert run.returncode == 2, out[-6000:]
    # The wait failed as soon as the ranks exited, with vLLM's own reason, not after
    # vllm_server_start_timeout; the module says how long after the restart it noticed.
    assert (
        "FAILED: Wait until vLLM answers /health, failing at once if this rank's process exits"
        in out
    ), out[-6000:]
    assert re.search(
        r"exited [\d.]+ s into the wait: vllm serve: error: argument --kv-cache-dtype:"
        r" invalid choice: 'fp4'",
        out,
    ), out[-6000:]
    assert "was not ready after" not in out
    assert "It was rolled back: the cluster serves" in out, out[-6000:]
    for node in NODES:
        # Restarted twice (the switch, the way back), and serving the lab's profile again.
        assert vllm_started(lab, node) != started[node], node
        serve = lab.out(node, "cat /etc/llmfleet/vllm/serve.yaml")
        assert "kv-cache-dtype" not in serve and "max-num-seqs: 8" in serve, serve
        last = history(lab, node)[-1]
        assert (last["action"], last["outcome"]) == ("upgrade", "rolled back"), last
        assert (last["from"]["profile"], last["to"]["profile"]) == ("tiny_lab", "tiny_lab_fp4")
        assert "invalid choice: 'fp4'" in last["reason"], last
    assert answers(lab)
    # systemd gives up after its start limit instead of restarting a refused start for ever
    # (6 starts in 5 minutes; waiting out six real failed starts would cost two minutes, so
    # the limits are read), and kills a vLLM that ignores SIGTERM while it starts after
    # vllm_server_stop_timeout (the way back restarted a rank in the middle of a start).
    limits = lab.out(
        "spark-1",
        "systemctl show -p StartLimitBurst -p StartLimitIntervalUSec -p TimeoutStopUSec"
        " llmfleet-vllm",
    )
    assert sorted(limits.split()) == [
        "StartLimitBurst=6", "StartLimitIntervalUSec=5min", "TimeoutStopUSec=20s",
    ], limits  # fmt: skip


def hub_commit(lab: Lab, branch: str) -> str:
    """The commit a branch of the lab's tiny model names (the lab Hub's refs)."""
    refs = json.loads(
        lab.out(
            "spark-1",
            f"curl -sf -H 'Authorization: Bearer {HUB_TOKEN}'"
            " http://hub:8080/api/models/llmfleet/llmfleet-tiny/refs",
        )
    )
    return next(b["targetCommit"] for b in refs["branches"] if b["name"] == branch)


def release(lab: Lab, node: str) -> str:
    """Which revision of the lab's model a node holds: branch next's says so in a file."""
    facts = json.loads(lab.out(node, f"cat {MODEL}/llmfleet-model.json"))
    return str(facts.get("release", "main"))


# Extended: a fetch, a copy and two restarts of both ranks (13 of CI's 90 minutes,
# 2026-11-28); `llmfleet upgrade` and its rollback run in make test on the users' path
# (test_lab_ray_path: an upgrade to a broken image rolls back by itself).
@pytest.mark.extended
def test_an_upgrade_to_another_model_revision_sticks_until_up_serves_the_inventorys(
    lab: Lab, site
) -> None:
    """`--model-revision`: the new commit is fetched on spark-1 and copied to spark-2 before
    anything stops, both ranks restart with it and it is kept; the next `llmfleet up` serves
    the revision the inventory names (main) again."""
    main, following = hub_commit(lab, "main"), hub_commit(lab, "next")
    assert main != following
    started = {node: vllm_started(lab, node) for node in NODES}
    run = lab.run(
        "llmfleet", "upgrade", "-i", "inventory/lab", "--plain", "--model-revision", following,
        timeout=1800,
    )  # fmt: skip
    out = " ".join(run.stdout.split())
    assert run.returncode == 0, out[-6000:]
    assert re.search(rf'to keep this, set {{[^}}]*"model_weights_hub_revision": "{following}"', out)
    for node in NODES:
        assert release(lab, node) == "next", node
        assert vllm_started(lab, node) != started[node], node
        last = history(lab, node)[-1]
        assert (last["action"], last["outcome"]) == ("upgrade", "ok"), last
        assert (last["from"]["model_revision"], last["to"]["model_revision"]) == (main, following)
    assert answers(lab)

    # A new revision through `llmfleet up` (its model_weights and vllm_server parts): the
    # weights of main again, every rank restarted with them, the marker the new weights
    # left until that restart gone. Main's file came back from where each node kept it when
    # next replaced it: nothing was downloaded or copied.
    started = {node: vllm_started(lab, node) for node in NODES}
    up = run_up(lab, "--tags", "model_weights,vllm_server")
    assert up.returncode == 0, up.stdout[-6000:]
    fetched = "skipping: model_weights : Download the missing files from the hub"
    assert f"[spark-1] {fetched}" in up.stdout, up.stdout[-6000:]
    assert "changed: model_weights : Wait for the copy" not in up.stdout, up.stdout[-6000:]
    for node in NODES:
        assert release(lab, node) == "main", node
        assert vllm_started(lab, node) != started[node], node
        marker = "/var/lib/llmfleet/model_weights/opt_models_llmfleet-tiny.changed"
        assert lab.sh(node, f"test -e {marker}", check=False).returncode == 1, node
        # What is kept now is next's file (main's was taken back).
        kept = lab.out(node, f"cat {KEPT}/git_sha1-* | sort -u")
        assert '"release": "next"' in kept, (node, kept)
        last = history(lab, node)[-1]
        assert (last["action"], last["to"]["model_revision"]) == ("up", main), last
    assert answers(lab)
