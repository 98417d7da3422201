"""What a host lacks of the packages a role runs: the packages that ``dpkg-query`` does not
report installed, so the package manager is asked only for those (and its cache refreshed
only then), not on every run."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

# ``${db:Status-Abbrev}``: the wanted action, then the state ("i": installed), then an
# error flag ("ii " is a healthy installed package; "hi " one on hold; "rc " removed with
# its configuration left).
INSTALLED_STATE = "i"


def packages_missing(dpkg_stdout, wanted):
    """The packages of ``wanted`` (in its order) that the output of
    ``dpkg-query -W -f='${Package}\\t${db:Status-Abbrev}\\n' PACKAGE...`` does not show
    installed. ``dpkg-query`` prints nothing for a package it never heard of (it says so
    on stderr), so such a package counts as missing as well."""
    if isinstance(wanted, str) or not isinstance(wanted, (list, tuple)):
        raise AnsibleFilterError(f"wanted must be a list of package names, got {wanted!r}")
    installed = set()
    for line in str(dpkg_stdout or "").splitlines():
        name, _tab, status = line.partition("\t")
        if len(status) >= 2 and status[1] == INSTALLED_STATE:
            # ${Package} has no architecture; ${binary:Package} would add ":arm64"
            installed.add(name.strip().split(":", 1)[0])
    return [str(package) for package in wanted if str(package) not in installed]


class FilterModule:
    """Package filters."""

    def filters(self):
        return {"packages_missing": packages_missing}
