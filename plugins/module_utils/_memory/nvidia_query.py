# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""What NVIDIA's tools say about the GPUs: NVML through ``pynvml`` (the ``nvidia-ml-py``
package, imported lazily and only if present) and ``nvidia-smi``'s CSV output.

A GPU with unified memory (GB10) has no memory numbers of its own: NVML answers
NVML_ERROR_NOT_SUPPORTED for the memory query and nvidia-smi prints ``[N/A]``; its
rows carry None for them. A tool that cannot answer raises ProbeFailed.
"""

from __future__ import annotations

import contextlib
import importlib

from ansible_collections.llmfleet.cluster.plugins.module_utils._memory.units import (
    MIB,
)

NVIDIA_SMI_FIELDS = ("index", "name", "uuid", "memory.total", "memory.free", "memory.used")
NVIDIA_SMI_ARGS = (
    "--query-gpu=" + ",".join(NVIDIA_SMI_FIELDS),
    "--format=csv,noheader,nounits",
)
# nvidia-smi's exit status when the driver answers but there is no GPU.
NVIDIA_SMI_RC_NO_DEVICES = 6
# What nvidia-smi prints in place of a value it does not have.
_NOT_AVAILABLE = frozenset(("[n/a]", "n/a", "[not supported]", "not supported"))

# NVML return codes (nvml.h); pynvml's own constants are preferred when present.
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_LIBRARY_NOT_FOUND = 12


class ProbeFailed(Exception):
    """One method could not answer. ``short`` is the phrase used in the no-GPU
    message (for example ``no nvidia-smi``); ``str()`` is the full reason."""

    def __init__(self, message, short=None):
        super().__init__(message)
        self.message = message
        self.short = short or message

    def __str__(self):
        return self.message


def _mib(text, line):
    value = text.strip()
    if value.lower() in _NOT_AVAILABLE:
        return None
    try:
        return int(float(value) * MIB)
    except ValueError:
        raise ProbeFailed(
            "nvidia-smi printed {0!r} where a size in MiB was expected: {1!r}".format(value, line)
        ) from None


def parse_nvidia_smi(text):
    """Rows of ``nvidia-smi --query-gpu=<NVIDIA_SMI_FIELDS> --format=csv,noheader,nounits``.

    Each row: index, name, uuid, and total/free/used in bytes, or None where
    nvidia-smi printed ``[N/A]`` (unified memory). A name containing a comma is
    kept whole: the index is the first field and the last four are fixed.
    """
    rows = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < len(NVIDIA_SMI_FIELDS):
            raise ProbeFailed("cannot parse nvidia-smi output line {0!r}".format(line))
        try:
            index = int(fields[0])
        except ValueError:
            raise ProbeFailed("cannot parse nvidia-smi output line {0!r}".format(line)) from None
        rows.append(
            {
                "index": index,
                "name": ", ".join(fields[1:-4]),
                "uuid": fields[-4],
                "total": _mib(fields[-3], line),
                "free": _mib(fields[-2], line),
                "used": _mib(fields[-1], line),
            }
        )
    return rows


def query_nvidia_smi(run, path):
    """Run nvidia-smi through ``run(argv) -> (rc, stdout, stderr)`` and parse it.

    Raises ProbeFailed when it fails; ``[]`` when it says there is no device.
    """
    rc, out, err = run([path, *NVIDIA_SMI_ARGS])
    said = " ".join((out or "").split() + (err or "").split())
    if rc == NVIDIA_SMI_RC_NO_DEVICES or (rc != 0 and "no devices were found" in said.lower()):
        return []
    if rc != 0:
        raise ProbeFailed(
            "{0} exited {1}: {2}".format(path, rc, said or "no output"),
            short="nvidia-smi failed: {0}".format(said or "exit {0}".format(rc)),
        )
    return parse_nvidia_smi(out or "")


def parse_compute_apps(text):
    """``nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory`` (MiB) as
    ``{(uuid, pid): bytes}``; unavailable values count 0."""
    apps = {}
    for line in text.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 3 or not parts[1].isdigit():
            continue
        used = 0 if parts[2].lower() in _NOT_AVAILABLE else _mib(parts[2], line)
        apps[(parts[0], int(parts[1]))] = used
    return apps


def query_compute_apps(run, path):
    """What each process uses on each GPU with memory of its own ({} when unknown)."""
    rc, out, _err = run(
        [path, "--query-compute-apps=gpu_uuid,pid,used_memory", "--format=csv,noheader,nounits"]
    )
    if rc != 0:
        return {}
    try:
        return parse_compute_apps(out)
    except ProbeFailed:
        return {}


def load_pynvml(importer=importlib.import_module):
    """The ``pynvml`` module, or None when it is not installed."""
    try:
        return importer("pynvml")
    except ImportError:
        return None


def _nvml_code(error):
    return getattr(error, "value", None)


def _text(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def query_nvml(pynvml):
    """Rows like parse_nvidia_smi's, from NVML.

    Memory is None for a device whose memory query answers Not Supported
    (unified memory). Any other NVML error raises ProbeFailed.
    """
    nvml_error = getattr(pynvml, "NVMLError", None)
    not_supported = getattr(pynvml, "NVML_ERROR_NOT_SUPPORTED", NVML_ERROR_NOT_SUPPORTED)
    library_not_found = getattr(
        pynvml, "NVML_ERROR_LIBRARY_NOT_FOUND", NVML_ERROR_LIBRARY_NOT_FOUND
    )
    if nvml_error is None:
        raise ProbeFailed("the pynvml module has no NVMLError: not NVIDIA's nvidia-ml-py")
    try:
        pynvml.nvmlInit()
    except nvml_error as error:
        if _nvml_code(error) == library_not_found:
            raise ProbeFailed("NVML: {0}".format(error), short="no NVML library") from None
        raise ProbeFailed("NVML: {0}".format(error)) from None
    except OSError as error:
        raise ProbeFailed("NVML: {0}".format(error), short="no NVML library") from None
    rows = []
    try:
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            row = {
                "index": index,
                "name": _text(pynvml.nvmlDeviceGetName(handle)),
                "uuid": _text(pynvml.nvmlDeviceGetUUID(handle)),
                "total": None,
                "free": None,
                "used": None,
            }
            try:
                memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            except nvml_error as error:
                if _nvml_code(error) != not_supported:
                    raise
            else:
                row.update(total=int(memory.total), free=int(memory.free), used=int(memory.used))
            rows.append(row)
    except nvml_error as error:
        raise ProbeFailed("NVML: {0}".format(error)) from None
    except (AttributeError, TypeError, ValueError, OSError) as error:
        # a pynvml that is not the API this code knows (very old, or a look-alike)
        raise ProbeFailed("NVML: unexpected pynvml behaviour: {0!r}".format(error)) from None
    finally:
        # shutting down after an error must not hide that error
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()
    return rows
