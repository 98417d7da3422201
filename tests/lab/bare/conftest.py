"""The bare lab: two nodes of their own that are never served, for the tests of the lab
itself (links, counters, emulators, nested engines), the fabric roles and the validation
play. A lab of its own name lets them run in the second worker while the first serves the
session's test lab (tests/conftest.py, worker_group); every test here that asks for `lab`
gets this one. It is removed as soon as the last of them has run (package scope): the
molecule groups and the lifecycle labs that follow in the same worker need the machine's
cores and memory, not two idle nodes and their emulators."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..conftest import TEST_LAB, Lab, session_lab

BARE_LAB = f"{TEST_LAB}-bare"


@pytest.fixture(scope="package")
def lab() -> Iterator[Lab]:
    yield from session_lab(BARE_LAB, "native")
