#!/usr/bin/python
# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Ansible module bench_report: keep one benchmark run as files and compare it with the last."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: bench_report
short_description: Keep a benchmark run as JSON, markdown and PNG, compared with the last run
version_added: "0.1.0"
author:
  - llmfleet maintainers (!UNKNOWN)
description:
  - Turns the result of M(llmfleet.cluster.llm_benchmark) into the files a user keeps, in
    O(output_dir), named C({name_prefix}-{stamp}) after the run's UTC start time
    (C(benchmark.started) as C(YYYYMMDDTHHMMSSZ)), for example C(bench-20261122T231000Z).
  - C(.json) is the record - C(schema) (V(1)), C(benchmark), C(config), each key of O(extra),
    and C(comparison) (RV(comparison)) - that later runs are compared against.
  - "C(.md) is a report - the run, the configuration as C(key: value) lines (nested keys joined
    with dots), one table with a row per scenario (warm-ups marked), the comparison with the
    previous run (each value followed by its change in percent), and each section of O(extra)
    as a key/value table."
  - C(.png) (with O(plot)) is one 1200x900 figure of the non-warm-up scenarios - TTFT and
    latency percentiles, output and decode tokens per second, errors and requests per second -
    with the previous run's values as hollow markers.
  - The previous run is the newest C({name_prefix}-{stamp}.json) in O(output_dir) with an older
    stamp than this run's; files that cannot be read as a record are skipped with a warning.
    Every non-warm-up scenario found in both runs is compared metric by metric, and each metric
    gets a verdict - V(better), V(worse), or V(same) when it moved by 2% or less - knowing that
    lower is better for times and errors and higher for rates.
  - "Runs on the controller (C(delegate_to: localhost)), where the reports are kept."
options:
  benchmark:
    description:
      - The benchmark as M(llmfleet.cluster.llm_benchmark) returns it. It needs C(started)
        (ISO 8601) and C(scenarios), a list of dicts with a C(name) each; every other value may
        be missing or null and is shown as C(—).
    type: dict
    required: true
  config:
    description:
      - The cluster's configuration as the role gathers it (topology, model, vLLM options,
        hosts, transport), stored verbatim in the record and listed in the report.
    type: dict
    default: {}
  extra:
    description:
      - Other sections stored verbatim at the top level of the record and shown in the report as
        key/value tables, for example C(claude_code) (wall times measured with hyperfine) or
        C(transport) (the transport checks' results).
      - The keys C(schema), C(benchmark), C(config) and C(comparison) are the record's own and
        fail the task.
    type: dict
    default: {}
  output_dir:
    description:
      - Directory the files are written to and the previous run is looked for in; created
        (mode 0755) when missing.
    type: path
    required: true
  name_prefix:
    description:
      - Start of the file names, letters, digits, C(.), C(_) and C(-). Runs with different
        prefixes in one directory are not compared with each other.
    type: str
    default: bench
  plot:
    description:
      - Draw the PNG. Needs matplotlib in the Python that runs Ansible on the controller.
    type: bool
    default: true
  compare:
    description:
      - Compare with the previous run. V(false) stores and reports an empty comparison.
    type: bool
    default: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Computes the record, report and comparison and says whether files would change;
      writes nothing.
  diff_mode:
    support: none
  idempotent:
    description:
      - When run twice in a row, the second run changes nothing.
    support: full
    details: Files are compared before they are written. The PNG is not byte-stable across
      matplotlib runs, so it is left alone when the JSON and markdown are unchanged and it exists.
  platform:
    platforms: posix
requirements:
  - matplotlib >= 3.8 on the controller (with O(plot), the default).
notes:
  - Files are written atomically with mode 0644.
  - A run reported again after newer runs were written is still compared with the run before it,
    so its files stay the same.
  - In check mode, a benchmark without C(started) (the plan M(llmfleet.cluster.llm_benchmark)
    returns in check mode) is not an error - a real run would write a new report, so C(changed)
    is true, the paths are null and RV(summary) is empty.
seealso:
  - module: llmfleet.cluster.llm_benchmark
    description: Measures the runs this module keeps.
"""

EXAMPLES = r"""
- name: Measure the model's latency and throughput
  llmfleet.cluster.llm_benchmark:
    url: "http://{{ vllm_head_address }}:8000"
    model: llmfleet-tiny
  register: __bench_run

- name: Keep the run in benchmarks/ next to the inventory, compared with the previous one
  llmfleet.cluster.bench_report:
    benchmark: "{{ __bench_run.benchmark }}"
    config:
      topology: "{{ vllm_topology }}"
      model: "{{ vllm_model }}"
      vllm_args: "{{ vllm_extra_args }}"
      hosts: "{{ groups['sparks'] }}"
    extra:
      claude_code: "{{ __bench_claude_code.results[0] }}"
    output_dir: "{{ inventory_dir }}/benchmarks"
  delegate_to: localhost
  run_once: true
  register: __bench_report

- name: Show the run per scenario
  ansible.builtin.debug:
    msg: "{{ __bench_report.summary }}"

- name: Keep a quick run without a plot and without comparing it
  llmfleet.cluster.bench_report:
    benchmark: "{{ __bench_run.benchmark }}"
    output_dir: /var/tmp/llmfleet-bench
    name_prefix: smoke
    plot: false
    compare: false
  delegate_to: localhost
"""

RETURN = r"""
json_path:
  description: The record file (written, or that would be written in check mode); null in check
    mode for a benchmark that has not run (no C(started)).
  returned: always
  type: str
  sample: /home/me/llmfleet/benchmarks/bench-20261122T231000Z.json
markdown_path:
  description: The markdown report; null like RV(json_path).
  returned: always
  type: str
  sample: /home/me/llmfleet/benchmarks/bench-20261122T231000Z.md
png_path:
  description: The figure; null when O(plot) is false, and like RV(json_path).
  returned: always
  type: str
  sample: /home/me/llmfleet/benchmarks/bench-20261122T231000Z.png
previous:
  description: The previous run's record compared with; null when there is none or O(compare)
    is false.
  returned: always
  type: str
  sample: /home/me/llmfleet/benchmarks/bench-20261121T180500Z.json
comparison:
  description:
    - The comparison with the previous run, also stored in the record. Times in seconds.
    - C(change_pct) is the change in percent of the previous value, null when the previous
      value is 0 or either is null; C(verdict) is null when either value is null.
  returned: always
  type: dict
  sample:
    previous: bench-20261121T180500Z.json
    scenarios:
      short_c4:
        ttft_p50: {previous: 0.2, current: 0.212, change_pct: 6.0, verdict: worse}
        ttft_p90: {previous: 0.25, current: 0.25, change_pct: 0.0, verdict: same}
        ttft_p99: {previous: 0.3, current: 0.29, change_pct: -3.33, verdict: better}
        latency_p50: {previous: 1.6, current: 1.62, change_pct: 1.25, verdict: same}
        latency_p90: {previous: 1.9, current: 1.8, change_pct: -5.26, verdict: better}
        latency_p99: {previous: 2.1, current: 2.0, change_pct: -4.76, verdict: better}
        output_tokens_per_s: {previous: 75.0, current: 78.4, change_pct: 4.53, verdict: better}
        decode_tokens_per_s: {previous: 21.0, current: 21.2, change_pct: 0.95, verdict: same}
        requests_per_s: {previous: 2.3, current: 2.45, change_pct: 6.52, verdict: better}
        errors: {previous: 0, current: 0, change_pct: null, verdict: same}
  contains:
    previous:
      description: File name of the previous record; null when there is none.
      type: str
      returned: always
      sample: bench-20261121T180500Z.json
    scenarios:
      description:
        - Per non-warm-up scenario found in both runs, per metric (C(ttft_p50), C(ttft_p90),
          C(ttft_p99), C(latency_p50), C(latency_p90), C(latency_p99), C(output_tokens_per_s),
          C(decode_tokens_per_s), C(requests_per_s), C(errors)) a dict of C(previous),
          C(current), C(change_pct) and C(verdict) (V(better), V(worse) or V(same) within 2%).
      type: dict
      returned: always
      sample: {}
summary:
  description: One line per scenario, warm-ups marked, with the verdict counts when compared.
  returned: always
  type: list
  elements: str
  sample:
    - "warmup (warm-up): 2 ok, 0 errors, TTFT p50 200 ms, 20.6 out tok/s"
    - "short_c4: 16 ok, 0 errors, TTFT p50 212 ms, 78.4 out tok/s; vs previous: 5 better,
      1 worse, 4 same"
"""

# Ansible's module layout: documentation first, imports after it.
from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.plot import (  # noqa: E402
    MATPLOTLIB_MISSING,
    load_matplotlib,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.record import (  # noqa: E402
    BenchReportError,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.report import (  # noqa: E402
    report,
)

ARGUMENT_SPEC = {
    "benchmark": {"type": "dict", "required": True},
    "config": {"type": "dict", "default": {}},
    "extra": {"type": "dict", "default": {}},
    "output_dir": {"type": "path", "required": True},
    "name_prefix": {"type": "str", "default": "bench"},
    "plot": {"type": "bool", "default": True},
    "compare": {"type": "bool", "default": True},
}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    if params["plot"]:
        try:
            load_matplotlib()
        except ImportError as error:
            module.fail_json(msg=MATPLOTLIB_MISSING.format(error))
    try:
        result = report(
            params["benchmark"],
            params["output_dir"],
            config=params["config"],
            extra=params["extra"],
            name_prefix=params["name_prefix"],
            plot=params["plot"],
            compare_previous=params["compare"],
            check_mode=module.check_mode,
        )
    except BenchReportError as error:
        module.fail_json(msg=str(error))
    except OSError as error:
        module.fail_json(
            msg="cannot write the report to {0}: {1}".format(params["output_dir"], error)
        )
    for path in result.pop("skipped"):
        module.warn(
            "{0} is not a readable benchmark record; skipped as the previous run".format(path)
        )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
