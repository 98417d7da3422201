"""llmfleet.reach: the tags of site.yml a change of variables reaches, on a small collection
of its own (each rule: definitions, facts set on the way, setters and includers walked with
their readers, what cannot be bounded), on the collection itself (a profile change walks
the serving roles and not the fabric nor the clients), and the conventions it relies on: a
role's every task carries the role's name as a tag, the checks gather every fact a role
gathers again, and a fact read with a default is read so everywhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from llmfleet import reach
from llmfleet.reach import OPTIONAL_FACTS, walk_tags

ROOT = Path(__file__).resolve().parents[3]


def write(root: Path, files: dict[str, object]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else yaml.safe_dump(content))
    return root


def role(name: str, tasks: list[dict], **folders: object) -> dict[str, object]:
    files: dict[str, object] = {f"roles/{name}/tasks/main.yml": tasks}
    files |= {f"roles/{name}/{folder}/main.yml": value for folder, value in folders.items()}
    return files


# A filter plugin of two filters: each reads its own function's words, the constants and
# functions it names and the modules of the collection it imports them from.
GROUPS_PLUGIN = """
from ansible_collections.llmfleet.cluster.plugins.module_utils.hosts import pick

HOSTS = "alpha_hosts"


def _names(hostvars):
    return [HOSTS, pick(hostvars)]


def groups_of(hostvars):
    return _names(hostvars)


def ports_of(hostvars):
    return hostvars["alpha_ports"]


class FilterModule:
    def filters(self):
        return {"groups_of": groups_of, "ports_of": ports_of}
"""


def collection(tmp_path: Path, plays: list[dict], *roles: dict[str, object]) -> Path:
    files: dict[str, object] = {
        "site.yml": [{"ansible.builtin.import_playbook": "playbooks/all.yml"}],
        "playbooks/all.yml": plays,
        "plugins/filter/groups.py": GROUPS_PLUGIN,
        "plugins/filter/sizes.py": (
            'SIZE = "alpha_size"\n\nclass FilterModule:\n'
            '    def filters(self):\n        return {"size_of": len}\n'
        ),
        "plugins/module_utils/hosts.py": 'def pick(hostvars):\n    return hostvars["alpha_pick"]\n',
    }
    for each in roles:
        files |= each
    return write(tmp_path, files)


def task(name: str, **body: object) -> dict[str, object]:
    return {"name": name, **body}


ALPHA = role(
    "alpha",
    [task("Write", **{"ansible.builtin.copy": {"content": "{{ __alpha_text }}"}}),
     task("Keep", **{"ansible.builtin.set_fact": {"alpha_port_open": "{{ alpha_port }}"}})],
    defaults={"alpha_port": 1, "alpha_text": "x"},
    vars={"__alpha_text": "{{ alpha_text | upper }}"},
)  # fmt: skip
BETA = role(
    "beta",
    [task("Use", **{"ansible.builtin.debug": {"msg": "{{ alpha_port_open }} {{ beta_x }}"}})],
)
GAMMA = role("gamma", [task("Own", **{"ansible.builtin.debug": {"msg": "{{ gamma_y }}"}})])
PLAY = {"name": "Serve", "hosts": "all", "roles": ["alpha", "beta", "gamma"]}


def test_a_variable_reaches_the_roles_that_read_it_through_their_definitions(
    tmp_path: Path,
) -> None:
    root = collection(tmp_path, [PLAY], ALPHA, BETA, GAMMA)
    assert walk_tags(root, ["alpha_text"]) == ["alpha"]  # via vars' __alpha_text
    assert walk_tags(root, ["gamma_y"]) == ["gamma"]
    assert walk_tags(root, ["nothing_reads_this"]) == []


def test_a_fact_set_on_the_way_reaches_its_readers_and_a_reader_walks_its_setter(
    tmp_path: Path,
) -> None:
    root = collection(tmp_path, [PLAY], ALPHA, BETA, GAMMA)
    # alpha_port -> alpha's fact alpha_port_open -> beta.
    assert walk_tags(root, ["alpha_port"]) == ["alpha", "beta"]
    # beta reads alpha's fact, which does not outlive a run: alpha is walked with it.
    assert walk_tags(root, ["beta_x"]) == ["alpha", "beta"]


def test_a_reached_role_walks_the_units_that_include_it(tmp_path: Path) -> None:
    include = {
        "name": "Run gamma",
        "ansible.builtin.include_role": {"name": "llmfleet.cluster.gamma"},
        "tags": ["delta"],
    }
    delta = role("delta", [include])
    plays = [{"name": "Serve", "hosts": "all", "roles": ["delta"]}]
    root = collection(tmp_path, plays, delta, GAMMA)
    assert walk_tags(root, ["gamma_y"]) == ["delta"]


def test_a_filter_reads_the_names_its_source_holds(tmp_path: Path) -> None:
    message = "{{ hostvars | llmfleet.cluster.groups_of }} {{ 1 | llmfleet.cluster.size_of }}"
    uses = role("beta", [task("Groups", **{"ansible.builtin.debug": {"msg": message}})])
    root = collection(tmp_path, [{"name": "P", "hosts": "all", "roles": ["beta"]}], uses)
    assert walk_tags(root, ["alpha_hosts"]) == ["beta"]  # a constant its function names
    assert walk_tags(root, ["alpha_pick"]) == ["beta"]  # in the module it imports from
    assert walk_tags(root, ["alpha_ports"]) == []  # the plugin's other filter reads it
    assert walk_tags(root, ["alpha_size"]) == ["beta"]  # not a function: the whole plugin


def test_a_definition_and_a_play_entry_read_what_the_filters_they_call_read(
    tmp_path: Path,
) -> None:
    """A filter reads the inventory through hostvars: the role's vars that call it, and the
    play's vars for a role that call it, read what its source names."""
    gamma = role(
        "gamma",
        [task("Show", **{"ansible.builtin.debug": {"msg": "{{ __gamma_groups }}"}})],
        vars={"__gamma_groups": "{{ hostvars | llmfleet.cluster.groups_of }}"},
    )
    beta = role("beta", [task("Use", **{"ansible.builtin.debug": {"msg": "{{ beta_x }}"}})])
    entry = {"role": "beta", "vars": {"beta_x": "{{ hostvars | llmfleet.cluster.ports_of }}"}}
    root = collection(tmp_path, [{"name": "P", "hosts": "all", "roles": ["gamma", entry]}],
                      gamma, beta)  # fmt: skip
    assert walk_tags(root, ["alpha_hosts"]) == ["gamma"]
    assert walk_tags(root, ["alpha_ports"]) == ["beta"]


def test_what_cannot_be_bounded_walks_everything(tmp_path: Path) -> None:
    untagged = task("Say", **{"ansible.builtin.debug": {"msg": "{{ gamma_y }}"}})
    plays = [PLAY, {"name": "Report", "hosts": "all", "tasks": [untagged]}]
    root = collection(tmp_path, plays, ALPHA, BETA, GAMMA)
    assert walk_tags(root, ["gamma_y"]) is None  # a play task without tags
    assert walk_tags(root, ["alpha_text"]) == ["alpha"]
    for connection in ("ansible_host", "ansible_user", "inventory_hostname"):
        assert walk_tags(root, [connection]) is None
    computed = {
        "roles/beta/tasks/main.yml": (
            "- name: Any\n  ansible.builtin.debug:\n"
            "    msg: \"{{ lookup('vars', 'alpha_' ~ item) }}\"\n"
        )
    }
    root = collection(tmp_path, [PLAY], ALPHA, computed, GAMMA)
    assert "beta" in (walk_tags(root, ["gamma_y"]) or [])


def test_tagged_always_is_walked_anyway_and_its_facts_need_no_setter(tmp_path: Path) -> None:
    checks = {
        "name": "Check",
        "hosts": "all",
        "tasks": [
            task("Derive", tags=["always"],
                 **{"ansible.builtin.set_fact": {"alpha_port_open": "{{ alpha_text }}"}}),
        ],
    }  # fmt: skip
    root = collection(tmp_path, [checks, PLAY], ALPHA, BETA, GAMMA)
    assert walk_tags(root, ["beta_x"]) == ["beta"]


# The collection itself.
PROFILE = ["vllm_server_profile_overrides"]
SERVING = {"vllm_server", "ray_node", "preflight", "report"}
UNTOUCHED = {
    "cx7_network", "fabric_verify", "rdma_verify", "nccl_env", "cluster_firewall",
    "model_weights", "claude_code", "claude_code_router", "verify",
}  # fmt: skip


def test_a_profile_change_walks_the_serving_roles_and_not_the_fabric_nor_the_clients() -> None:
    tags = walk_tags(ROOT, PROFILE)
    assert tags is not None
    assert set(tags) >= SERVING, tags
    assert not UNTOUCHED & set(tags), tags


def test_a_client_setting_walks_only_its_role() -> None:
    assert walk_tags(ROOT, ["claude_code_router_log_level"]) == ["claude_code_router"]


def test_a_monitoring_setting_walks_only_monitoring() -> None:
    # Prometheus' targets come from the inventory, not from the serving roles' facts.
    assert walk_tags(ROOT, ["monitoring_scrape_interval"]) == ["monitoring"]


def test_the_serving_probes_port_reaches_the_gateway_that_checks_it() -> None:
    # The gateway's upstreams (the filter gateway_upstreams, called in a vars file) read it
    # from hostvars: a limited walk left HAProxy checking the old port.
    tags = walk_tags(ROOT, ["vllm_server_probe_port"]) or []
    assert {"serving_gateway", "vllm_server", "cluster_firewall"} <= set(tags), tags


def test_a_connection_variable_walks_everything() -> None:
    assert walk_tags(ROOT, ["ansible_host"]) is None


def _role_main_tasks() -> list[tuple[str, dict]]:
    """The main tasks of each role a play of site.yml lists (the others run only through an
    include, which applies its own tags)."""
    listed = {
        name
        for unit in reach.Collection(ROOT).units
        if ": role " in unit.name
        for name in unit.includes
    }
    found = []
    for name in sorted(listed):
        main = ROOT / "roles" / name / "tasks" / "main.yml"
        found += [(name, each) for each in yaml.safe_load(main.read_text()) or []]
    return found


@pytest.mark.parametrize(("role_name", "entry"), _role_main_tasks())
def test_every_task_of_a_role_carries_its_name_as_a_tag(role_name: str, entry: dict) -> None:
    """`--tags <role>` walks the whole role: its main tasks carry the tag, and what they
    include dynamically carries it too (apply)."""
    tags = entry.get("tags") or []
    assert role_name in tags or "always" in tags, (role_name, entry.get("name"))
    for module in ("ansible.builtin.include_tasks", "ansible.builtin.include_role"):
        spec = entry.get(module)
        if isinstance(spec, dict) and role_name in tags:
            applied = (spec.get("apply") or {}).get("tags") or []
            assert role_name in applied, (role_name, entry.get("name"))


def _subsets(task: dict) -> set[str]:
    return {str(s) for s in task["ansible.builtin.setup"].get("gather_subset") or []}


def test_the_checks_gather_every_fact_a_role_gathers_again() -> None:
    """Gathered facts are not asked of their setters (llmfleet.reach): the checks, tagged
    always, gather each subset a role's setup gathers."""
    validate = (ROOT / "playbooks" / "validate.yml").read_text()
    checks = yaml.safe_load(validate)
    gathered = {
        s
        for each in reach._flat(reach._task_list(checks[0]["tasks"]))
        if "ansible.builtin.setup" in each
        for s in _subsets(each)
    }
    assert {"network", "distribution", "platform"} <= gathered, gathered
    for path in sorted(ROOT.glob("roles/*/tasks/*.yml")):
        for each in reach._flat(reach._task_list(yaml.safe_load(path.read_text()))):
            if "ansible.builtin.setup" in each:
                wanted = {s for s in _subsets(each) if not s.startswith("!")}
                assert wanted <= gathered, (path, wanted)


@pytest.mark.parametrize("name", sorted(OPTIONAL_FACTS))
def test_a_fact_read_with_a_default_is_read_so_everywhere(name: str) -> None:
    guard = OPTIONAL_FACTS[name]
    for path in sorted([*ROOT.glob("roles/*/tasks/*.yml"), *ROOT.glob("playbooks/*.yml")]):
        for line in path.read_text().splitlines():
            if name in line and not re.search(rf"{name}\s*:", line):
                assert re.search(rf"{name}\s*\|\s*{re.escape(guard)}", line), (path, line)
