"""packages_missing: which of a role's packages dpkg does not show installed."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.filter.packages import (
    FilterModule,
    packages_missing,
)

WANTED = ["perftest", "rdma-core", "ibverbs-providers", "iproute2"]


def test_registered() -> None:
    assert set(FilterModule().filters()) == {"packages_missing"}


def test_all_installed_leaves_nothing_to_install() -> None:
    stdout = "perftest\tii \nrdma-core\tii \nibverbs-providers\tii \niproute2\tii \n"
    assert packages_missing(stdout, WANTED) == []


def test_a_package_dpkg_never_heard_of_is_missing() -> None:
    # dpkg-query prints nothing for it (and "no packages found matching" on stderr)
    stdout = "rdma-core\tii \nibverbs-providers\tii \niproute2\tii \n"
    assert packages_missing(stdout, WANTED) == ["perftest"]


@pytest.mark.parametrize(
    ("status", "missing"),
    [("ii ", False), ("hi ", False), ("iU ", True), ("rc ", True), ("un ", True), ("iF ", True)],
)
def test_only_an_installed_state_counts(status: str, missing: bool) -> None:
    assert packages_missing(f"perftest\t{status}\n", ["perftest"]) == (
        ["perftest"] if missing else []
    )


def test_order_is_the_wanted_order_and_architecture_is_ignored() -> None:
    stdout = "iproute2:arm64\tii \n"
    assert packages_missing(stdout, WANTED) == ["perftest", "rdma-core", "ibverbs-providers"]


def test_nothing_printed_means_everything_is_missing() -> None:
    assert packages_missing("", WANTED) == WANTED
    assert packages_missing(None, ["ethtool"]) == ["ethtool"]


def test_wanted_must_be_a_list() -> None:
    with pytest.raises(AnsibleFilterError, match="wanted must be a list"):
        packages_missing("", "ethtool")
