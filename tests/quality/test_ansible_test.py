"""ansible-test sanity and units, on a copy of the collection as Galaxy users get it.

ansible-test wants the collection at ``.../ansible_collections/llmfleet/cluster`` and rejects
the checkout's ``collections/`` symlink, so the tests run in a temporary folder: the built
tarball unpacked there, plus what ansible-test reads that the tarball leaves out
(``tests/sanity`` for the ignore files, ``tests/unit/plugins`` for the unit tests).
What is ignored, and why, is in ``tests/sanity/ignore-<ansible-core>.txt``.

``--local`` runs with this virtualenv's Python (no container). The sanity tests that need
their own tools (pylint, yamllint, validate-modules...) still run in virtualenvs that
ansible-test creates once, with pip, under ``~/.ansible/test/venv``: the first run needs
PyPI and takes a few minutes, later ones reuse them.
"""

from __future__ import annotations

import importlib.util
import shutil
import socket
import subprocess
import sys
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
# Beyond the tarball: the package markers the unit tests import through, the ignore files
# and the unit tests of the plugins (the other unit tests need the checkout's src/).
ANSIBLE_TEST_FILES = ("tests/__init__.py", "tests/unit/__init__.py")
ANSIBLE_TEST_FOLDERS = ("tests/sanity", "tests/unit/plugins")

# ansible-test puts pip into each virtualenv it creates with a get-pip.py that it downloads
# from this host, and stops where the host cannot be reached (PyPI can be, through pip's own
# configuration). There the test gives it a stand-in in its cache, where its error message
# says to put one: the standard library's ensurepip, then pip installs what was asked for.
GET_PIP_HOST = "ci-files.testing.ansible.com"
GET_PIP_STAND_IN = '''\
"""Stand-in for get-pip.py, written by llmfleet's tests/quality/test_ansible_test.py because
ci-files.testing.ansible.com could not be reached. Delete it to let ansible-test download the
real one. It installs pip with ensurepip, then the packages asked for with that pip."""
import subprocess
import sys

GET_PIP_ONLY = ("--no-setuptools", "--no-wheel")
subprocess.run([sys.executable, "-m", "ensurepip"], check=True, stdout=subprocess.DEVNULL)
args = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY]
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", "--quiet", *args]))
'''


def reachable(host: str) -> bool:
    try:
        socket.create_connection((host, 443), timeout=5).close()
    except OSError:
        return False
    return True


@pytest.fixture(scope="module")
def pip_bootstrap() -> None:
    """Make sure ansible-test can put pip into its sanity virtualenvs."""
    from ansible_test._internal.python_requirements import get_venv_packages  # noqa: PLC0415

    version = get_venv_packages(SimpleNamespace(version=PYTHON))["pip"]
    cached = Path.home() / ".ansible/test/cache" / f"get_pip_{version.replace('.', '_')}.py"
    if not cached.exists() and not reachable(GET_PIP_HOST):
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(GET_PIP_STAND_IN, encoding="utf-8")


@pytest.fixture(scope="module")
def collection_copy(collection_tarball: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tarball unpacked at ``<tmp>/ansible_collections/llmfleet/cluster``, tests added."""
    root = tmp_path_factory.mktemp("ansible-test") / "ansible_collections" / "llmfleet" / "cluster"
    root.mkdir(parents=True)
    with tarfile.open(collection_tarball) as tar:
        if hasattr(tarfile, "data_filter"):  # Python 3.11.4 and later
            tar.extractall(root, filter="data")
        else:
            tar.extractall(root)  # our own build, just made
    for name in ANSIBLE_TEST_FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, root / name)
    for name in ANSIBLE_TEST_FOLDERS:
        shutil.copytree(
            ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
    return root


def ansible_test(collection: Path, *args: str, timeout: int) -> None:
    """Run ``ansible-test ARGS --local --python X.Y`` in ``collection``; fail with its output."""
    # This virtualenv's ansible-test, run by the Python running the tests: --local uses it.
    script = Path(sys.executable).parent / "ansible-test"
    proc = subprocess.run(
        [sys.executable, str(script), *args, "--local", "--python", PYTHON, "--color", "no"],
        cwd=collection,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"ansible-test {' '.join(args)}\n{output[-6000:]}"


@pytest.mark.usefixtures("pip_bootstrap")
def test_ansible_test_sanity(collection_copy: Path) -> None:
    ansible_test(collection_copy, "sanity", timeout=900)


# Extended: the same unit tests make test runs with pytest, through ansible-test's runner;
# make test leaves it out to stay within CI's time (Makefile).
@pytest.mark.extended
def test_ansible_test_units(collection_copy: Path) -> None:
    if importlib.util.find_spec("xdist") is None:
        pytest.fail("ansible-test units runs pytest -n: install the dev extras (make venv)")
    ansible_test(collection_copy, "units", timeout=600)


def test_sanity_ignores_name_their_reason() -> None:
    """Every ignore line says why, after a ``#`` (ansible-test accepts bare ones)."""
    for ignore_file in sorted((ROOT / "tests/sanity").glob("ignore-*.txt")):
        for number, line in enumerate(ignore_file.read_text().splitlines(), start=1):
            assert " # " in line, f"{ignore_file.name}:{number} gives no reason: {line}"
