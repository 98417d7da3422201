# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""The load each serving group carried in a benchmark run through a serving gateway.

A gateway hides its groups: its own answers cannot say which group served a request. Each
group's vLLM counts for itself, on its rank 0's ``/metrics`` (which the gateway serves to
whoever has the key, the groups answering the cluster's hosts only): the requests it finished
(``vllm:request_success_total``) and its prefix-cache queries and hits. Read before and
after each scenario, their differences give each group's share of the requests, and their
sums the prefix-cache ratio of the whole run.
"""

from __future__ import annotations

import asyncio

from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.sessions import (
    SPECULATIVE_COUNTERS,
    model_counters,
    read_metrics_text,
    speculative_counters,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._http.stream import (
    make_ssl_context,
    parse_url,
)

# llm_benchmark's ``groups`` (documented in doc_fragments/bench_groups.py).
GROUPS_OPTION = {
    "type": "list",
    "elements": "dict",
    "default": [],
    "options": {
        "name": {"type": "str", "required": True},
        "url": {"type": "str", "required": True},
    },
}


def group_problems(groups):
    """Problems with the ``groups`` parameter (empty when fine)."""
    problems = []
    names = set()
    for number, group in enumerate(groups or [], start=1):
        if not isinstance(group, dict) or not group.get("name") or not group.get("url"):
            problems.append("groups[{0}] needs a name and a url, got {1!r}".format(number, group))
            continue
        if group["name"] in names:
            problems.append(
                "groups has {0} twice; expected one entry per group".format(group["name"])
            )
        names.add(group["name"])
        try:
            parse_url(group["url"])
        except ValueError as error:
            problems.append("groups[{0}] ({1}): {2}".format(number, group["name"], error))
    return problems


def parse_group_counters(text, model):
    """``{"requests": n, "queries": n, "hits": n}`` of ``model`` from a group's /metrics text
    (with the speculative decoding counters when it has them); the prefix counters are None
    when the text has none."""
    totals = model_counters(text, model)
    prefix = "prefix_cache_queries" in totals and "prefix_cache_hits" in totals
    return {
        "requests": totals.get("request_success", 0.0),
        "queries": totals["prefix_cache_queries"] if prefix else None,
        "hits": totals["prefix_cache_hits"] if prefix else None,
        **speculative_counters(totals),
    }


class Groups:
    """The serving groups behind a gateway, each read at its own vLLM."""

    def __init__(self, groups, model, timeout=30.0, validate_certs=True, api_key=None):
        self.model = model
        self.timeout = timeout
        # The gateway's route to a group's counters takes the key, as its API does.
        self.api_key = api_key
        self.members = []
        for group in groups or []:
            endpoint = parse_url(group["url"])
            context = make_ssl_context(validate_certs) if endpoint["scheme"] == "https" else None
            self.members.append((group["name"], endpoint, context))

    def __bool__(self):
        return bool(self.members)

    async def read(self):
        """``{name: counters}``; a group that cannot be read is None."""

        async def one(endpoint, context):
            text = await read_metrics_text(endpoint, context, self.timeout, self.api_key)
            return parse_group_counters(text, self.model) if text is not None else None

        counters = await asyncio.gather(*(one(e, c) for _name, e, c in self.members))
        return {member[0]: counters[index] for index, member in enumerate(self.members)}

    async def prefix_counters(self):
        """The groups' prefix-cache counters summed (and their speculative decoding counters,
        when every group has them); None when one cannot be read."""
        counters = await self.read()
        if any(c is None or c["queries"] is None for c in counters.values()):
            return None
        keys = ["queries", "hits"]
        if all(all(key in c for key in SPECULATIVE_COUNTERS) for c in counters.values()):
            keys += list(SPECULATIVE_COUNTERS)
        return {key: sum(c[key] for c in counters.values()) for key in keys}


def group_load(before, after):
    """Each group's finished requests between two reads and its share of them: a list of
    ``{name, requests, share}`` (requests and share None for a group not read both times)."""
    moved = {}
    for name in before:
        if before[name] is None or (after.get(name) is None):
            moved[name] = None
        else:
            moved[name] = round(after[name]["requests"] - before[name]["requests"])
    total = sum(value for value in moved.values() if value)
    return [
        {
            "name": name,
            "requests": value,
            "share": round(value / total, 4) if value is not None and total else None,
        }
        for name, value in moved.items()
    ]
