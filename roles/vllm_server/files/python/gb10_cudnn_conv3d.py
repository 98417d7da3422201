"""sitecustomize for vLLM on DGX Spark (GB10, compute capability sm_121), installed by
llmfleet's vllm_server role for the profiles that name it (python_files).

Field note 003 ("Multi-Node Inference (Qwen3-VL-235B-AWQ)", "cuDNN Fix (REQUIRED)"): GB10
lacks cuDNN conv3d kernels for sm_121, and a vision encoder's 3D patch embedding (Qwen3-VL)
fails there; the note's fix is an import hook mounted at /usr/lib/python3.12/sitecustomize.py
that disables cuDNN for conv3d. This is that hook. Python imports it at every start, so it
imports nothing heavy: it waits for torch.nn.functional to load, then wraps its conv3d so
that a call on a CUDA tensor of an sm_121 device runs with cuDNN off (PyTorch's own
kernels). nn.Conv3d and vLLM's conv layers call torch.nn.functional.conv3d; every other
operation, and conv3d on any other GPU or on the CPU, is left as it was.
"""

import importlib.abc
import importlib.util
import sys

_TARGET = "torch.nn.functional"
_CAPABILITY = (12, 1)


def _wrap(functional):
    original = functional.conv3d
    if getattr(original, "__llmfleet_cudnn_off__", False):
        return
    affected = {}

    def conv3d(input, *args, **kwargs):
        torch = sys.modules["torch"]
        if getattr(input, "is_cuda", False):
            index = input.device.index
            if index is None:
                index = torch.cuda.current_device()
            if index not in affected:
                affected[index] = tuple(torch.cuda.get_device_capability(index)) == _CAPABILITY
            if affected[index]:
                with torch.backends.cudnn.flags(enabled=False):
                    return original(input, *args, **kwargs)
        return original(input, *args, **kwargs)

    conv3d.__llmfleet_cudnn_off__ = True
    conv3d.__doc__ = original.__doc__
    conv3d.__wrapped__ = original
    functional.conv3d = conv3d


class _Loader(importlib.abc.Loader):
    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _wrap(module)

    def __getattr__(self, name):
        # get_source, get_filename, is_package...: what inspect and torch.compile ask.
        return getattr(self._loader, name)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds torch.nn.functional with the other finders and wraps its loader."""

    def __init__(self):
        self._busy = False

    def find_spec(self, name, path=None, target=None):
        if name != _TARGET or self._busy:
            return None
        self._busy = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._busy = False
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _Loader(spec.loader)
        return spec


if _TARGET in sys.modules:
    _wrap(sys.modules[_TARGET])
else:
    sys.meta_path.insert(0, _Finder())
