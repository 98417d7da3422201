# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Memory sizes: the binary units and bytes as GiB, as the GPU memory results show them."""

from __future__ import annotations

GIB = 1 << 30
MIB = 1 << 20
KIB = 1 << 10


def to_gib(n_bytes):
    """Bytes to GiB rounded to 2 decimals; None stays None."""
    if n_bytes is None:
        return None
    return round(n_bytes / GIB, 2)
