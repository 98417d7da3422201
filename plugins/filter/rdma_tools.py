"""Parse the output of RDMA and NIC tools (ibdev2netdev, ethtool, perftest) and judge it.

The parsers turn each tool's text into data; ``fabric_checks`` turns the outputs gathered
on one host into a list of pass/fail findings that name the host's interface, the peer
and what was seen, so a play can report every problem at once.
"""

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError

IBDEV2NETDEV_LINE = re.compile(
    r"^(?:\S+\s+)?(?P<device>\S+)(?:\s+\(.*?\).*?)?\s+port\s+(?P<port>\d+)"
    r"(?:\s+\((?P<port_state>[A-Z_]+)\))?\s+==>\s+(?P<netdev>\S+)\s+\((?P<state>\w+)\)\s*$"
)
ETHTOOL_SPEED = re.compile(r"^\s*Speed:\s*(?P<speed>\d+)Mb/s\s*$", re.M)
ETHTOOL_LINK = re.compile(r"^\s*Link detected:\s*(?P<link>yes|no)\s*$", re.M)
PERFTEST_HEADER = re.compile(r"#bytes\s+#iterations\s+BW peak\[(?P<unit>[^\]]+)\]")
PERFTEST_ROW = re.compile(
    r"^\s*(?P<bytes>\d+)\s+(?P<iterations>\d+)\s+(?P<peak>[\d.]+)\s+(?P<average>[\d.]+)"
    r"\s+(?P<msg_rate>[\d.]+)\s*$",
    re.M,
)


def ibdev2netdev_map(stdout):
    """``ibdev2netdev`` (plain or -v) -> ``{netdev: {device, port, state}}``."""
    result = {}
    for line in str(stdout).splitlines():
        match = IBDEV2NETDEV_LINE.match(line.strip())
        if match:
            result[match["netdev"]] = {
                "device": match["device"],
                "port": int(match["port"]),
                "state": match["state"],
            }
    return result


def ethtool_link(stdout):
    """``ethtool IFACE`` -> ``{speed_mbps: int or None, link_detected: bool}``."""
    text = str(stdout)
    speed = ETHTOOL_SPEED.search(text)
    link = ETHTOOL_LINK.search(text)
    return {
        "speed_mbps": int(speed["speed"]) if speed else None,
        "link_detected": bool(link and link["link"] == "yes"),
    }


def perftest_report(stdout):
    """A perftest ``*_bw`` report -> bytes, iterations, peak/average bandwidth, message rate.

    The bandwidth unit follows the report: ``Gb/sec`` with ``--report_gbits``, else
    ``MB/sec`` (or ``MiB/sec``); ``average_gbits`` is always in Gb/s.
    """
    text = str(stdout)
    header = PERFTEST_HEADER.search(text)
    row = PERFTEST_ROW.search(text, header.end()) if header else None
    if not header or not row:
        tail = " | ".join(text.strip().splitlines()[-3:]) or "(no output)"
        raise AnsibleFilterError(f"no perftest bandwidth report found; the output ended: {tail}")
    unit = header["unit"]
    average = float(row["average"])
    if unit.startswith("Gb"):
        gbits = average
    elif unit.startswith("MiB"):
        gbits = average * 1024 * 1024 * 8 / 1e9
    else:  # MB/sec
        gbits = average * 1e6 * 8 / 1e9
    return {
        "bytes": int(row["bytes"]),
        "iterations": int(row["iterations"]),
        "peak": float(row["peak"]),
        "average": average,
        "unit": unit,
        "msg_rate_mpps": float(row["msg_rate"]),
        "average_gbits": round(gbits, 2),
    }


def _finding(what, ok, msg):
    return {"what": what, "ok": bool(ok), "msg": msg}


def fabric_checks(ibdev2netdev_stdout, ethtool_results, rdma_devices, ping_results, expect):
    """Judge one host's fabric from its tools' outputs.

    ``ethtool_results`` and ``ping_results`` are the ``results`` of looped command tasks
    (items: a netdev; and ``{netdev, peer, address}``). ``rdma_devices`` are the facts of
    ``llmfleet.cluster.rdma_devices``. ``expect`` holds ``netdevs``, ``speed_mbps``, ``mtu``
    and ``ping_targets`` (every ``{netdev, peer, address}``, address empty when the peer
    has none on that netdev, so it was not pinged).
    """
    try:
        netdevs = list(expect["netdevs"])
        speed = int(expect["speed_mbps"])
        payload = int(expect["mtu"]) - 28
    except (KeyError, TypeError, ValueError) as error:
        raise AnsibleFilterError(f"expect needs netdevs, speed_mbps and mtu: {error}") from error
    findings = []
    mapping = ibdev2netdev_map(ibdev2netdev_stdout)
    by_netdev = {}
    for device, facts in (rdma_devices or {}).items():
        for netdev in facts.get("netdevs", []):
            by_netdev[netdev] = (device, facts)
    for netdev in netdevs:
        seen = mapping.get(netdev)
        if seen is None:
            findings.append(
                _finding(f"{netdev} rdma", False, f"{netdev}: ibdev2netdev lists no RDMA device")
            )
        else:
            findings.append(
                _finding(
                    f"{netdev} rdma",
                    seen["state"] == "Up",
                    f"{netdev}: ibdev2netdev shows {seen['device']} port {seen['port']} "
                    f"{seen['state']}, expected Up",
                )
            )
        device, facts = by_netdev.get(netdev, (None, {}))
        layers = sorted({p.get("link_layer", "?") for p in facts.get("ports", {}).values()})
        findings.append(
            _finding(
                f"{netdev} link layer",
                layers == ["Ethernet"],
                f"{netdev}: RDMA device {device or '(none)'} has link layer "
                f"{', '.join(layers) or 'unknown'}, expected Ethernet (RoCE)",
            )
        )
    for result in ethtool_results or []:
        netdev = result.get("item")
        link = ethtool_link(result.get("stdout", ""))
        shown = f"{link['speed_mbps']}Mb/s" if link["speed_mbps"] else "no speed"
        findings.append(
            _finding(
                f"{netdev} speed",
                link["link_detected"] and link["speed_mbps"] == speed,
                f"{netdev}: ethtool shows {shown}, link detected "
                f"{'yes' if link['link_detected'] else 'no'}; expected {speed}Mb/s with link",
            )
        )
    results = {
        (r.get("item") or {}).get("netdev", "") + ">" + (r.get("item") or {}).get("peer", ""): r
        for r in ping_results or []
    }
    for target in expect.get("ping_targets", []):
        netdev, peer, address = target["netdev"], target["peer"], target.get("address")
        what = f"{netdev} -> {peer}"
        if not address:
            findings.append(
                _finding(
                    what,
                    False,
                    f"{what}: {peer} has no IPv4 address on {netdev} "
                    "(its link is down, or cx7_network has not run there)",
                )
            )
            continue
        result = results.get(f"{netdev}>{peer}", {})
        lines = (result.get("stdout", "") + "\n" + result.get("stderr", "")).strip().splitlines()
        summary = next(
            (line for line in lines if "packet loss" in line), lines[-1] if lines else ""
        )
        findings.append(
            _finding(
                what,
                result.get("rc") == 0,
                f"{what} ({address}): ping -M do -s {payload} failed: "
                f"{summary.strip() or 'not run'}",
            )
        )
    return findings


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
    """RDMA and NIC tool parsers."""

    def filters(self):
        return {
            "ibdev2netdev_map": ibdev2netdev_map,
            "ethtool_link": ethtool_link,
            "perftest_report": perftest_report,
            "fabric_checks": fabric_checks,
            "rdma_verdict": rdma_verdict,
        }
