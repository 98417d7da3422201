"""The preload_filters callback: after it ran in the controller, a worker forked from it
finds the collection's filters without importing a file."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]

# Runs in a fresh interpreter (the plugin loaders are process-wide): preload or not, then
# fork as the strategy forks a worker, and count in the worker the plugin files the
# loader imports to find one filter of ours and one of community.general.
WORKER = textwrap.dedent(
    """
    import json, os, sys
    from ansible.plugins import loader
    loader.init_plugin_loader([sys.argv[1]])
    from ansible_collections.llmfleet.cluster.plugins.callback import preload_filters
    failures = {}
    if sys.argv[2] == "preload":
        failures = preload_filters.preload(["llmfleet.cluster", "community.general"])
    read, write = os.pipe()
    if os.fork() == 0:
        imported = []
        source = loader.PluginLoader._load_module_source
        def counted(self, *args, **kwargs):
            imported.append(kwargs.get("path") or args[-1])
            return source(self, *args, **kwargs)
        loader.PluginLoader._load_module_source = counted
        found = [loader.filter_loader.get(name) is not None
                 for name in ("llmfleet.cluster.fabric_address", "community.general.counter")]
        os.write(write, json.dumps({"found": found, "imported": imported}).encode())
        os._exit(0)
    os.close(write)
    print(json.dumps({"failures": failures, **json.loads(os.read(read, 1 << 20))}))
    """
)


def worker(mode: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", WORKER, str(REPO / "collections"), mode],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    return json.loads(proc.stdout.splitlines()[-1])


def test_a_worker_forked_after_the_preload_imports_no_filter_file() -> None:
    result = worker("preload")
    assert result["found"] == [True, True]
    assert result["imported"] == []
    # Our collection has no test plugins: that is the one thing not preloaded.
    assert list(result["failures"]) == ["test llmfleet.cluster"]


def test_without_it_the_worker_imports_every_filter_file_of_the_collection() -> None:
    result = worker("none")
    assert result["found"] == [True, True]
    ours = {Path(path).name for path in result["imported"] if "/llmfleet/cluster/" in path}
    assert ours == {path.name for path in (REPO / "plugins" / "filter").glob("*.py")}
