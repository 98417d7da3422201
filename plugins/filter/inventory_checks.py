"""Filters for the checks made before any host changes: the parallel layout against the
model, ports that collide on one host, numbers out of their range, sizes, paths and bind
addresses of the wrong form, keys that are placeholders.

Each returns a list of problems (sentences naming the variable, the bad value and what is
expected); an empty list means the input is fine. The validation play joins them into one
failure message per host.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.formatters import human_to_bytes
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._capacity.inputs import (
    NESTED_CONFIGS,
)
from ansible_collections.llmfleet.cluster.plugins.plugin_utils._capacity.plan import (
    tensor_parallel_fits,
)

_PLACEHOLDER = re.compile(
    r"change[-_ ]?me|changeit|placeholder|replace[-_ ]?me|your[-_ ]?(api[-_ ]?)?(key|token)"
    r"|^<.*>$|^x+$|^(secret|password|token|apikey|api[-_]key|example|test|dummy|todo|none|null)$",
    re.IGNORECASE,
)


def _heads(model_config):
    """(attention heads, KV heads) from a config.json mapping; (None, None) when unknown."""
    if not isinstance(model_config, dict):
        return None, None
    for config in [model_config] + [model_config.get(key) for key in NESTED_CONFIGS]:
        if isinstance(config, dict) and config.get("num_attention_heads"):
            heads = int(config["num_attention_heads"])
            kv_heads = int(config.get("num_key_value_heads") or heads)
            return heads, kv_heads
    return None, None


def _hosts(count):
    return f"{count} host" if count == 1 else f"{count} hosts"


def parallel_layout_problems(model_config, hosts, gpus_per_node=1, variable="llmfleet_vllm_hosts"):
    """Problems of running ``model_config`` (config.json) with tensor parallel over
    ``hosts`` x ``gpus_per_node`` GPUs, with the layouts that would work instead."""
    if not isinstance(hosts, list) or not hosts:
        raise AnsibleFilterError(f"parallel_layout_problems needs a list of hosts, got {hosts!r}")
    heads, kv_heads = _heads(model_config)
    if heads is None:
        return []
    gpus = int(gpus_per_node)
    tp = len(hosts) * gpus
    if tensor_parallel_fits(tp, heads, kv_heads):
        return []
    working = [
        count
        for count in range(len(hosts), 0, -1)
        if tensor_parallel_fits(count * gpus, heads, kv_heads)
    ]
    where = f"{_hosts(len(hosts))} x {gpus} GPUs" if gpus > 1 else _hosts(len(hosts))
    problem = (
        f"{where} ({', '.join(hosts)}) give tensor parallel {tp}, which does not divide the "
        f"model's {heads} attention heads and {kv_heads} KV heads (vLLM refuses it at start)"
    )
    if working and working[0] > 1:
        count = working[0]
        problem += (
            f"; layouts that work: tensor parallel {count * gpus} on {count} hosts "
            f"({variable}: {hosts[:count]})"
        )
    elif working:
        problem += f"; only tensor parallel {gpus} on one host fits (the single-node topology)"
    problem += (
        f", or pipeline parallel across {_hosts(len(hosts))} (tensor parallel {gpus}, pipeline"
        f" parallel {len(hosts)}), which this collection does not launch yet"
    )
    return [problem]


def port_collisions(ports):
    """Problems of a ``{variable: port}`` mapping of the services of one host: ports out of
    range and ports used twice. Variables whose value is empty or None are ignored."""
    if not isinstance(ports, dict):
        raise AnsibleFilterError(f"port_collisions needs a mapping, got {type(ports).__name__}")
    problems = []
    owners = {}
    for variable, raw in ports.items():
        if raw in (None, ""):
            continue
        try:
            port = int(raw)
        except (TypeError, ValueError):
            problems.append(f"{variable} is {raw!r}; expected a TCP port 1..65535")
            continue
        if not 1 <= port <= 65535:
            problems.append(f"{variable} is {port}; expected a TCP port 1..65535")
            continue
        owners.setdefault(port, []).append(variable)
    for port, variables in sorted(owners.items()):
        if len(variables) > 1:
            problems.append(
                f"{' and '.join(variables)} {'both' if len(variables) == 2 else 'all'} use port"
                f" {port}; each service on a host needs its own port"
            )
    return problems


# Names (as `ss -p` shows them, 15 characters at most) of the processes this collection's
# services run as: vLLM and its engine, Ray's, the probe and watchdog, claude-code-router
# (node), HAProxy, Prometheus and its exporters, the container engines' port helpers. A port
# one of them holds is the collection's own (a re-run); ``python`` is let through too.
OUR_PROCESSES = (
    "vllm", "VLLM::", "python", "ray::", "raylet", "gcs_server", "llmfleet-", "node",
    "haproxy", "prometheus", "dcgm-exporter", "docker-proxy", "conmon", "rootlessport", "pasta",
    "slirp4netns",
)  # fmt: skip
_SS_PROCESS = re.compile(r'\(\("([^"]+)",pid=(\d+)')


def ports_held_elsewhere(ports, listening):
    """Problems of a ``{variable: port}`` mapping of one host's services against what listens
    on that host (``ss -ltnpH``'s output): a port a process that is not one of the
    collection's services already holds (sshd, another server), where the service would
    fail to start after hosts changed. Sockets without their process (``ss`` run without
    root) are not judged."""
    if not isinstance(ports, dict):
        raise AnsibleFilterError(
            f"ports_held_elsewhere needs a mapping, got {type(ports).__name__}"
        )
    holders = {}
    for line in str(listening or "").splitlines():
        fields = line.split()
        process = _SS_PROCESS.search(line)
        if len(fields) < 4 or process is None or process.group(1).startswith(OUR_PROCESSES):
            continue
        port = fields[3].rsplit(":", 1)[-1]
        if port.isdigit():
            holders.setdefault(int(port), f"{process.group(1)} (pid {process.group(2)})")
    problems = []
    for variable, raw in ports.items():
        try:
            port = int(raw)
        except (TypeError, ValueError):
            continue  # port_collisions names it
        if port in holders:
            problems.append(
                f"{variable} is {port}, where {holders[port]} already listens on this host;"
                " expected a port no other service holds"
            )
    return problems


def _mapping(settings, name):
    if not isinstance(settings, dict):
        raise AnsibleFilterError(f"{name} needs a mapping, got {type(settings).__name__}")
    return settings


def failed_checks(checks):
    """The problems of the checks that failed, in their order: ``checks`` is a list of
    ``{passed: bool, problem: str}``. Several checks of a role in one task (one round for
    every host, every problem at once); a problem is read only when its check failed, so it
    may name values that exist only then (Ansible templates it when read)."""
    if isinstance(checks, (str, bytes)) or not isinstance(checks, Sequence):
        raise AnsibleFilterError(f"failed_checks needs a list, got {type(checks).__name__}")
    problems = []
    for index, check in enumerate(checks):
        passed = check.get("passed") if isinstance(check, Mapping) else None
        if not isinstance(passed, bool):
            raise AnsibleFilterError(
                f"failed_checks: check {index + 1} needs passed (true or false) and problem,"
                f" got passed={passed!r}"
            )
        if not passed:
            problems.append(str(check["problem"]))
    return problems


def range_problems(settings):
    """Problems of a ``{variable: [value, low, high, unit]}`` mapping of numbers that must lie in
    ``low..high`` (``high`` None: no upper bound; ``unit`` may be empty): not a number, or
    outside the range. Variables whose value is empty or None are ignored."""
    problems = []
    for variable, spec in _mapping(settings, "range_problems").items():
        if not isinstance(spec, (list, tuple)) or len(spec) != 4:
            raise AnsibleFilterError(
                f"range_problems: {variable} needs [value, low, high, unit], got {spec!r}"
            )
        raw, low, high, unit = spec
        if raw in (None, ""):
            continue
        unit = f" {unit}" if unit else ""
        expected = f"{low} or more{unit}" if high is None else f"{low}..{high}{unit}"
        try:
            number = float(raw)
        except (TypeError, ValueError):
            problems.append(f"{variable} is {raw!r}; expected a number, {expected}")
            continue
        if number < low or (high is not None and number > high):
            problems.append(f"{variable} is {raw}; expected {expected}")
    return problems


def secret_problems(value, variable, min_length=16):
    """Problems of a key or token: empty, a placeholder, or shorter than ``min_length``.
    Never repeats the value (it may be a real secret): only its length."""
    text = "" if value is None else str(value)
    if not text:
        return [
            f"{variable} is empty; expected a key of {min_length} or more characters"
            " from a vaulted variable"
        ]
    problems = []
    if _PLACEHOLDER.search(text):
        problems.append(
            f"{variable} looks like a placeholder; expected a generated key, e.g."
            " `openssl rand -hex 24` kept with `ansible-vault encrypt_string`"
        )
    if any(ch.isspace() or ch in "\"'\\" or not ch.isprintable() for ch in text):
        problems.append(
            f"{variable} holds a space, a quote, a backslash or a control character; expected"
            " printable characters only (it is written into environment files and HTTP headers)"
        )
    if len(text) < int(min_length):
        problems.append(
            f"{variable} has {len(text)} characters; expected {min_length} or more"
            " (e.g. `openssl rand -hex 24`)"
        )
    return problems


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LINE_BREAKS = ("\n", "\r", "\0")


def env_file_problems(env, variable):
    """Problems of an environment the roles write as ``NAME=value`` lines, read by systemd
    (EnvironmentFile) and by the container engine (``--env-file``): names that are no
    variable names, values that are no scalar, that hold a line break (it would split the
    file, or add a variable), or that start with a quote or a space (systemd strips them,
    the engine keeps them). One sentence each, naming ``variable`` and the name."""
    if env is None:
        return []
    if not isinstance(env, dict):
        return [f"{variable} is {env!r}; expected a mapping of environment variables"]
    problems = []
    for name, value in env.items():
        if not _ENV_NAME.fullmatch(str(name)):
            problems.append(
                f"{variable} has {name!r}; expected environment variable names (letters,"
                " digits and _, not starting with a digit)"
            )
            continue
        if isinstance(value, (dict, list)):
            problems.append(
                f"{variable}.{name} is a {type(value).__name__}; expected a string (JSON"
                " given as a string)"
            )
            continue
        text = "" if value is None else str(value)
        if any(mark in text for mark in _LINE_BREAKS):
            problems.append(
                f"{variable}.{name} holds a line break, which would split the environment"
                " file; expected one line"
            )
        elif text[:1] in ("'", '"', " ", "\t"):
            problems.append(
                f"{variable}.{name} starts with {text[:1]!r}, which systemd strips and the"
                " container engine keeps; expected a value without surrounding quotes or"
                " spaces"
            )
    return problems


def _settings(settings, name):
    """The settings of a ``{variable: value}`` mapping that have a value."""
    return {
        variable: value
        for variable, value in _mapping(settings, name).items()
        if value not in (None, "")
    }


def byte_size_problems(settings):
    """Problems of a ``{variable: size}`` mapping of sizes handed to the container engine
    (``16g``): what community.docker's conversion (ansible's ``human_to_bytes``) refuses,
    or a size of 0. Empty or None values are ignored."""
    problems = []
    for variable, size in _settings(settings, "byte_size_problems").items():
        try:
            number = human_to_bytes(size)
        except (TypeError, ValueError):
            number = 0
        if number <= 0:
            problems.append(
                f"{variable} is {str(size)!r}; expected a size above 0 such as 16g or 512m"
                " (a number, then B, K, M, G or T)"
            )
    return problems


def absolute_path_problems(settings):
    """Problems of a ``{variable: path}`` mapping of folders on the host: a path that is not
    absolute (a service's working directory is not the user's). Empty or None values are
    ignored."""
    return [
        f"{variable} is {str(path)!r}; expected an absolute path (starting with /)"
        for variable, path in _settings(settings, "absolute_path_problems").items()
        if not str(path).startswith("/")
    ]


def disagreement_problems(shared):
    """Problems of settings several roles must share: ``{collection variable: {variable:
    value}}``, each inner mapping the roles' variables that follow that collection-wide
    variable by default. One problem per mapping whose values differ, naming each variable,
    its value and the collection-wide variable to set instead. Empty or None values (a
    setting this host does not use) are ignored; values compare as strings."""
    problems = []
    for shared_by, settings in _settings(shared, "disagreement_problems").items():
        used = {name: value for name, value in (settings or {}).items() if value not in (None, "")}
        if len({str(value) for value in used.values()}) <= 1:
            continue
        named = [f"{name} is {value!r}" for name, value in used.items()]
        listed = ", ".join(named[:-1]) + f" but {named[-1]}"
        problems.append(
            f"{listed}; expected one value (set {shared_by}, which they all follow, instead)"
        )
    return problems


_DOTTED = re.compile(r"^[0-9.]+$")


def bind_address_problems(settings, host_addresses):
    """Problems of a ``{variable: address}`` mapping of addresses a service binds to on this
    host: an IP address the host does not have (``host_addresses``, from its facts) that is
    neither a wildcard nor a loopback address, or digits and dots that are no IPv4 address.
    A host name is left to the resolver; with no ``host_addresses`` (facts not gathered)
    only the form is checked. Empty or None values are ignored."""
    known = {str(address).split("%", 1)[0] for address in host_addresses or []}
    problems = []
    for variable, value in _settings(settings, "bind_address_problems").items():
        text = str(value).strip("[]")
        try:
            address = ipaddress.ip_address(text)
        except ValueError:
            if _DOTTED.match(text):
                problems.append(
                    f"{variable} is {str(value)!r}, which is no IPv4 address; expected 0.0.0.0"
                    " (every address), 127.0.0.1 or an address of this host"
                )
            continue
        if known and not (address.is_unspecified or address.is_loopback or str(address) in known):
            problems.append(
                f"{variable} is {text}, an address this host does not have; expected 0.0.0.0"
                f" (every address), 127.0.0.1 or one of its addresses: {', '.join(sorted(known))}"
            )
    return problems


class FilterModule:
    """Checks of the whole inventory."""

    def filters(self):
        return {
            "parallel_layout_problems": parallel_layout_problems,
            "port_collisions": port_collisions,
            "range_problems": range_problems,
            "failed_checks": failed_checks,
            "ports_held_elsewhere": ports_held_elsewhere,
            "secret_problems": secret_problems,
            "env_file_problems": env_file_problems,
            "byte_size_problems": byte_size_problems,
            "absolute_path_problems": absolute_path_problems,
            "bind_address_problems": bind_address_problems,
            "disagreement_problems": disagreement_problems,
        }
