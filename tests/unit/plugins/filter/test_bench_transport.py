"""bench_transport_verdict tells RDMA from sockets by the counters around a run."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.filter.bench_transport import FilterModule

verdict = FilterModule().filters()["bench_transport_verdict"]


def sample(host: str, device: str, xmit: int, rcv: int) -> dict:
    return {"item": [host, device], "counters": {"port_xmit_data": xmit, "port_rcv_data": rcv}}


BEFORE = [sample("spark-1", "rocep1s0f1", 1000, 2000), sample("spark-2", "rocep1s0f1", 0, 0)]


def test_moving_counters_pass_rdma() -> None:
    after = [
        sample("spark-1", "rocep1s0f1", 1000 + (3 << 20), 2000),
        sample("spark-2", "rocep1s0f1", 0, 5 << 20),
    ]
    result = verdict(BEFORE, after, "rdma", 1 << 20, 500)
    assert result["passed"] and result["judged"]
    assert result["total_bytes"] == {"spark-1": 3 << 20, "spark-2": 5 << 20}
    assert result["message"].startswith("fabric traffic during the run: spark-1 rocep1s0f1")


def test_frozen_counters_fail_rdma_naming_hosts_and_numbers() -> None:
    after = [sample("spark-1", "rocep1s0f1", 1000, 2000), sample("spark-2", "rocep1s0f1", 0, 4096)]
    result = verdict(BEFORE, after, "rdma", 1 << 20, 12345)
    assert not result["passed"]
    assert result["message"].startswith(
        "NCCL fell back to sockets: the transport is RDMA but the RDMA data counters of "
        "spark-1, spark-2 moved less than 1.0 MiB while the benchmark generated 12345 tokens "
        "(spark-1 rocep1s0f1 0 B, spark-2 rocep1s0f1 4.0 KiB)"
    )


@pytest.mark.parametrize("transport", ["gloo", "socket", "none"])
def test_other_transports_are_reported_not_judged(transport: str) -> None:
    result = verdict(BEFORE, BEFORE, transport)
    assert result["passed"] and not result["judged"]


def test_rdma_without_any_sample_fails() -> None:
    assert verdict([], [], "rdma")["passed"] is False


def test_a_failed_reading_is_an_error_naming_it() -> None:
    failed = [{"item": ["spark-1", "rocep1s0f1"], "failed": True, "msg": "no such device"}]
    with pytest.raises(AnsibleFilterError, match=r"spark-1.*no such device"):
        verdict(failed, failed, "rdma")
