"""rdma_verify measured for real: results on the controller, traffic in the RDMA counters."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

SYSFS = "/run/llmfleet-lab/sysfs/class/infiniband"


def latest_results() -> dict:
    folder = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "rdma"
    files = sorted(folder.glob("rdma-*.json"))
    assert files, f"no results in {folder}"
    return json.loads(files[-1].read_text())


def test_results_name_every_rail_with_its_bandwidth(host) -> None:
    data = latest_results()
    assert data["passed"] is True
    assert data["hosts"] == ["molecule-spark-1", "molecule-spark-2"]
    rails = {(r["test"], r["device"]) for r in data["results"]}
    assert rails == {
        ("rail", "rocep1s0f1"),
        ("rail", "roceP2p1s0f1"),
        ("aggregate", "rocep1s0f1"),
        ("aggregate", "roceP2p1s0f1"),
    }
    for result in data["results"]:
        assert result["client"] == "molecule-spark-1"
        assert result["server"] == "molecule-spark-2"
        assert 90 <= result["gbits"] <= 112
        assert result["server_gbits"] == result["gbits"]
    assert data["aggregates"][0]["gbits"] >= 175


@pytest.mark.parametrize("device", ["rocep1s0f1", "roceP2p1s0f1"])
def test_the_measurement_really_crossed_each_rail(host, device: str) -> None:
    # the client streams for every run of -D 2: several MB per rail, in 4-byte words
    counter = "port_xmit_data" if host.backend.get_hostname().endswith("1") else "port_rcv_data"
    words = int(host.file(f"{SYSFS}/{device}/ports/1/counters/{counter}").content_string)
    assert words * 4 > 50_000_000


def test_the_idempotence_run_showed_the_result_instead_of_measuring(host) -> None:
    """One measurement for converge and idempotence together: the second run found the
    first's passing result for the same fabric (latest-<fingerprint>.json) and wrote none of
    its own."""
    folder = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "rdma"
    assert len(list(folder.glob("rdma-*.json"))) == 1
    latest = json.loads((folder / "latest.json").read_text())
    assert latest == latest_results()
    assert len(latest["fingerprint"]) == 64
    # What the next run recalls: this fabric's own last result.
    assert json.loads((folder / f"latest-{latest['fingerprint'][:16]}.json").read_text()) == latest
