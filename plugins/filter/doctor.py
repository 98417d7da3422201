"""The judgement of ``llmfleet doctor``: the findings of every check over what the serving hosts
reported (plugin_utils/_doctor/findings.py holds the checks)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._doctor.findings import findings


def doctor_findings(evidence):
    """Every check's findings over the hosts' evidence (a list, one mapping per host)."""
    if not isinstance(evidence, list) or not all(isinstance(doc, dict) for doc in evidence):
        raise AnsibleFilterError("doctor_findings: expected a list of mappings, one per host")
    try:
        return findings(evidence)
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"doctor_findings: evidence incomplete ({exc!r})") from exc


class FilterModule:
    """Doctor filters."""

    def filters(self):
        return {"doctor_findings": doctor_findings}
