"""The model's weights on the lab: fetched once from the lab's Hub with huggingface_hub,
copied to spark-2 over its CX7 link, every byte verified, damage found by name and
repaired, nothing moved when nothing changed."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from .conftest import Lab, changed_counts, run_up

MODEL = "/opt/models/llmfleet-tiny"
STATE = "/var/lib/llmfleet/model_weights/opt_models_llmfleet-tiny.json"
# Left by a new revision until vLLM restarted with it (vllm_server removes it).
CHANGED_MARKER = STATE.replace(".json", ".changed")
# spark-2's half of CX7 port 1 (inventory/lab: llmfleet_fabric_ports [1]).
FABRIC_DEVICE = "rocep1s0f1"


def weights_only(lab: Lab, *extra: str) -> subprocess.CompletedProcess[str]:
    """`llmfleet up --tags model_weights`: the whole inventory checked, then only the role."""
    return run_up(lab, "--tags", "model_weights", *extra)


def received_bytes(lab: Lab, node: str) -> int:
    run = lab.run(
        "ansible", node, "-i", "inventory/lab", "-o",
        "-m", "llmfleet.cluster.rdma_counters", "-a", f"device={FABRIC_DEVICE}",
        env={"ANSIBLE_STDOUT_CALLBACK": "default", "ANSIBLE_CALLBACK_RESULT_FORMAT": "json"},
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    return int(json.loads(run.stdout.split("=>", 1)[1])["counters"]["port_rcv_data"])


def model_bytes(lab: Lab, node: str) -> int:
    return int(lab.out(node, f"find {MODEL} -path '*/.cache' -prune -o -type f -printf '%s\\n'"
                       " | awk '{ total += $1 } END { print total }'"))  # fmt: skip


def checksums(lab: Lab, node: str, folder: str = MODEL) -> str:
    return lab.out(node, f"cd {folder} && find . -path ./.cache -prune -o -type f -print0"
                         " | sort -z | xargs -0 sha256sum")  # fmt: skip


def test_the_model_came_from_the_hub_to_spark_1_and_over_the_fabric_to_spark_2(
    lab: Lab, site
) -> None:
    assert site.returncode == 0, site.stdout[-6000:]
    assert checksums(lab, "spark-1") == checksums(lab, "spark-2")
    records = {node: json.loads(lab.out(node, f"cat {STATE}")) for node in ("spark-1", "spark-2")}
    revisions = {node: record["source"]["revision"] for node, record in records.items()}
    assert len(set(revisions.values())) == 1, revisions
    assert re.fullmatch(r"[0-9a-f]{40}", revisions["spark-1"]), revisions
    # spark-2 never spoke to the Hub: its copy came from spark-1.
    assert "huggingface" not in lab.out("spark-2", f"ls -a {MODEL}/.cache 2>/dev/null || true")


# Extended: the site's first run copies the model to spark-2 over the fabric (the first
# test) and the flipped byte's repair copies a file again; the progress lines of a copy are
# those of transfer_progress, unit-tested.
@pytest.mark.extended
def test_a_copy_moves_the_model_over_spark_2s_cx7_link(lab: Lab, site) -> None:
    size = model_bytes(lab, "spark-1")
    lab.sh("spark-2", f"rm -rf {MODEL} {STATE}")
    before = received_bytes(lab, "spark-2")
    # At 1 MiB/s the lab's 5 MB take about 5 s: the copy shows its bytes every second.
    proc = weights_only(
        lab, "-e", "model_weights_copy_rate_limit_mib=1", "-e", "model_weights_progress_interval=1"
    )
    assert proc.returncode == 0, proc.stdout[-6000:]
    received = received_bytes(lab, "spark-2") - before
    assert received >= size, (received, size)
    progress = re.findall(
        r"^\[spark-2\] copy from spark-1: [\d.]+ [KM]?B of ([\d.]+ MB) \((\d+)%\),"
        r" ([\d.]+) ([KM]?B)/s$",
        proc.stdout,
        re.MULTILINE,
    )
    assert len(progress) >= 2, proc.stdout[-6000:]
    assert {total for total, *_ in progress} == {f"{size / 1e6:.1f} MB"}, progress
    assert 0 < int(progress[0][1]) < 100, progress
    # Held to the limit: no line says more than 1 MiB/s (1.05 MB/s), with some slack.
    assert all(unit != "MB" or float(rate) <= 1.2 for *_, rate, unit in progress), progress
    assert checksums(lab, "spark-2") == checksums(lab, "spark-1")
    # Fetched once: spark-1 already held a verified copy; it only served it to spark-2.
    assert "[spark-1] skipping: model_weights : Download the missing files" in proc.stdout
    assert "[spark-1] changed: model_weights : Start the rsync daemon" in proc.stdout


def test_a_flipped_byte_on_spark_2_is_named_and_only_that_file_copied_again(lab: Lab, site) -> None:
    flip = (
        "import sys; p = sys.argv[1]; f = open(p, 'r+b'); f.seek(4096); b = f.read(1);"
        " f.seek(4096); f.write(bytes([b[0] ^ 0xFF])); f.close()"
    )
    lab.sh("spark-2", f'python3 -c "{flip}" {MODEL}/model.safetensors')
    untouched = lab.out("spark-2", f"stat -c %Y.%i {MODEL}/tokenizer.json")
    assert checksums(lab, "spark-2") != checksums(lab, "spark-1")
    proc = weights_only(lab)
    assert proc.returncode == 0, proc.stdout[-6000:]
    flat = " ".join(proc.stdout.split())
    assert re.search(r"model\.safetensors: sha256 [0-9a-f]+", flat), flat[-6000:]
    assert checksums(lab, "spark-2") == checksums(lab, "spark-1")
    assert lab.out("spark-2", f"stat -c %Y.%i {MODEL}/tokenizer.json") == untouched
    # A repair leaves vLLM as it is: only a new revision leaves the marker that restarts it
    # (the revision upgrade of test_lab_upgrade.py shows that one).
    for node in ("spark-1", "spark-2"):
        assert lab.sh(node, f"test -e {CHANGED_MARKER}", check=False).returncode == 1, node


# Extended: make test's second runs of model_weights change nothing in
# test_site_a_second_time_changes_nothing (the whole site) and in the controller's test below.
@pytest.mark.extended
def test_a_second_run_moves_and_changes_nothing(lab: Lab, site) -> None:
    first = weights_only(lab)
    assert first.returncode == 0, first.stdout[-6000:]
    proc = weights_only(lab)
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert set(changed_counts(proc.stdout).values()) == {0}, proc.stdout[-6000:]
    for step in ("Download the missing files", "Start the rsync daemon", "Pull the missing"):
        assert f"ok: model_weights : {step}" not in proc.stdout, step
        assert f"changed: model_weights : {step}" not in proc.stdout, step


# Extended: four runs of the role (6 of CI's 90 minutes, 2026-11-28); the copy over the
# fabric is walked by the site run (the Hub to spark-1, then spark-2) and the repair of a
# flipped byte; the controller as the source is not.
@pytest.mark.extended
def test_fetched_on_the_controller_pushed_to_spark_1_and_spread_over_the_fabric(
    lab: Lab, site, tmp_path: Path
) -> None:
    # spark-1 lost its weights and huggingface_hub's bookkeeping, spark-2 a small file.
    lab.sh("spark-1", f"rm -rf {MODEL}/model.safetensors {MODEL}/.cache")
    lab.sh("spark-2", f"rm -f {MODEL}/tokenizer.json")
    controller = {
        "model_weights_fetch_on_controller": True,
        "model_weights_controller_dir": str(tmp_path),
    }
    proc = weights_only(lab, "-e", json.dumps(controller))
    assert proc.returncode == 0, proc.stdout[-6000:]
    # The controller downloaded (its folder has huggingface_hub's bookkeeping), verified and
    # pushed; spark-1 never spoke to the Hub; spark-2 copied from spark-1.
    folder = tmp_path / "llmfleet--llmfleet-tiny"
    assert (folder / ".cache/huggingface").is_dir()
    for host, step in (
        ("spark-1", "Wait for the download on the controller"),
        ("spark-1", "Wait for the push"),
        ("spark-2", "Wait for the copy from the source host"),
    ):
        assert f"[{host}] changed: model_weights : {step}" in proc.stdout, step
    assert "huggingface" not in lab.out("spark-1", f"ls -a {MODEL}/.cache 2>/dev/null || true")
    local = subprocess.run(
        "find . -path ./.cache -prune -o -type f -print0 | sort -z | xargs -0 sha256sum",
        shell=True, cwd=folder, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert checksums(lab, "spark-1") == checksums(lab, "spark-2") == local
    # Nothing to fetch or push a second time: the controller's copy verifies from its record.
    again = weights_only(lab, "-e", json.dumps(controller))
    assert again.returncode == 0, again.stdout[-6000:]
    assert set(changed_counts(again.stdout).values()) == {0}, again.stdout[-6000:]
    assert "Verify what the controller already holds" not in again.stdout

    # That folder as the source (model_weights_source controller), into another model folder:
    # hashed on the controller, pushed to spark-1, copied from there to spark-2.
    pushed = "/opt/models/llmfleet-tiny-pushed"
    records = "/var/lib/llmfleet/model_weights/opt_models_llmfleet-tiny-pushed"
    source = {
        "model_weights_source": "controller",
        "model_weights_source_path": str(folder),
        "model_weights_path": pushed,
        "model_weights_controller_dir": str(tmp_path),
    }
    try:
        proc = weights_only(lab, "-e", json.dumps(source))
        assert proc.returncode == 0, proc.stdout[-6000:]
        for host, step in (
            ("spark-1", "Hash the controller's folder, as the user running Ansible"),
            ("spark-1", "Wait for the push"),
            ("spark-2", "Wait for the copy from the source host"),
        ):
            assert f"[{host}] changed: model_weights : {step}" in proc.stdout, step
        download = "Download the missing files from the hub, on the controller"
        assert f"[spark-1] skipping: model_weights : {download}" in proc.stdout, proc.stdout[-6000:]
        for node in ("spark-1", "spark-2"):
            assert checksums(lab, node, pushed) == local, node
            # Root's files, readable by all, whoever owned them on the controller.
            owners = lab.out(node, f"cd {pushed} && stat -c '%U %a' config.json model.safetensors")
            assert set(owners.split("\n")) - {""} == {"root 644"}, (node, owners)
            record = json.loads(lab.out(node, f"cat {records}.json"))
            assert record["source"] == {"source": "controller", "path": str(folder)}, record
        # The controller's record of its folder is kept beside its models, not in the folder.
        assert list((tmp_path / ".state").glob("*.source.json")), list(tmp_path.rglob("*.json"))
        again = weights_only(lab, "-e", json.dumps(source))
        assert again.returncode == 0, again.stdout[-6000:]
        assert set(changed_counts(again.stdout).values()) == {0}, again.stdout[-6000:]
    finally:
        for node in ("spark-1", "spark-2"):
            lab.sh(node, f"rm -rf {pushed} {records}.*")


# Extended: two runs of the role (2 minutes); the copy between nodes over the fabric is
# walked by the site run and the flipped byte's repair.
@pytest.mark.extended
def test_a_folder_on_one_node_is_copied_to_every_node(lab: Lab, site) -> None:
    copy = "/opt/models/llmfleet-tiny-copy"
    proc = run_up(
        lab, "--tags", "model_weights",
        "-e", "model_weights_source=host",
        "-e", f"model_weights_source_path={MODEL}",
        "-e", f"model_weights_path={copy}",
    )  # fmt: skip
    try:
        assert proc.returncode == 0, proc.stdout[-6000:]
        # spark-1 pulls from its own daemon too: the source folder is not the model's folder.
        for node in ("spark-1", "spark-2"):
            assert lab.out(
                node, f"cd {copy} && sha256sum config.json model.safetensors"
            ) == lab.out("spark-1", f"cd {MODEL} && sha256sum config.json model.safetensors"), node
            record = json.loads(
                lab.out(
                    node, "cat /var/lib/llmfleet/model_weights/opt_models_llmfleet-tiny-copy.json"
                )
            )
            assert record["source"] == {"source": "host", "host": "spark-1", "path": MODEL}, record
    finally:
        for node in ("spark-1", "spark-2"):
            records = "/var/lib/llmfleet/model_weights/opt_models_llmfleet-tiny"
            lab.sh(node, f"rm -rf {copy} {records}-copy.* {records}.source.json")
