"""The variables the collection declares, and ``-e`` values given the type they are declared with.

A role's ``meta/argument_specs.yml`` declares its variables (the options of every entry point);
the internal role ``_common``'s declares the collection-wide ``llmfleet_*`` variables that the
roles' defaults, the playbooks, the filters and the CLI read, with their defaults.

``ansible-playbook -e KEY=VALUE`` passes VALUE as a string, and a check that wants a number
(``serving.gpu_memory_utilization is '0.70'; expected a number``) refuses it. :meth:`typed`
converts it to the declared ``int``, ``float`` or ``bool`` with ansible's own conversions (those
of a module's argument spec, ``yes``/``no``/``on``/``off``/``1``/``0`` ... for a bool), to a
``list`` from ``a,b`` or ``[a, b]`` (each element to the declared ``elements`` type) and to a
``dict`` from ``k=v k2=v2`` or ``{k: v}``; any other type, and a name nothing declares, keeps
the string.

A name with the collection's prefix (``llmfleet_``) or a role's (``vllm_server_``) that nothing
declares is most likely a typo: :meth:`undeclared` names it with the closest declared name.
Internal names (``__vllm_server_*``) are never reported.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from ansible.module_utils.common.validation import (  # type: ignore[import-untyped]
    check_type_bool,
    check_type_dict,
    check_type_float,
    check_type_int,
)

# The internal role that declares the collection-wide variables (and holds their defaults).
COMMON_SPEC = Path("roles", "_common", "meta", "argument_specs.yml")
# Its entry point: not `main`, which Ansible would check at every play that loads the role,
# templating each collection-wide variable, those a command never reads too (a vaulted key
# that `llmfleet plan` has no password for).
COMMON_ENTRY_POINT = "variables"
COLLECTION_PREFIX = "llmfleet_"
INTERNAL_PREFIX = "__"
# The declared types a string from `-e KEY=VALUE` is converted to (the others stay strings:
# str, path and raw are strings already).
_WHOLE_NUMBER = re.compile(r"\s*[+-]?\d+\s*")


def _number(value: Any) -> Any:
    """A float as Ansible's argument spec converts it, but a whole number stays an int, as
    YAML reads it: a message that shows the value shows what was typed (250, not 250.0), and
    every check of a float takes an int."""
    if isinstance(value, str) and _WHOLE_NUMBER.fullmatch(value):
        return int(value)
    return check_type_float(value)


def _flow(value: str, kind: type) -> Any:
    """``[a, b]`` or ``{k: v}`` as YAML reads it (JSON is YAML); TypeError when it is not one
    ``kind``."""
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError:
        raise TypeError(value) from None
    if not isinstance(parsed, kind):
        raise TypeError(value)
    return parsed


def _list(value: str) -> list[Any]:
    """``a,b`` (ansible's argument spec splits on commas; the blanks around an item go) or a
    YAML/JSON list; nothing at all is the empty list."""
    text = value.strip()
    if text.startswith("["):
        return list(_flow(text, list))
    return [item.strip() for item in text.split(",")] if text else []


def _dict(value: str) -> dict[Any, Any]:
    """``k=v k2=v2`` (ansible's argument spec) or a YAML/JSON mapping."""
    text = value.strip()
    return dict(_flow(text, dict)) if text.startswith("{") else dict(check_type_dict(text))


_CONVERSIONS: dict[str, Callable[[Any], Any]] = {
    "int": check_type_int,
    "float": _number,
    "bool": check_type_bool,
    "list": _list,
    "dict": _dict,
}
# What a list's elements may be converted to (a list of lists stays as YAML gave it).
_SCALARS = ("int", "float", "bool")
_EXPECTED = {
    "int": "an int",
    "float": "a float",
    "bool": "a bool (yes/no, true/false, on/off, 1/0)",
    "list": "a list (a,b or [a, b])",
    "dict": "a dict (k=v k2=v2 or {k: v})",
}


@dataclass(frozen=True)
class Declaration:
    """One variable as one file declares it: its type (and a list's elements' type), and the
    file (relative to the root)."""

    name: str
    type: str
    source: str
    elements: str | None = None


@dataclass(frozen=True)
class Undeclared:
    """A name with a declared prefix that nothing declares, and the declared name closest to it."""

    name: str
    closest: str | None

    def message(self) -> str:
        guess = f"did you mean {self.closest}?" if self.closest else "no name is close to it"
        return f"{self.name}: {guess} (no role or collection variable has this name)"


# libyaml's loader where PyYAML has it: the specs are large, and every command reads them.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load_yaml(path: Path) -> Any:
    return yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)  # noqa: S506 - a SafeLoader


def argument_spec_files(root: Path) -> list[Path]:
    """Every role's ``meta/argument_specs.yml``, by role name."""
    return sorted((root / "roles").glob("*/meta/argument_specs.yml"))


def collection_variables(root: Path) -> dict[str, dict[str, Any]]:
    """The collection-wide variables as role ``_common`` declares them (type, default, choices,
    description), by name; none in a collection without it."""
    path = root / COMMON_SPEC
    document = (_load_yaml(path) if path.is_file() else None) or {}
    entry = (document.get("argument_specs") or {}).get(COMMON_ENTRY_POINT) or {}
    return dict(entry.get("options") or {})


def _declaration(name: str, option: dict[str, Any], source: str) -> Declaration:
    elements = option.get("elements")
    return Declaration(
        name, str(option.get("type", "str")), source, None if elements is None else str(elements)
    )


def declarations(root: Path) -> list[Declaration]:
    """Every declaration of the collection: each role's options (every entry point), role
    ``_common``'s being the collection-wide variables. A name may be declared more than once (a
    role's entry points)."""
    found: list[Declaration] = []
    for path in argument_spec_files(root):
        source = path.relative_to(root).as_posix()
        specs = (_load_yaml(path) or {}).get("argument_specs")
        for entry in (specs or {}).values():
            for name, option in (entry.get("options") or {}).items():
                found.append(_declaration(name, option, source))
    return found


class DeclaredVariables:
    """What the collection declares: each name's type, and the prefixes its names carry."""

    def __init__(self, found: Iterable[Declaration], prefixes: Iterable[str]) -> None:
        self._declared: dict[str, Declaration] = {}
        for declaration in found:
            self._declared.setdefault(declaration.name, declaration)
        self.prefixes = tuple(prefixes)

    @classmethod
    def load(cls, root: Path) -> DeclaredVariables:
        """The collection's declarations; its prefixes are ``llmfleet_`` and each role's name
        (``_common``'s variables carry the collection's)."""
        roles = [
            f"{path.parent.parent.name}_"
            for path in argument_spec_files(root)
            if not path.parent.parent.name.startswith("_")
        ]
        return cls(declarations(root), [COLLECTION_PREFIX, *roles])

    def __contains__(self, name: object) -> bool:
        return name in self._declared

    def typed(self, name: str, value: str) -> Any:
        """``value`` (from ``-e name=value``) as the type ``name`` is declared with: an int, a
        float, a bool, a list (its elements of their declared int, float or bool) or a dict;
        the string itself for any other type or an undeclared name.

        Raises ``ValueError`` naming the variable, the value and the type when it does not
        convert."""
        declaration = self._declared.get(name)
        convert = _CONVERSIONS.get(declaration.type) if declaration else None
        if declaration is None or convert is None:
            return value
        expected = _EXPECTED[declaration.type]
        convert_element = None
        if declaration.type == "list" and declaration.elements in _SCALARS:
            convert_element = _CONVERSIONS[declaration.elements]
            expected = f"a list of {declaration.elements}s (a,b or [a, b])"
        try:
            converted = convert(value)
            if convert_element is not None:
                converted = [convert_element(item) for item in converted]
        except (TypeError, ValueError):
            raise ValueError(
                f"{name} is {value!r}; expected {expected} (declared in {declaration.source})"
            ) from None
        return converted

    def undeclared(self, names: Iterable[str]) -> list[Undeclared]:
        """The names with a declared prefix that nothing declares, each with the closest
        declared name (none when nothing is close), in the order given, once each."""
        found: dict[str, Undeclared] = {}
        for name in names:
            if (
                name in found
                or name in self._declared
                or name.startswith(INTERNAL_PREFIX)
                or not name.startswith(self.prefixes)
            ):
                continue
            closest = difflib.get_close_matches(name, self._declared, n=1)
            found[name] = Undeclared(name, closest[0] if closest else None)
        return list(found.values())
