"""Filters for the benchmark role: did the fabric carry the run's traffic?"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

DATA_COUNTERS = ("port_xmit_data", "port_rcv_data")


def _bytes_by_host(samples):
    """{host: {device: bytes}} from the registered results of an rdma_counters loop whose
    items are ``[host, device]``."""
    out = {}
    for sample in samples:
        if sample.get("failed") or sample.get("skipped"):
            raise AnsibleFilterError(
                f"no counters for {sample.get('item')}: {sample.get('msg', 'skipped')}"
            )
        host, device = sample["item"]
        counters = sample.get("counters", {})
        out.setdefault(host, {})[device] = sum(int(counters.get(name, 0)) for name in DATA_COUNTERS)
    return out


def _human(count):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(count) < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count} B"


def bench_transport_verdict(before, after, transport, min_bytes=1048576, output_tokens=0):
    """Judge the RDMA data counters read before and after a benchmark.

    ``before``/``after`` are the ``results`` of two rdma_counters loops over ``[host, device]``
    items. With ``transport`` ``rdma`` every host must have moved at least ``min_bytes`` over
    its devices, else NCCL fell back to sockets; other transports only report.
    """
    first, last = _bytes_by_host(before), _bytes_by_host(after)
    moved = {
        host: {device: last[host][device] - value for device, value in devices.items()}
        for host, devices in first.items()
        if host in last
    }
    totals = {host: sum(devices.values()) for host, devices in moved.items()}
    quiet = sorted(host for host, total in totals.items() if total < int(min_bytes))
    judged = transport == "rdma"
    passed = not (judged and (quiet or not totals))
    detail = ", ".join(
        f"{host} {'+'.join(sorted(moved[host]))} {_human(totals[host])}" for host in sorted(totals)
    )
    if not totals:
        message = "no fabric host was sampled"
    elif passed:
        message = f"fabric traffic during the run: {detail}"
    else:
        message = (
            f"NCCL fell back to sockets: the transport is RDMA but the RDMA data counters of "
            f"{', '.join(quiet)} moved less than {_human(int(min_bytes))} while the benchmark "
            f"generated {int(output_tokens)} tokens ({detail}). Check NCCL_IB_HCA and "
            f"NCCL_IB_GID_INDEX in the NCCL environment, and NCCL_DEBUG=INFO for NET/Socket."
        )
    return {
        "transport": transport,
        "judged": judged,
        "passed": passed,
        "bytes": moved,
        "total_bytes": totals,
        "min_bytes": int(min_bytes),
        "message": message,
    }


class FilterModule:
    """Benchmark filters."""

    def filters(self):
        return {"bench_transport_verdict": bench_transport_verdict}
