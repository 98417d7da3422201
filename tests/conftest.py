"""Shared test settings: the collection root, the venv's tools on PATH, and how the tests
share this machine when `make test` runs them on two workers (pytest-xdist)."""

from __future__ import annotations

import fcntl
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Plugins import as the collection does at run time: ansible_collections.llmfleet.cluster.*
sys.path.insert(0, str(ROOT / "collections"))

# Tests call ansible-playbook, ansible-lint, molecule... from the venv running pytest.
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
os.environ.setdefault("ANSIBLE_CONFIG", str(ROOT / "ansible.cfg"))
os.environ.setdefault("ANSIBLE_NOCOLOR", "1")

# The measurement tests ask for the machine to themselves (see `machine_to_itself`).
MACHINE_TO_ITSELF = "machine_to_itself"


# Test files of tests/lab that start labs of their own (never the session's `lab`).
OWN_LAB_FILES = frozenset(
    {
        "test_molecule.py",
        "test_lab_lifecycle.py",
        "test_lab_gateway.py",
        "test_lab_ray_path.py",
        "test_lab_layouts.py",
    }
)
# Tests of the bare lab: their `lab` is a lab of their own (tests/lab/bare/conftest.py).
BARE_LAB_DIR = "tests/lab/bare/"


def worker_group(nodeid: str) -> str:
    """Which worker runs a test when `make test` runs two (`-n 2 --dist loadscope`, whose
    scopes are these groups, see pytest_xdist_make_scheduler). Every test of the test lab
    (the `lab` session fixture) runs in one worker, in the order tests/lab/conftest.py
    gives them: a session fixture is per worker, and two workers would start two labs of the
    same name. The tests that start labs of their own (the bare lab's, molecule's groups, the
    lifecycle labs) run in a group of their own, the tests without a lab in two more (the
    quality gates, the rest), which go to whichever worker is done first. Read from the
    test's id: the controller knows nothing else."""
    path = nodeid.split("::", 1)[0]
    if path.startswith("tests/quality/"):
        return "quality"
    if not path.startswith("tests/lab/"):
        return "no-lab"
    if path.startswith(BARE_LAB_DIR) or path.rsplit("/", 1)[-1] in OWN_LAB_FILES:
        return "own-labs"
    return "test-lab"


# Which work a free worker takes first: the test lab's chain starts at once on one worker,
# the labs of their own on the other. The quality gates and the tests without a lab come
# after them file by file, the quality gates first (their files are the longest), so that
# the worker done first takes them until the other is done and neither waits on the other
# at the end. xdist would order the scopes by their number of tests. (On CI's machine,
# 2026-11-28: test-lab 56 min, own-labs 63, quality 11, no-lab 14, in 73 min of pytest; on a
# faster machine of the same kind the whole run took 32 min, 2026-11-25.)
GROUP_ORDER = ("test-lab", "own-labs", "quality", "no-lab")
# Groups handed out as one unit (a session fixture is per worker); the others file by file.
WHOLE_GROUPS = frozenset({"test-lab", "own-labs"})


def scheduling_scope(nodeid: str) -> str:
    """The unit a worker takes (see pytest_xdist_make_scheduler): a whole lab's group, or one
    file of the others."""
    group = worker_group(nodeid)
    return group if group in WHOLE_GROUPS else f"{group}:{nodeid.split('::', 1)[0]}"


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """Under `--dist loadscope`, the scopes are those of scheduling_scope, handed out in
    GROUP_ORDER."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling  # noqa: PLC0415 - only with xdist

    class ByLab(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return scheduling_scope(nodeid)

        def _assign_work_unit(self, node: object) -> None:
            rank = {group: index for index, group in enumerate(GROUP_ORDER)}
            order = sorted(self.workqueue, key=lambda scope: rank[scope.split(":", 1)[0]])
            for scope in reversed(order):
                self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

    return ByLab(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test of an own-lab file that asks for the session's lab would start it in the
    wrong worker: refused at collection, naming the test."""
    strays = [
        item.nodeid
        for item in items
        if "lab" in getattr(item, "fixturenames", ())
        and worker_group(item.nodeid) != "test-lab"
        and not item.nodeid.startswith(BARE_LAB_DIR)
    ]
    if strays:
        raise pytest.UsageError(
            f"{', '.join(strays)} use the session's `lab` fixture but live in a file of"
            f" OWN_LAB_FILES ({', '.join(sorted(OWN_LAB_FILES))}), which runs in another worker:"
            " move the test, or the file out of OWN_LAB_FILES (tests/conftest.py)"
        )


# Each worker group's time in this run (see worker_group): the summed durations of its
# tests' setup, call and teardown, and the span from its first start to its last end. The
# longest span is what a run cannot go below on two workers.
_GROUP_TIMES: dict[str, list[float]] = {}


# A test that takes this long is named as it ends, with the time of day: when CI stops a run
# at its time limit, its output still says where the time went (the summary never prints).
SLOW_TEST_SECONDS = 30.0
_TEST_SECONDS: dict[str, float] = {}
_CONFIG: list[pytest.Config] = []


def pytest_configure(config: pytest.Config) -> None:
    # Under xdist the controller prints what the workers report.
    if "PYTEST_XDIST_WORKER" not in os.environ:
        _CONFIG.append(config)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    group = worker_group(report.nodeid)
    times = _GROUP_TIMES.setdefault(group, [0.0, report.start, report.stop])
    times[0] += report.duration
    times[1] = min(times[1], report.start)
    times[2] = max(times[2], report.stop)
    seconds = _TEST_SECONDS.get(report.nodeid, 0.0) + report.duration
    if report.when != "teardown":
        _TEST_SECONDS[report.nodeid] = seconds
        return
    _TEST_SECONDS.pop(report.nodeid, None)
    # The terminal reporter registers itself after this file's pytest_configure has run.
    reporter = _CONFIG[0].pluginmanager.get_plugin("terminalreporter") if _CONFIG else None
    if seconds >= SLOW_TEST_SECONDS and reporter is not None:
        ended = time.strftime("%H:%M:%S", time.gmtime(report.stop))
        reporter.ensure_newline()
        reporter.write_line(f"[{ended}] {seconds:6.0f} s {report.nodeid}")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _GROUP_TIMES:
        return
    terminalreporter.section("time per worker group")
    for group, (total, first, last) in sorted(_GROUP_TIMES.items(), key=lambda item: item[1][1]):
        terminalreporter.write_line(
            f"{group:>10}: {total / 60:5.1f} min of tests, {(last - first) / 60:5.1f} min"
            " from its first start to its last end"
        )


@pytest.fixture(scope="session")
def collection_root() -> Path:
    return ROOT


@contextmanager
def _locked(path: Path, operation: int) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, operation)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def machine_locks(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path] | None:
    """The two lock files the workers of one run share (in the run's base temp folder, one
    level above each worker's), or None when the tests run in one process."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return None
    shared = tmp_path_factory.getbasetemp().parent
    return shared / "machine.turnstile", shared / "machine.lock"


@pytest.fixture(autouse=True)
def machine_shared(
    request: pytest.FixtureRequest, machine_locks: tuple[Path, Path] | None
) -> Iterator[None]:
    """Every test holds the machine shared, so that a test that needs it to itself waits
    until the other worker's current test ends, and no new one starts meanwhile (the
    turnstile keeps the shared holders from starving it)."""
    if machine_locks is None or MACHINE_TO_ITSELF in request.fixturenames:
        yield
        return
    turnstile, machine = machine_locks
    with _locked(turnstile, fcntl.LOCK_EX):
        pass
    with _locked(machine, fcntl.LOCK_SH):
        yield


@pytest.fixture
def machine_to_itself(machine_locks: tuple[Path, Path] | None) -> Iterator[None]:
    """For a test whose bounds are measurements (timings read on two shared cores): no test
    of the other worker runs while it does."""
    if machine_locks is None:
        yield
        return
    turnstile, machine = machine_locks
    with _locked(turnstile, fcntl.LOCK_EX), _locked(machine, fcntl.LOCK_EX):
        yield
