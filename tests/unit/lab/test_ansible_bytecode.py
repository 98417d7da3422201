"""The lab nodes' bytecode cache for Ansible's module payloads
(lab/src/llmfleet_lab/assets/image/ansible-bytecode), run as the node's python3 runs it: a
fresh interpreter with the hook loaded, importing from a zip the way AnsiballZ does."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

HOOK = Path(__file__).resolve().parents[3] / "lab/src/llmfleet_lab/assets/image/ansible-bytecode"

MODULE = b"""
def fail():
    raise RuntimeError("from the payload")
"""

# The node's interpreter start, then one import from the zip: what the module's code says
# its file is, and the file a traceback of its function names.
IMPORT = """
import json, sys, traceback
sys.path.insert(0, sys.argv[1])
import llmfleet_lab_ansible_bytecode as hook
hook.CACHE = sys.argv[2]
sys.path.insert(0, sys.argv[3])
import payload_module
try:
    payload_module.fail()
except RuntimeError as error:
    where = traceback.extract_tb(error.__traceback__)[-1].filename
print(json.dumps({"code": payload_module.fail.__code__.co_filename, "traceback": where}))
"""


def payload(folder: Path, source: bytes = MODULE) -> Path:
    """A zip as AnsiballZ writes it: in a folder ansible_<module>_payload_<random>."""
    folder.mkdir(parents=True)
    archive = folder / "ansible_stat_payload.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("payload_module.py", source)
    return archive


def run(archive: Path, cache: Path) -> dict[str, str]:
    proc = subprocess.run(
        [sys.executable, "-c", IMPORT, str(HOOK), str(cache), str(archive)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(proc.stdout)


def test_a_payload_file_compiles_once_and_keeps_the_name_of_the_payload_it_runs_from(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    first = payload(tmp_path / "ansible_stat_payload_a1")
    second = payload(tmp_path / "ansible_stat_payload_b2")

    assert run(first, cache)["code"] == f"{first}/payload_module.py"
    [kept] = cache.iterdir()
    assert run(second, cache) == {
        "code": f"{second}/payload_module.py",
        "traceback": f"{second}/payload_module.py",
    }
    assert list(cache.iterdir()) == [kept]  # read back, not compiled again

    # Other source, other entry: a module that changed never runs stale code.
    changed = payload(tmp_path / "ansible_stat_payload_c3", MODULE + b"\nVERSION = 2\n")
    run(changed, cache)
    assert len(list(cache.iterdir())) == 2


def test_a_damaged_entry_is_compiled_again(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    run(payload(tmp_path / "ansible_stat_payload_a1"), cache)
    [kept] = cache.iterdir()
    kept.write_bytes(b"\x00garbage")
    assert run(payload(tmp_path / "ansible_stat_payload_b2"), cache)["traceback"].endswith(
        "ansible_stat_payload_b2/ansible_stat_payload.zip/payload_module.py"
    )
    assert kept.read_bytes() != b"\x00garbage"


def test_zips_that_are_not_ansible_payloads_are_left_to_zipimport(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    run(payload(tmp_path / "wheels"), cache)
    assert not cache.exists()


def test_the_node_image_loads_it_at_interpreter_start() -> None:
    assert (HOOK / "llmfleet_lab_ansible_bytecode.pth").read_text() == (
        "import llmfleet_lab_ansible_bytecode\n"
    )
    containerfile = (HOOK.parent / "Containerfile").read_text()
    assert "COPY ansible-bytecode/ /usr/lib/python3/dist-packages/" in containerfile
