"""Filters for the checks made before any host changes: the parallel layout against the
model, ports that collide on one host, numbers out of their range, keys that are placeholders.

Each returns a list of problems (sentences naming the variable, the bad value and what is
expected); an empty list means the input is fine. The validation play joins them into one
failure message per host.
"""

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.module_utils._capacity_inputs import (
    NESTED_CONFIGS,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._capacity_plan import (
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


def range_problems(settings):
    """Problems of a ``{variable: [value, low, high, unit]}`` mapping of numbers that must lie in
    ``low..high`` (``high`` None: no upper bound; ``unit`` may be empty): not a number, or
    outside the range. Variables whose value is empty or None are ignored."""
    if not isinstance(settings, dict):
        raise AnsibleFilterError(f"range_problems needs a mapping, got {type(settings).__name__}")
    problems = []
    for variable, spec in settings.items():
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


class FilterModule:
    """Checks of the whole inventory."""

    def filters(self):
        return {
            "parallel_layout_problems": parallel_layout_problems,
            "port_collisions": port_collisions,
            "range_problems": range_problems,
            "ports_held_elsewhere": ports_held_elsewhere,
            "secret_problems": secret_problems,
            "env_file_problems": env_file_problems,
        }
