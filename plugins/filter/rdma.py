"""Filters for the RDMA bandwidth measurement between hosts (ib_write_bw): what is measured
between which hosts, and the verdict on the numbers."""

from __future__ import annotations

import itertools

from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.filter.cx7 import cx7_rdma_device
from ansible_collections.llmfleet.cluster.plugins.filter.fabric import primary_ipv4
from ansible_collections.llmfleet.cluster.plugins.filter.tool_output import perftest_report


def _rail(netdev, port, client_facts, server_facts):
    client, server = client_facts.get(netdev) or {}, server_facts.get(netdev) or {}
    return {
        "netdev": netdev,
        "device": cx7_rdma_device(netdev),
        "port": port,
        "server_address": primary_ipv4(server_facts, netdev),
        "mtu": [client.get("mtu", 0), server.get("mtu", 0)],
    }


def rdma_measurement_plan(hosts, netdevs, hostvars, base_port=18515, aggregate=True):
    """The ``ib_write_bw`` measurements between ``hosts`` in pairs (each the client of the
    next): every rail (CX7 netdev) alone, then, with ``aggregate`` and two rails or more,
    every rail at once. A rail is ``{netdev, device, port, server_address, mtu}``: its RDMA
    device, its server's TCP port (``base_port`` + its index), the server's IPv4 on it and
    the MTUs of client and server, from their gathered facts in ``hostvars``."""
    hosts = list(hosts)
    facts = {host: hostvars[host].get("ansible_facts") or {} for host in hosts}
    plan = []
    for client, server in itertools.pairwise(hosts):
        rails = [
            _rail(netdev, int(base_port) + index, facts[client], facts[server])
            for index, netdev in enumerate(netdevs)
        ]
        pair = {"client": client, "server": server}
        plan += [{"test": "rail", **pair, "rails": [rail]} for rail in rails]
        if aggregate and len(rails) > 1:
            plan.append({"test": "aggregate", **pair, "rails": rails})
    return plan


def _rail_report(stdout):
    try:
        return perftest_report(stdout), ""
    except AnsibleFilterError as error:
        return None, str(error)


def rdma_verdict(measurements, min_rail_gbits, min_aggregate_gbits):
    """Judge ``ib_write_bw`` measurements against per-rail and aggregate pass marks.

    Each measurement is ``{test: rail|aggregate, client, server, rails: [{netdev, device,
    port, server_address}], clients: [stdout per rail], servers: [stdout per rail]}``.
    Returns ``{results, aggregates, summary, failures, passed}``; ``results`` has one entry
    per rail measured (host, device, rail, Gb/s as the client and the server saw it).
    """
    floor_rail, floor_total = float(min_rail_gbits), float(min_aggregate_gbits)
    results, aggregates, failures = [], [], []
    for measurement in measurements or []:
        test = measurement["test"]
        pair = f"{measurement['client']} -> {measurement['server']}"
        clients = list(measurement.get("clients", []))
        servers = list(measurement.get("servers", []))
        total, complete = 0.0, True
        for index, rail in enumerate(measurement["rails"]):
            client_out = clients[index] if index < len(clients) else ""
            server_out = servers[index] if index < len(servers) else ""
            report, error = _rail_report(client_out)
            server_report, _server_error = _rail_report(server_out)
            name = f"rail {rail['netdev']} ({rail['device']}) {pair}"
            entry = {
                "test": test,
                "client": measurement["client"],
                "server": measurement["server"],
                "netdev": rail["netdev"],
                "device": rail["device"],
                "port": rail["port"],
                "server_address": rail.get("server_address", ""),
                "gbits": report["average_gbits"] if report else None,
                "server_gbits": server_report["average_gbits"] if server_report else None,
                "error": error,
            }
            results.append(entry)
            if report is None:
                complete = False
                failures.append(
                    f"{name}{' [aggregate run]' if test == 'aggregate' else ''}: "
                    f"ib_write_bw gave no report: {error}"
                )
                continue
            total += report["average_gbits"]
            if test == "rail" and report["average_gbits"] < floor_rail:
                failures.append(
                    f"{name}: {report['average_gbits']:.2f} Gb/s, below the "
                    f"{floor_rail:g} Gb/s floor per rail"
                )
        if test == "aggregate":
            rails = "+".join(r["netdev"] for r in measurement["rails"])
            aggregates.append(
                {
                    "client": measurement["client"],
                    "server": measurement["server"],
                    "rails": rails,
                    "gbits": round(total, 2) if complete else None,
                }
            )
            if complete and total < floor_total:
                failures.append(
                    f"aggregate {rails} {pair}: {total:.2f} Gb/s, below the "
                    f"{floor_total:g} Gb/s floor for both rails together"
                )
    summary = [
        f"{r['test']} {r['netdev']} {r['client']} -> {r['server']}: "
        + (f"{r['gbits']:.2f} Gb/s" if r["gbits"] is not None else "no report")
        for r in results
    ] + [
        f"aggregate {a['rails']} {a['client']} -> {a['server']}: "
        + (f"{a['gbits']:.2f} Gb/s" if a["gbits"] is not None else "incomplete")
        for a in aggregates
    ]
    return {
        "results": results,
        "aggregates": aggregates,
        "summary": summary,
        "failures": failures,
        "passed": not failures and bool(results),
    }


class FilterModule:
    """RDMA measurement filters."""

    def filters(self):
        return {"rdma_measurement_plan": rdma_measurement_plan, "rdma_verdict": rdma_verdict}
