"""doctor_findings: the checks as the doctor playbook calls them, through the filter; evidence
that is not a list of mappings, or lacks what a check reads, is a filter error."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.filter.doctor import (
    FilterModule,
    doctor_findings,
)

from ..plugin_utils._doctor.test_findings import cluster


def test_the_filter_is_registered() -> None:
    assert FilterModule().filters() == {"doctor_findings": doctor_findings}


def test_a_healthy_cluster_through_the_filter() -> None:
    found = doctor_findings(cluster())
    assert found and {f["status"] for f in found} == {"ok"}


@pytest.mark.parametrize(
    ("evidence", "message"),
    [
        ({"host": "spark-1"}, "expected a list of mappings"),
        (["spark-1"], "expected a list of mappings"),
        ([{"host": "spark-1"}], "evidence incomplete"),
    ],
)
def test_evidence_that_is_not_usable_is_a_filter_error(evidence: object, message: str) -> None:
    with pytest.raises(AnsibleFilterError, match=message):
        doctor_findings(evidence)
