# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""The port counters of an RDMA device (``ports/<n>/counters/*``), in bytes where the
kernel counts 4-byte words, and their rates between two readings."""

from __future__ import annotations

import os
import time

from ansible_collections.llmfleet.cluster.plugins.module_utils._rdma.sysfs import (
    RdmaSysfsError,
    describe_available,
    list_entries,
    port_dir,
    read_attr,
)

# IB data counters count 4-byte words (IBA PortCounters PortXmitData/PortRcvData).
DATA_COUNTERS = ("port_xmit_data", "port_rcv_data")
DATA_COUNTER_WORD_BYTES = 4
UNIT_NOTE = (
    "port_xmit_data and port_rcv_data are in bytes: the sysfs files count 4-byte words "
    "and were multiplied by 4; every other counter is the file's raw value."
)

# Indirections the unit tests replace to drive the sampler deterministically.
_sleep = time.sleep
_clock = time.monotonic


def _parse_counter(text):
    if text is None:
        return None
    try:
        return int(text, 0)
    except ValueError:
        return None


def list_counters(sysfs_root, device, port):
    """Names of the files in ``ports/<n>/counters/``, sorted."""
    return sorted(list_entries(os.path.join(port_dir(sysfs_root, device, port), "counters")))


def read_counters(sysfs_root, device, port, names=None):
    """Raw counter values as the files hold them.

    Returns ``(values, unreadable)``: ``values`` maps each readable counter to
    its integer value; ``unreadable`` lists counters whose file could not be
    read or parsed. ``names`` selects a subset; a name that is not a counter
    file raises RdmaSysfsError listing the counters that exist.
    """
    cdir = os.path.join(port_dir(sysfs_root, device, port), "counters")
    present = list_counters(sysfs_root, device, port)
    if names:
        missing = [n for n in names if n not in present]
        if missing:
            raise RdmaSysfsError(
                "counter(s) {0} not found in {1}; {2}".format(
                    ", ".join(missing), cdir, describe_available("counters", present)
                ),
                path=cdir,
                available=present,
            )
        selected = list(dict.fromkeys(names))
    else:
        selected = present
    values = {}
    unreadable = []
    for name in selected:
        value = _parse_counter(read_attr(os.path.join(cdir, name)))
        if value is None:
            unreadable.append(name)
        else:
            values[name] = value
    return values, unreadable


def counters_in_bytes(raw):
    """Data counters (4-byte words) converted to bytes; every other counter unchanged."""
    return {
        name: value * DATA_COUNTER_WORD_BYTES if name in DATA_COUNTERS else value
        for name, value in raw.items()
    }


def bytes_to_gbits(byte_count):
    return byte_count * 8 / 1e9


def compute_rates(before, after, elapsed):
    """Per-second rates between two ``counters_in_bytes`` readings.

    Returns ``(delta, rates)``. A counter that went backwards (reset, wrap) has
    a None delta and rate. ``rates`` gains ``xmit_gbits_per_second`` /
    ``rcv_gbits_per_second`` when the data counters were sampled.
    """
    if elapsed <= 0:
        raise ValueError("elapsed time must be positive, got {0}".format(elapsed))
    delta = {}
    rates = {}
    for name in sorted(set(before) & set(after)):
        change = after[name] - before[name]
        if change < 0:
            delta[name] = None
            rates[name] = None
            continue
        delta[name] = change
        rates[name] = change / elapsed
    for counter, key in (
        ("port_xmit_data", "xmit_gbits_per_second"),
        ("port_rcv_data", "rcv_gbits_per_second"),
    ):
        if counter in rates:
            rates[key] = None if rates[counter] is None else bytes_to_gbits(rates[counter])
    return delta, rates


def sample_counters(
    sysfs_root, device, port, sample_seconds, names=None, *, sleep=None, clock=None
):
    """Read the counters twice ``sample_seconds`` apart and compute rates.

    Returns a dict with ``first`` and ``second`` (raw readings), ``unreadable``,
    ``elapsed_seconds`` (measured between the two reads), ``delta`` (in bytes
    for the data counters) and ``rates`` (per second; bytes/s for the data
    counters, plus Gb/s).
    """
    if sample_seconds <= 0:
        raise ValueError("sample_seconds must be > 0, got {0}".format(sample_seconds))
    sleep = sleep or _sleep
    clock = clock or _clock
    first, unreadable_1 = read_counters(sysfs_root, device, port, names)
    start = clock()
    sleep(sample_seconds)
    second, unreadable_2 = read_counters(sysfs_root, device, port, names)
    elapsed = clock() - start
    if elapsed <= 0:
        elapsed = sample_seconds
    delta, rates = compute_rates(counters_in_bytes(first), counters_in_bytes(second), elapsed)
    return {
        "first": first,
        "second": second,
        "unreadable": sorted(set(unreadable_1) | set(unreadable_2)),
        "elapsed_seconds": elapsed,
        "delta": delta,
        "rates": rates,
    }
