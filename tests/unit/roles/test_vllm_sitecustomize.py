"""Seed 003's cuDNN fix (roles/vllm_server/files/python/gb10_cudnn_conv3d.py), installed as
sitecustomize.py: started with every Python, it imports nothing heavy, and once
torch.nn.functional loads, conv3d on a CUDA tensor of an sm_121 device (GB10) runs with cuDNN
off; other devices, the CPU and other operations keep it. torch here is a stand-in package
(this machine has no GPU): its functional.conv3d reports whether cuDNN was on when called."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HOOK = (
    Path(__file__).parents[3]
    / "roles"
    / "vllm_server"
    / "files"
    / "python"
    / "gb10_cudnn_conv3d.py"
)

STAND_IN = {
    "torch/__init__.py": """
        import contextlib
        from torch import backends, cuda
        import torch.nn.functional
        """,
    "torch/cuda.py": """
        import os
        def current_device():
            return 0
        def get_device_capability(index):
            found = [int(x) for x in os.environ["CAPABILITIES"].split(",")]
            return tuple(found[2 * index : 2 * index + 2])
        """,
    "torch/backends/__init__.py": "from torch.backends import cudnn\n",
    "torch/backends/cudnn.py": """
        import contextlib
        enabled = True
        @contextlib.contextmanager
        def flags(enabled=True):
            global_state = globals()
            before = global_state["enabled"]
            global_state["enabled"] = enabled
            try:
                yield
            finally:
                global_state["enabled"] = before
        """,
    "torch/nn/__init__.py": "",
    "torch/nn/functional.py": """
        import torch.backends.cudnn as cudnn
        def conv3d(input, weight=None, *args, **kwargs):
            return ("conv3d", cudnn.enabled)
        def conv2d(input, weight=None, *args, **kwargs):
            return ("conv2d", cudnn.enabled)
        """,
}

PROBE = """
import json, sys
started_with_torch = "torch" in sys.modules
import torch
import torch.nn.functional as F

class Device:
    def __init__(self, index):
        self.index = index

class Tensor:
    def __init__(self, cuda, index=None):
        self.is_cuda = cuda
        self.device = Device(index)

print(json.dumps({
    "torch_at_start": started_with_torch,
    "gpu0": F.conv3d(Tensor(True, 0)),
    "gpu1": F.conv3d(Tensor(True, 1)),
    "current": F.conv3d(Tensor(True, None)),
    "cpu": F.conv3d(Tensor(False)),
    "conv2d": F.conv2d(Tensor(True, 0)),
    "after": torch.backends.cudnn.enabled,
    "wrapped": hasattr(F.conv3d, "__wrapped__"),
}))
"""


@pytest.fixture
def site(tmp_path: Path) -> Path:
    for name, text in STAND_IN.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    shutil.copy(HOOK, tmp_path / "sitecustomize.py")
    return tmp_path


def run(site: Path, capabilities: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "PYTHONPATH": str(site), "CAPABILITIES": capabilities},
    )
    return json.loads(proc.stdout)


def test_conv3d_on_gb10_runs_without_cudnn_and_nothing_else_changes(site: Path) -> None:
    # GPU 0 is a GB10 (12.1), GPU 1 an H100 (9.0).
    seen = run(site, "12,1,9,0")
    assert seen["torch_at_start"] is False, "the hook must not import torch at start"
    assert seen["wrapped"] is True
    assert seen["gpu0"] == ["conv3d", False]
    assert seen["current"] == ["conv3d", False]
    assert seen["gpu1"] == ["conv3d", True]
    assert seen["cpu"] == ["conv3d", True]
    assert seen["conv2d"] == ["conv2d", True]
    assert seen["after"] is True, "cuDNN is on again after the call"


def test_on_other_gpus_cudnn_stays_on(site: Path) -> None:
    seen = run(site, "9,0,9,0")
    assert seen["gpu0"] == ["conv3d", True] and seen["current"] == ["conv3d", True]


def test_a_python_without_torch_starts_as_before(site: Path) -> None:
    shutil.rmtree(site / "torch")
    proc = subprocess.run(
        [sys.executable, "-c", "import json; print('ok')"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "PYTHONPATH": str(site)},
    )
    assert proc.stdout.strip() == "ok" and proc.stderr == ""
