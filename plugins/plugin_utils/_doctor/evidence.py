# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""What the checks of ``llmfleet doctor`` share: the shape of a finding and the readings of a
host's evidence every check needs (pure)."""

from __future__ import annotations

GIB = 1 << 30


def finding(check, title, host, problem, evidence, fix):  # noqa: PLR0917 - one record
    """One finding: ``problem`` None means skipped (the evidence says why), and a fix is only
    given for a problem."""
    return {
        "check": check,
        "title": title,
        "host": host,
        "status": "skipped" if problem is None else ("problem" if problem else "ok"),
        "evidence": evidence,
        "fix": fix if problem else None,
    }


def host_processes(doc, name):
    """The processes node_status found on the host under ``name`` (``vllm``, ``raylet``)."""
    return ((doc.get("node") or {}).get("processes") or {}).get(name) or []


def is_multi_node(doc):
    """Whether the host serves in a group of several hosts."""
    return len(doc.get("group") or []) > 1
