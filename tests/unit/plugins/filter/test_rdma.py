"""ib_write_bw between hosts: the plan of measurements, and the verdict per rail and for
both rails together."""

from __future__ import annotations

from ansible_collections.llmfleet.cluster.plugins.filter.rdma import (
    FilterModule,
    rdma_measurement_plan,
    rdma_verdict,
)

from .tool_output_samples import PERFTEST_GBITS


def test_registered() -> None:
    assert set(FilterModule().filters()) == {"rdma_measurement_plan", "rdma_verdict"}


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


# Three Sparks as the lab's facts show them: spark-2's second half has MTU 1500, spark-3's
# first half has another primary address, its second none.
def facts(first: str, second: str | None, second_mtu: int = 9000) -> dict:
    halves = {
        "enp1s0f1np1": {"mtu": 9000, "ipv4": {"address": first}},
        "enP2p1s0f1np1": {"mtu": second_mtu} | ({"ipv4": {"address": second}} if second else {}),
    }
    return {"ansible_facts": halves}


HOSTVARS = {
    "spark-1": facts("192.168.100.11", "192.168.101.11"),
    "spark-2": facts("192.168.100.12", "192.168.101.12", second_mtu=1500),
    "spark-3": facts("10.9.9.9", None),
}
PORT_1 = ["enp1s0f1np1", "enP2p1s0f1np1"]


def rail(netdev: str, device: str, port: int, address: str, mtu: list[int]) -> dict:
    return {
        "netdev": netdev,
        "device": device,
        "port": port,
        "server_address": address,
        "mtu": mtu,
    }


def test_the_plan_of_the_lab_pairs_each_host_with_the_next() -> None:
    # What the role's former Jinja loop gave for these facts (recorded before the change).
    first_12 = rail("enp1s0f1np1", "rocep1s0f1", 18515, "192.168.100.12", [9000, 9000])
    second_12 = rail("enP2p1s0f1np1", "roceP2p1s0f1", 18516, "192.168.101.12", [9000, 1500])
    first_23 = rail("enp1s0f1np1", "rocep1s0f1", 18515, "10.9.9.9", [9000, 9000])
    second_23 = rail("enP2p1s0f1np1", "roceP2p1s0f1", 18516, "", [1500, 9000])
    one_two = {"client": "spark-1", "server": "spark-2"}
    two_three = {"client": "spark-2", "server": "spark-3"}
    assert rdma_measurement_plan(["spark-1", "spark-2", "spark-3"], PORT_1, HOSTVARS) == [
        {"test": "rail", **one_two, "rails": [first_12]},
        {"test": "rail", **one_two, "rails": [second_12]},
        {"test": "aggregate", **one_two, "rails": [first_12, second_12]},
        {"test": "rail", **two_three, "rails": [first_23]},
        {"test": "rail", **two_three, "rails": [second_23]},
        {"test": "aggregate", **two_three, "rails": [first_23, second_23]},
    ]


def test_one_rail_or_no_aggregate_measures_rails_alone() -> None:
    plan = rdma_measurement_plan(["spark-1", "spark-2"], PORT_1[:1], HOSTVARS, "20000")
    assert plan == [
        {
            "test": "rail",
            "client": "spark-1",
            "server": "spark-2",
            "rails": [rail("enp1s0f1np1", "rocep1s0f1", 20000, "192.168.100.12", [9000, 9000])],
        }
    ]
    no_aggregate = rdma_measurement_plan(["spark-1", "spark-2"], PORT_1, HOSTVARS, aggregate=False)
    assert [m["test"] for m in no_aggregate] == ["rail", "rail"]


def test_fewer_than_two_hosts_measure_nothing() -> None:
    assert rdma_measurement_plan(["spark-1"], PORT_1, HOSTVARS) == []
    assert rdma_measurement_plan([], PORT_1, HOSTVARS) == []


def test_a_host_without_the_netdev_gives_no_address_and_mtu_0() -> None:
    hostvars = {**HOSTVARS, "gh200-1": {"ansible_facts": {}}}
    (measurement,) = rdma_measurement_plan(["spark-1", "gh200-1"], PORT_1[:1], hostvars)
    assert measurement["rails"][0]["server_address"] == ""
    assert measurement["rails"][0]["mtu"] == [9000, 0]
