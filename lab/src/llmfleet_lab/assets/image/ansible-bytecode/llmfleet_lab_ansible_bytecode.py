"""Bytecode cache for the modules Ansible runs on a lab node (lab only, never in a role).

Ansible sends each module with the module_utils it needs as a zip (AnsiballZ) and Python
imports them from it with zipimport, which compiles every file from source on every task:
ansible-core 2.19's module_utils take about 0.13 s of a lab node's CPU to compile, each
time, and a lab of two nodes runs on the two cores of one machine, not on two Sparks'
forty. This hook keeps the compiled code of each payload file, keyed by the source's
sha256 and this Python's bytecode version, so that a file compiles once per node. The
code then runs exactly as compiled from the zip: the same bytes give the same code, and
its file names are the payload's own, as in a traceback from an uncached run.

Loaded at interpreter start by llmfleet_lab_ansible_bytecode.pth; other zips are left to
zipimport.
"""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import os
import types
import zipimport

CACHE = "/var/cache/llmfleet-lab/ansible-bytecode"
# AnsiballZ unpacks into a folder named ansible_<module>_payload_<random> (module_common).
PAYLOAD_MARK = "_payload_"

_compile_source = zipimport._compile_source  # type: ignore[attr-defined]


def _named(code: types.CodeType, filename: str) -> types.CodeType:
    """``code`` and the code objects it holds, under ``filename``."""
    consts = tuple(
        _named(const, filename) if isinstance(const, types.CodeType) else const
        for const in code.co_consts
    )
    return code.replace(co_filename=filename, co_consts=consts)


def compile_source(pathname: str, source: bytes) -> types.CodeType:
    if PAYLOAD_MARK not in pathname:
        return _compile_source(pathname, source)
    path = os.path.join(CACHE, hashlib.sha256(importlib.util.MAGIC_NUMBER + source).hexdigest())
    try:
        with open(path, "rb") as handle:
            # Written by this hook alone, in a folder only root can write.
            cached = marshal.load(handle)  # noqa: S302
    except (OSError, EOFError, ValueError, TypeError):
        cached = None
    if isinstance(cached, types.CodeType):
        return _named(cached, pathname)
    code = _compile_source(pathname, source)
    try:
        os.makedirs(CACHE, mode=0o700, exist_ok=True)
        partial = f"{path}.{os.getpid()}"
        with open(partial, "wb") as handle:
            marshal.dump(code, handle)
        os.replace(partial, path)
    except OSError:
        pass
    return code


zipimport._compile_source = compile_source  # type: ignore[attr-defined]
