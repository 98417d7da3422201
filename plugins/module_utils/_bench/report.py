# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""One benchmark run as the files a user keeps (JSON record, markdown, PNG), and its
comparison with the previous run: what the module ``bench_report`` does.

Pure functions, no AnsibleModule: the module is a thin wrapper around ``report`` and
unit tests call the pieces directly - the record and its file names
(``record``), the comparison (``comparison``), the text
(``format``, ``markdown``) and the plot (``plot``). Standard
library only, except the plot, which imports matplotlib when called.

The benchmark is the dict the module ``llm_benchmark`` returns: ``started`` (ISO 8601),
``model``, ``url`` and a list of ``scenarios``, each with ``name``, ``warmup``, counts
(``requests``, ``ok``, ``errors``, ``prompt_tokens``, ``output_tokens``), rates
(``output_tokens_per_s``, ``decode_tokens_per_s``, ``requests_per_s``) and the stats
dicts ``ttft_s``, ``latency_s``, ``tpot_s`` (``mean p50 p90 p99 min max`` in seconds).
Any value may be None (a scenario without a successful request has no statistics).
"""

from __future__ import annotations

import os
import tempfile

from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.comparison import (
    compare,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.format import (
    summary_lines,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.markdown import (
    render_markdown,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.plot import (
    render_png,
)
from ansible_collections.llmfleet.cluster.plugins.module_utils._bench.record import (
    BenchReportError,
    build_record,
    file_stem,
    find_previous,
    record_json,
    validate_benchmark,
)

FILE_MODE = 0o644
DIR_MODE = 0o755


def file_needs_write(path, data):
    """True when path is missing, holds other bytes, or has another mode than 0644."""
    try:
        with open(path, "rb") as handle:
            current = handle.read()
        mode = os.stat(path).st_mode & 0o7777
    except OSError:
        return True
    return current != data or mode != FILE_MODE


def write_file(path, data):
    """Write bytes atomically (temporary file in the same directory, then rename), 0644."""
    directory = os.path.dirname(path) or "."
    handle, tmp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def report(
    benchmark,
    output_dir,
    *,
    config=None,
    extra=None,
    name_prefix="bench",
    plot=True,
    compare_previous=True,
    check_mode=False,
    png_renderer=render_png,
):
    """Build the record, markdown and plot of a run (compared with the previous run unless
    compare_previous is false), and write what differs.

    Returns the module's result (with ``changed``) plus ``skipped`` (unreadable older
    records). Raises BenchReportError on bad input, ImportError when plot is true and
    matplotlib is missing, OSError when the files cannot be written."""
    if check_mode and isinstance(benchmark, dict) and benchmark.get("started") is None:
        # llm_benchmark's check mode returns the plan, without times or metrics: a real run
        # would measure and write a new report, which is all there is to say.
        return {
            "changed": True,
            "json_path": None,
            "markdown_path": None,
            "png_path": None,
            "previous": None,
            "comparison": {"previous": None, "scenarios": {}},
            "summary": [],
            "skipped": [],
        }
    problems = validate_benchmark(benchmark)
    if problems:
        raise BenchReportError("; ".join(problems))
    stem = file_stem(name_prefix, benchmark["started"])
    stamp = stem[len(name_prefix) + 1 :]
    previous_path, previous_record, skipped = None, None, []
    if compare_previous:
        previous_path, previous_record, skipped = find_previous(output_dir, name_prefix, stamp)
    comparison = compare(
        previous_record["benchmark"] if previous_record else None,
        benchmark,
        os.path.basename(previous_path) if previous_path else None,
    )
    record = build_record(benchmark, config, extra, comparison)
    json_path = os.path.join(output_dir, stem + ".json")
    md_path = os.path.join(output_dir, stem + ".md")
    png_path = os.path.join(output_dir, stem + ".png") if plot else None
    json_data = record_json(record).encode("utf-8")
    md_data = render_markdown(record).encode("utf-8")

    writes = []
    if file_needs_write(json_path, json_data):
        writes.append((json_path, json_data))
    if file_needs_write(md_path, md_data):
        writes.append((md_path, md_data))
    png_mode_fix = False
    if plot and (writes or not os.path.isfile(png_path)):
        writes.append((png_path, png_renderer(record, previous_record)))
    elif plot:
        png_mode_fix = (os.stat(png_path).st_mode & 0o7777) != FILE_MODE
    changed = bool(writes) or png_mode_fix or not os.path.isdir(output_dir)
    if not check_mode:
        if not os.path.isdir(output_dir):
            os.makedirs(output_dir, DIR_MODE)
        for path, data in writes:
            write_file(path, data)
        if png_mode_fix:
            os.chmod(png_path, FILE_MODE)
    return {
        "changed": changed,
        "json_path": json_path,
        "markdown_path": md_path,
        "png_path": png_path,
        "previous": previous_path,
        "comparison": comparison,
        "summary": summary_lines(benchmark, comparison),
        "skipped": skipped,
    }
