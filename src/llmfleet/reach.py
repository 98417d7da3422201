"""Which of ``site.yml``'s tasks a change of variables reaches: the tags that walk them.

``llmfleet up`` walks only these when the last full run's record says that nothing but some
variables changed on any host (a profile change): ``site.yml --tags <these>``, the checks of
the whole inventory (tagged always) included. The answer errs on the side of walking more:

* a variable reaches every definition that names it (role defaults and vars, the playbooks'
  vars files and play vars), or that calls a filter whose source names it (a filter reads
  the inventory through ``hostvars``), and every name those reach, to a fixed point;
* a task that names a reached name reaches what it sets (``set_fact``, ``register``), to
  the same fixed point;
* a unit (a role's tasks, handlers and templates with the filters they call; a play's task
  with the files it includes; a play's role entry) that names a reached name is walked;
* a walked unit needs every unit that sets a name it reads (facts do not outlive a run),
  but for what runs whatever the tags (the checks, tagged always), the facts the checks
  gather and OPTIONAL_FACTS; a walked role needs every unit that includes it;
* a name is any word of the text: a word that is not a variable walks more, never less.

It answers None (walk everything) for what it cannot bound: a connection or magic variable,
a reached play task without tags, a unit that reads variables by computed names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from llmfleet.filter_source import WORD, FilterSource, Modules

# Reading a variable by a name computed at run time: such a unit may read any variable.
COMPUTED_NAMES = re.compile(r"""(?:lookup|query)\(\s*['"]+vars['"]+|\bvars\[|varnames""")
# A role included or imported by another unit.
INCLUDED_ROLE = re.compile(r"\bname:\s*['\"]?llmfleet\.cluster\.([A-Za-z0-9_]+)")
COLLECTION_CALL = re.compile(r"\bllmfleet\.cluster\.([A-Za-z0-9_]+)")
# What every task depends on: a change of these walks everything.
WHOLE_RUN_PREFIXES = ("ansible_",)
WHOLE_RUN_NAMES = frozenset({"inventory_hostname", "group_names", "groups"})
# The folders of a role whose text its tasks read (defaults and vars are definitions; the
# argument specs check values and change nothing).
ROLE_TASK_FOLDERS = ("tasks", "handlers", "templates")
ROLE_DEFINITION_FOLDERS = ("defaults", "vars")
FACTS = "ansible_facts"
# Facts a role reads only with a default, and copes without: a reader's setter is not walked
# for them (tests/unit/cli/test_reach.py holds every read of them to its default).
OPTIONAL_FACTS = {
    # cx7_network's: the network facts are as the fabric left them. Without it, a role
    # gathers them again itself.
    "__llmfleet_network_facts_current": "default(false)",
}
SETUP_MODULES = frozenset({"ansible.builtin.setup", "setup", "ansible.builtin.gather_facts"})


class _Loader(yaml.SafeLoader):
    """YAML as Ansible writes it: its own tags (!unsafe, !vault) read as plain values."""


def _any_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return loader.construct_mapping(node)  # type: ignore[arg-type]


_Loader.add_multi_constructor("!", _any_tag)


def _parse(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - safe, plus Ansible's tags


def _load(path: Path) -> Any:
    return _parse(path.read_text(encoding="utf-8"))


def words(value: Any) -> set[str]:
    """Every word of ``value`` (the keys and values of YAML data, at any depth)."""
    found: set[str] = set()
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            pending += list(item.keys()) + list(item.values())
        elif isinstance(item, list | tuple):
            pending += list(item)
        elif item is not None:
            found.update(WORD.findall(str(item)))
    return found


@dataclass
class Unit:
    """What runs together under the same tags: a role, a play's task or a play's role entry."""

    name: str
    tags: frozenset[str]
    reads: set[str]
    includes: set[str] = field(default_factory=set)
    computed_names: bool = False
    # The role's name, for a role's own unit (run by the units that include it).
    role: str = ""
    # Each task's own words and what it sets: what a reached name reaches in turn.
    steps: list[tuple[set[str], set[str]]] = field(default_factory=list)

    @property
    def sets(self) -> set[str]:
        """What any of its tasks leaves for later tasks."""
        return set().union(*(sets for _, sets in self.steps))


def _task_list(value: Any) -> list[dict[str, Any]]:
    return [task for task in value or [] if isinstance(task, dict)]


def _flat(tasks: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for task in tasks:
        yield task
        for key in BLOCK_KEYS:
            yield from _flat(_task_list(task.get(key)))


def _own_sets(task: dict[str, Any]) -> set[str]:
    """The names one task (not its block's) leaves for later tasks."""
    names: set[str] = set()
    if isinstance(task.get("register"), str):
        names.add(task["register"])
    for module in ("ansible.builtin.set_fact", "set_fact"):
        if isinstance(task.get(module), dict):
            names |= {key for key in task[module] if key != "cacheable"}
    if SETUP_MODULES & set(task):
        names.add(FACTS)
    return names


def _steps(tasks: Iterable[dict[str, Any]]) -> list[tuple[set[str], set[str]]]:
    """Each task's words (a block's own keywords read by all of its tasks) and what it sets."""
    steps: list[tuple[set[str], set[str]]] = []
    for task in tasks:
        own = {key: value for key, value in task.items() if key not in BLOCK_KEYS}
        inner = _steps([each for key in BLOCK_KEYS for each in _task_list(task.get(key))])
        if inner:
            steps += [(reads | words(own), sets) for reads, sets in inner]
        steps.append((words(own), _own_sets(own)))
    return steps


INCLUDE_TASKS = ("ansible.builtin.include_tasks", "ansible.builtin.import_tasks")
INCLUDE_ROLE = ("ansible.builtin.include_role", "ansible.builtin.import_role")


def _included_files(task: dict[str, Any], folder: Path, roles: Path) -> list[tuple[Path, Path]]:
    """The task files a task (its blocks included) includes by a literal name, each with the
    folder its own includes are relative to."""
    found: list[tuple[Path, Path]] = []
    for each in _flat([task]):
        for module in INCLUDE_TASKS:
            target = each.get(module)
            target = target.get("file") if isinstance(target, dict) else target
            if isinstance(target, str) and "{" not in target:
                found.append((folder / target, folder))
        for module in INCLUDE_ROLE:
            spec = each.get(module)
            if isinstance(spec, dict) and spec.get("tasks_from"):
                tasks = roles / str(spec.get("name", "")).rpartition(".")[2] / "tasks"
                name = str(spec["tasks_from"])
                found.append((tasks / (name if name.endswith(".yml") else name + ".yml"), tasks))
    return found


Step = tuple[set[str], set[str]]
BLOCK_KEYS = ("block", "rescue", "always")


def file_steps(
    path: Path, folder: Path, roles: Path, seen: set[Path] | None = None
) -> tuple[set[str], list[Step]]:
    """The words and the steps of a task file and of the files it includes."""
    seen = set() if seen is None else seen
    if path in seen or not path.is_file():
        return set(), []
    seen.add(path)
    text = path.read_text(encoding="utf-8")
    tasks = _task_list(_parse(text))
    found = set(WORD.findall(text))
    steps = _steps(tasks)
    for task in tasks:
        for included, base in _included_files(task, folder, roles):
            more, more_steps = file_steps(included, base, roles, seen)
            found |= more
            steps += more_steps
    return found, steps


def _tags(task: dict[str, Any]) -> frozenset[str]:
    tags = task.get("tags") or []
    return frozenset([tags] if isinstance(tags, str) else map(str, tags))


class Collection:
    """The collection's roles, playbooks and filters, read once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.definitions: dict[str, set[str]] = {}
        self.filters = self._filters()
        self.roles: dict[str, Unit] = {}
        self.units: list[Unit] = []
        for folder in sorted((root / "roles").iterdir()):
            if folder.is_dir():
                self._read_role(folder)
        self._read_playbook(root / "site.yml", set())

    def all_units(self) -> list[Unit]:
        return self.units + list(self.roles.values())

    def _filters(self) -> dict[str, set[str]]:
        """Each filter's name: the words it reads (FilterSource)."""
        sources: dict[str, set[str]] = {}
        modules: Modules = {}
        for path in sorted((self.root / "plugins" / "filter").glob("*.py")):
            sources |= FilterSource(self.root, path, modules).reads()
        return sources

    def _define(self, values: Any) -> None:
        for name, value in (values or {}).items() if isinstance(values, dict) else ():
            reads = self._with_filters(words(value), COLLECTION_CALL.findall(str(value)))
            self.definitions.setdefault(str(name), set()).update(reads)

    def _with_filters(self, reads: set[str], text_calls: Iterable[str]) -> set[str]:
        for name in text_calls:
            reads |= self.filters.get(name, set())
        return reads

    def _read_role(self, folder: Path) -> None:
        reads: set[str] = set()
        steps: list[tuple[set[str], set[str]]] = []
        calls: set[str] = set()
        includes: set[str] = set()
        computed = False
        for sub in ROLE_DEFINITION_FOLDERS:
            for path in sorted((folder / sub).glob("*.yml")):
                self._define(_load(path))
        for sub in ROLE_TASK_FOLDERS:
            for path in sorted((folder / sub).rglob("*")):
                if not path.is_file():
                    continue
                text = path.read_text(encoding="utf-8", errors="replace")
                reads |= set(WORD.findall(text))
                computed |= bool(COMPUTED_NAMES.search(text))
                calls |= set(COLLECTION_CALL.findall(text))
                includes |= set(INCLUDED_ROLE.findall(text))
                if sub != "templates" and path.suffix == ".yml":
                    steps += _steps(_task_list(_parse(text)))
        includes.discard(folder.name)
        unit = Unit(
            name=f"role {folder.name}",
            tags=frozenset({folder.name}),
            reads=self._with_filters(reads, calls),
            includes=includes,
            computed_names=computed,
            steps=steps,
            role=folder.name,
        )
        self.roles[folder.name] = unit

    def _read_playbook(self, path: Path, seen: set[Path]) -> None:
        if path in seen:
            return
        seen.add(path)
        for play in _load(path) or []:
            target = play.get("ansible.builtin.import_playbook") or play.get("import_playbook")
            if target:
                self._read_playbook((path.parent / str(target)).resolve(), seen)
                continue
            self._read_play(path, play)

    def _read_play(self, path: Path, play: dict[str, Any]) -> None:
        label = f"{path.relative_to(self.root.resolve())}: {play.get('name', '')}"
        play_tags = _tags(play)
        self._define(play.get("vars"))
        for name in play.get("vars_files") or []:
            self._define(_load(path.parent / str(name)))
        for listed in play.get("roles") or []:
            entry = {"role": listed} if isinstance(listed, str) else listed
            role = str(entry.get("role") or entry.get("name")).rpartition(".")[2]
            if not (self.root / "roles" / role / "tasks" / "main.yml").is_file():
                continue  # a role of defaults and task files (_common): nothing runs
            text = yaml.safe_dump(entry)
            self.units.append(
                Unit(
                    name=f"{label}: role {role}",
                    tags=play_tags | _tags(entry) | {role},
                    reads=self._with_filters(
                        words({k: v for k, v in entry.items() if k not in ("role", "name")}),
                        COLLECTION_CALL.findall(text),
                    ),
                    includes={role},
                    computed_names=bool(COMPUTED_NAMES.search(text)),
                )
            )
        for section in ("pre_tasks", "tasks", "post_tasks", "handlers"):
            for task in _task_list(play.get(section)):
                text = yaml.safe_dump(task)
                reads, steps = words(task), _steps([task])
                for included, base in _included_files(task, path.parent, self.root / "roles"):
                    more, more_steps = file_steps(included, base, self.root / "roles")
                    reads |= more
                    steps += more_steps
                    text += " ".join(sorted(more))
                self.units.append(
                    Unit(
                        name=f"{label}: {task.get('name', section)}",
                        tags=play_tags | _tags(task),
                        reads=self._with_filters(reads, COLLECTION_CALL.findall(text)),
                        steps=steps,
                        includes=set(INCLUDED_ROLE.findall(text)),
                        computed_names=bool(COMPUTED_NAMES.search(text)),
                    )
                )


def reached_names(collection: Collection, changed: set[str]) -> set[str]:
    """``changed``, every definition that names one of them and what every task that names
    one of them sets, to a fixed point."""
    reached = set(changed)
    steps = [(reads, {name}) for name, reads in collection.definitions.items()]
    steps += [step for unit in collection.all_units() for step in unit.steps]
    grew = True
    while grew:
        grew = False
        for reads, sets in steps:
            if reads & reached and not sets <= reached:
                reached |= sets
                grew = True
    return reached


def reached_units(collection: Collection, changed: set[str]) -> list[Unit]:
    """The units a change of the variables ``changed`` reaches, with those they need."""
    names = reached_names(collection, changed)
    reached = [unit for unit in collection.all_units() if unit.reads & names or unit.computed_names]
    # What runs whatever the tags sets its names for every reader.
    always = set().union(*(unit.sets for unit in collection.all_units() if "always" in unit.tags))
    grew = True
    while grew:
        grew = False
        included = {unit.role for unit in reached if unit.role}
        for unit in collection.all_units():
            if unit in reached:
                continue
            if unit.includes & included or any(_needs(reader, unit, always) for reader in reached):
                reached.append(unit)
                grew = True
    return reached


def _needs(reader: Unit, setter: Unit, always: set[str]) -> bool:
    """Whether ``reader`` reads a name only ``setter`` sets for it: not a gathered fact (the
    checks, tagged always, gather every subset a role gathers again), nor a name the checks
    set, nor one of OPTIONAL_FACTS, nor a name of a role the reader runs itself."""
    if setter.role and setter.role in reader.includes:
        return False
    return bool(setter.sets & reader.reads - always - {FACTS} - set(OPTIONAL_FACTS))


def walk_tags(root: Path, changed: Iterable[str]) -> list[str] | None:
    """The tags of ``site.yml`` that walk every task a change of the variables ``changed``
    reaches (sorted), or None when the whole run must be walked."""
    changed = set(changed)
    if any(name.startswith(WHOLE_RUN_PREFIXES) or name in WHOLE_RUN_NAMES for name in changed):
        return None
    tags: set[str] = set()
    for unit in reached_units(Collection(root), changed):
        if unit.role:
            continue  # walked by the units that run it
        if not unit.tags - {"always"}:
            if "always" in unit.tags:
                continue
            return None
        tags |= unit.tags - {"always"}
    return sorted(tags)
