"""Filters for serving groups: the Sparks split into independent tensor-parallel groups,
each its own vLLM, and the gateway's view of what serves which model.

A group is ``{name, hosts}``; its first host is rank 0, which serves the API. The groups
come from the inventory in one of three ways, in this order:

* child groups of ``sparks`` named ``serving_<anything>`` (explicit groups, each host list
  in its inventory order);
* ``llmfleet_group_size: N``: the ``sparks`` group cut into groups of N hosts, in order
  (``serving_1``, ``serving_2``, ...);
* neither: one group, ``llmfleet_vllm_hosts`` or every Spark (the single-group
  inventories of before, unchanged).

``serving_groups`` never fails: the validation play asks ``serving_group_problems`` first
and stops with its sentences before any host changes.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.module_utils._http.stream import parse_url

GROUP_PREFIX = "serving_"
SIZE_VARIABLE = "llmfleet_group_size"
HOSTS_VARIABLE = "llmfleet_vllm_hosts"
DEFAULT_PORT = 8000
# Where role vllm_server's serving probe answers whether its group is ready (it has answered
# a real request): vllm_server_probe_port's default.
DEFAULT_PROBE_PORT = 8009
# The collection-wide variable each role's API port defaults to (roles vllm_server and
# mlx_server): what a host listens on when its inventory sets only that.
PORT_DEFAULTS = {"vllm_server_port": "llmfleet_vllm_port", "mlx_server_port": "llmfleet_api_port"}
# Role serving_gateway's metrics defaults: serving_gateway_metrics_host follows
# serving_gateway_host, which binds every address; serving_gateway_metrics_port.
WILDCARD_HOSTS = ("0.0.0.0", "::")  # noqa: S104 - compared with the inventory's, not bound
DEFAULT_GATEWAY_HOST = "0.0.0.0"  # noqa: S104 - the role's default, not bound here
DEFAULT_GATEWAY_METRICS_PORT = 8404


def _explicit_groups(groups):
    """The inventory's ``serving_*`` groups, ordered by where their first host stands."""
    sparks = list(groups.get("sparks") or [])
    found = [
        {"name": name, "hosts": list(hosts)}
        for name, hosts in groups.items()
        if name.startswith(GROUP_PREFIX) and hosts
    ]

    def position(group):
        first = group["hosts"][0]
        return (sparks.index(first) if first in sparks else len(sparks), group["name"])

    return sorted(found, key=position)


def _size(group_size):
    """``group_size`` as an int, or None when it is unset or not a whole number."""
    if group_size in (None, ""):
        return None
    try:
        return int(group_size)
    except (TypeError, ValueError):
        return None


# Where the gateway (role serving_gateway, __serving_gateway_counters_path) answers each
# upstream's own /metrics: COUNTERS_PATH/<upstream name>/metrics.
COUNTERS_PATH = "/llmfleet/groups"


def serving_groups(groups, group_size=None, vllm_hosts=None):
    """The serving groups, ``[{name, hosts}]``, from ``groups`` (Ansible's magic variable)."""
    if not isinstance(groups, dict):
        raise AnsibleFilterError(f"serving_groups needs Ansible's groups mapping, got {groups!r}")
    explicit = _explicit_groups(groups)
    if explicit:
        return explicit
    sparks = list(groups.get("sparks") or [])
    size = _size(group_size)
    if size and size > 0:
        return [
            {"name": f"{GROUP_PREFIX}{number}", "hosts": sparks[start : start + size]}
            for number, start in enumerate(range(0, len(sparks), size), start=1)
        ]
    hosts = list(vllm_hosts) if vllm_hosts else sparks
    return [{"name": f"{GROUP_PREFIX}1", "hosts": hosts}] if hosts else []


def _divisors(count):
    return [size for size in range(1, count + 1) if count % size == 0]


def _size_problems(group_size, sparks, explicit):
    size = _size(group_size)
    if size is None or size < 1:
        return [
            f"{SIZE_VARIABLE} is {group_size!r}; expected a whole number of 1 or more "
            "(the Sparks of one tensor-parallel group)"
        ]
    problems = []
    if len(sparks) % size:
        problems.append(
            f"{SIZE_VARIABLE} is {size} but the sparks group has {len(sparks)} hosts "
            f"({', '.join(sparks)}); expected a size that divides {len(sparks)}: "
            f"{', '.join(map(str, _divisors(len(sparks)))) or 'none'}"
        )
    if explicit:
        problems.append(
            f"{SIZE_VARIABLE} is {group_size!r} and the inventory also has serving groups "
            f"({', '.join(group['name'] for group in explicit)}); expected one of the two"
        )
    return problems


def _explicit_problems(explicit, sparks):
    problems = []
    seen = {}
    for group in explicit:
        name, hosts = group["name"], group["hosts"]
        outside = [host for host in hosts if host not in sparks]
        if outside:
            problems.append(
                f"serving group {name} has {', '.join(outside)}, not in the sparks group;"
                " expected Sparks only"
            )
        for host in hosts:
            if host in seen:
                problems.append(
                    f"{host} is in serving groups {seen[host]} and {name}; expected each Spark"
                    " in one group (a Spark's memory holds one rank)"
                )
            else:
                seen[host] = name
    return problems


def serving_group_problems(groups, group_size=None, vllm_hosts=None, fabric_hosts=None):
    """Sentences for serving groups that cannot be launched; empty when they can.

    ``fabric_hosts``: the hosts the CX7 fabric joins (cx7_network's group); every host of a
    group needs it, since its ranks talk over it.
    """
    if not isinstance(groups, dict):
        raise AnsibleFilterError(
            f"serving_group_problems needs Ansible's groups mapping, got {groups!r}"
        )
    sparks = list(groups.get("sparks") or [])
    explicit = _explicit_groups(groups)
    sized = group_size not in (None, "")
    problems = _size_problems(group_size, sparks, explicit) if sized else []
    if vllm_hosts and (explicit or sized):
        problems.append(
            f"{HOSTS_VARIABLE} is {list(vllm_hosts)} with several serving groups; it names "
            "the hosts of a single group: remove it, or list the hosts in serving_* groups"
        )
    problems += _explicit_problems(explicit, sparks)
    for group in serving_groups(groups, group_size, vllm_hosts) if fabric_hosts is not None else []:
        # A host outside the sparks group is named by its own check.
        outside = [h for h in group["hosts"] if h in sparks and h not in fabric_hosts]
        if outside:
            problems.append(
                f"serving group {group['name']} has {', '.join(outside)}, which the CX7"
                f" fabric does not join (it joins {', '.join(fabric_hosts) or 'no host'});"
                " expected every host of a group on the fabric its ranks talk over"
            )
    return problems


def serving_group_of(serving_groups_list, host):
    """The group ``host`` serves in (``{name, hosts}``), or ``{}`` when it serves in none."""
    for group in serving_groups_list or []:
        if host in group["hosts"]:
            return group
    return {}


def serving_fabric_hosts(serving_groups_list):
    """The hosts of the groups whose ranks talk over the CX7 fabric (2 hosts or more), in
    order: a group of one Spark sends nothing across it."""
    return [
        host for group in serving_groups_list if len(group["hosts"]) > 1 for host in group["hosts"]
    ]


def _address(hostvars, host):
    """Where another host reaches ``host``: its ansible_host, else its name."""
    return str(hostvars[host].get("ansible_host") or host)


def gateway_upstreams(serving_groups_list, single_hosts, hostvars):
    """What a gateway forwards to: ``[{name, host, model, address, port, check_port}]``, one
    per serving group (its rank 0, ``host``, which serves the API) and one per single-node
    host (a GH200-class box, a Mac Studio), each with the model it serves
    (``llmfleet_served_model``).

    ``single_hosts``: ``{host: port variable}``, e.g. ``{"gh200-1": "vllm_server_port"}``.
    A host whose inventory does not set that variable listens where the role's default puts
    it: the collection-wide port that variable defaults to (PORT_DEFAULTS), else 8000.

    ``check_port``: where a vLLM host's serving probe answers whether it is ready (it has
    answered a real request: ``vllm_server_probe_port``, else 8009); None for a host without
    a probe (a Mac's vllm-mlx, or ``vllm_server_probe: false``), checked at its API's /health.
    """
    entries = [
        (group["name"], group["hosts"][0], "vllm_server_port")
        for group in serving_groups_list or []
        if group.get("hosts")
    ] + [(host, host, variable) for host, variable in (single_hosts or {}).items()]
    upstreams = []
    for name, host, variable in entries:
        variables = hostvars[host]
        probed = variable == "vllm_server_port" and _true(variables.get("vllm_server_probe", True))
        upstreams.append(
            {
                "name": name,
                "host": host,
                "model": str(variables.get("llmfleet_served_model") or ""),
                "address": _address(hostvars, host),
                "port": int(
                    variables.get(variable)
                    or variables.get(PORT_DEFAULTS.get(variable, "llmfleet_api_port"))
                    or DEFAULT_PORT
                ),
                "check_port": int(variables.get("vllm_server_probe_port") or DEFAULT_PROBE_PORT)
                if probed
                else None,
            }
        )
    return upstreams


def gateway_metrics_targets(gateway_hosts, hostvars):
    """Where Prometheus scrapes each gateway's HAProxy exporter, from the inventory (role
    monitoring's gateway job): ``[{host, target}]``, ``target`` as ``address:port``. An
    exporter bound to every address (the default) is reached where the gateway's API is:
    its own address, or, bound to every address too, where Ansible reaches the host
    (``ansible_host``, else its name)."""
    targets = []
    for host in gateway_hosts or []:
        variables = hostvars[host]
        api_host = str(variables.get("serving_gateway_host") or DEFAULT_GATEWAY_HOST)
        metrics_host = str(variables.get("serving_gateway_metrics_host") or api_host)
        if metrics_host in WILDCARD_HOSTS:
            metrics_host = _address(hostvars, host) if api_host in WILDCARD_HOSTS else api_host
        port = int(variables.get("serving_gateway_metrics_port") or DEFAULT_GATEWAY_METRICS_PORT)
        bracketed = f"[{metrics_host}]" if ":" in metrics_host else metrics_host
        targets.append({"host": host, "target": f"{bracketed}:{port}"})
    return targets


def _true(value):
    """An inventory's boolean, which ``-e`` gives as text."""
    if isinstance(value, str):
        return value.strip().lower() not in ("false", "no", "off", "0", "")
    return bool(value)


def gateway_backends(upstreams):
    """The gateway's backends: upstreams grouped by the model they serve, in order of first
    appearance, ``[{model, servers: [{name, address, port}]}]``; the first is the default
    (requests that name no model, or one no backend serves)."""
    backends = {}
    for upstream in upstreams or []:
        server = {key: upstream.get(key) for key in ("name", "address", "port", "check_port")}
        backends.setdefault(upstream["model"], []).append(server)
    return [{"model": model, "servers": servers} for model, servers in backends.items()]


def gateway_groups(upstreams, gateway_url=None):
    """``[{name, url}]``: where a benchmark through the gateway reads the requests each
    upstream finished (llm_benchmark's ``groups``): under ``gateway_url``, the gateway's
    route to the upstream's own /metrics (role serving_gateway's COUNTERS_PATH), which
    answers wherever the gateway does; without it, the upstream's own API (which answers
    only the cluster's hosts when the gateway fronts it)."""
    base = ""
    if gateway_url:
        try:
            base = parse_url(gateway_url)["base"]
        except ValueError as error:
            raise AnsibleFilterError("gateway_groups: {0}".format(error)) from None
    groups = []
    for upstream in upstreams or []:
        if base:
            url = "{0}{1}/{2}".format(base, COUNTERS_PATH, upstream["name"])
        else:
            address = upstream["address"]
            host = "[{0}]".format(address) if ":" in address else address
            url = "http://{0}:{1}".format(host, upstream["port"])
        groups.append({"name": upstream["name"], "url": url})
    return groups


class FilterModule:
    def filters(self):
        return {
            "serving_groups": serving_groups,
            "serving_group_problems": serving_group_problems,
            "serving_group_of": serving_group_of,
            "serving_fabric_hosts": serving_fabric_hosts,
            "gateway_upstreams": gateway_upstreams,
            "gateway_backends": gateway_backends,
            "gateway_groups": gateway_groups,
            "gateway_metrics_targets": gateway_metrics_targets,
        }
