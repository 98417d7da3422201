# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""The option of llm_benchmark that reads each serving group behind a gateway."""

from __future__ import annotations


class ModuleDocFragment:
    # The argument spec is module_utils/_bench/groups.py's GROUPS_OPTION.
    DOCUMENTATION = r"""
options:
  groups:
    description:
      - The serving groups behind a serving gateway at O(url), each read at C(<url>/metrics)
        (its vLLM's counters, with O(api_key)) before and after every scenario.
      - Every scenario then reports RV(benchmark.scenarios[].by_group), the share of its
        requests each group finished, and a V(session) scenario's prefix-cache figures sum
        every group's counters (the gateway has none of its own).
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The group's name, as the report shows it.
        type: str
        required: true
      url:
        description: >-
          Where the group's counters are read: the gateway's route to them, e.g.
          C(http://spark-1:8080/llmfleet/groups/serving_2)
          (P(llmfleet.cluster.gateway_groups#filter) gives these), or its own vLLM base URL (its
          rank 0) from a host it answers.
        type: str
        required: true
"""
