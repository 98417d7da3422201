"""Parsers of what the RDMA and NIC tools print (ibdev2netdev, ethtool, perftest) and of the
kernel's own tables (/proc/meminfo): each turns text into data. The fabric, rdma and
validation filters and tasks judge that data."""

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.module_utils._memory.meminfo import parse_meminfo
from ansible_collections.llmfleet.cluster.plugins.module_utils._node.ethtool import ethtool_link

IBDEV2NETDEV_LINE = re.compile(
    r"^(?:\S+\s+)?(?P<device>\S+)(?:\s+\(.*?\).*?)?\s+port\s+(?P<port>\d+)"
    r"(?:\s+\((?P<port_state>[A-Z_]+)\))?\s+==>\s+(?P<netdev>\S+)\s+\((?P<state>\w+)\)\s*$"
)
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


def meminfo(text):
    """``/proc/meminfo`` -> ``{field: bytes}`` (its kB are KiB; counts stay counts), as the
    modules read it (module_utils/_memory/meminfo.py)."""
    if not isinstance(text, str):
        raise AnsibleFilterError(f"meminfo: expected the text of /proc/meminfo, got {text!r}")
    values = parse_meminfo(text)
    if "MemTotal" not in values:
        raise AnsibleFilterError("meminfo: the text has no MemTotal line; is it /proc/meminfo?")
    return values


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


class FilterModule:
    """Parsers of RDMA and NIC tool output."""

    def filters(self):
        return {
            "ibdev2netdev_map": ibdev2netdev_map,
            "ethtool_link": ethtool_link,
            "perftest_report": perftest_report,
            "meminfo": meminfo,
        }
