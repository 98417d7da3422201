"""The verdict on ib_write_bw measurements: per rail, both rails together."""

from __future__ import annotations

from ansible_collections.llmfleet.cluster.plugins.filter.rdma import FilterModule, rdma_verdict

from .tool_output_samples import PERFTEST_GBITS


def test_registered() -> None:
    assert set(FilterModule().filters()) == {"rdma_verdict"}


RAIL_A = {
    "netdev": "enp1s0f1np1",
    "device": "rocep1s0f1",
    "port": 18515,
    "server_address": "192.168.100.12",
}
RAIL_B = {
    "netdev": "enP2p1s0f1np1",
    "device": "roceP2p1s0f1",
    "port": 18516,
    "server_address": "192.168.101.12",
}


def report(gbits: float) -> str:
    return PERFTEST_GBITS.replace("106.51", f"{gbits:.2f}")


def measurement(test: str, rails: list[dict], outputs: list[str]) -> dict:
    return {
        "test": test,
        "client": "spark-1",
        "server": "spark-2",
        "rails": rails,
        "clients": outputs,
        "servers": outputs,
    }


def test_healthy_rails_and_aggregate_pass() -> None:
    verdict = rdma_verdict(
        [
            measurement("rail", [RAIL_A], [report(106.2)]),
            measurement("rail", [RAIL_B], [report(105.8)]),
            measurement("aggregate", [RAIL_A, RAIL_B], [report(98.0), report(97.5)]),
        ],
        90,
        175,
    )
    assert verdict["passed"] is True
    assert verdict["failures"] == []
    assert verdict["aggregates"] == [
        {
            "client": "spark-1",
            "server": "spark-2",
            "rails": "enp1s0f1np1+enP2p1s0f1np1",
            "gbits": 195.5,
        }
    ]
    assert [r["gbits"] for r in verdict["results"]] == [106.2, 105.8, 98.0, 97.5]
    assert verdict["results"][0]["device"] == "rocep1s0f1"
    assert "rail enp1s0f1np1 spark-1 -> spark-2: 106.20 Gb/s" in verdict["summary"]


def test_slow_rail_is_named_with_its_number() -> None:
    verdict = rdma_verdict([measurement("rail", [RAIL_B], [report(40.0)])], 90, 175)
    assert verdict["passed"] is False
    assert verdict["failures"] == [
        "rail enP2p1s0f1np1 (roceP2p1s0f1) spark-1 -> spark-2: 40.00 Gb/s, "
        "below the 90 Gb/s floor per rail"
    ]


def test_low_aggregate_and_missing_report() -> None:
    verdict = rdma_verdict(
        [
            measurement("aggregate", [RAIL_A, RAIL_B], [report(80.0), report(80.0)]),
            measurement("rail", [RAIL_A], [" Couldn't connect to 192.168.100.12:18515"]),
        ],
        90,
        175,
    )
    assert (
        "aggregate enp1s0f1np1+enP2p1s0f1np1 spark-1 -> spark-2: 160.00 Gb/s, below the "
        "175 Gb/s floor for both rails together"
    ) in verdict["failures"]
    assert any(
        f.startswith("rail enp1s0f1np1 (rocep1s0f1) spark-1 -> spark-2: ib_write_bw gave no report")
        and "Couldn't connect" in f
        for f in verdict["failures"]
    )


def test_no_measurement_does_not_pass() -> None:
    assert rdma_verdict([], 90, 175)["passed"] is False
