"""What each filter of a filter plugin reads: the words of its function and of what that names.

``llmfleet.reach`` uses it to tell which variables a filter call reaches (a filter reads the
inventory through ``hostvars``, by the names its source spells).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# The collection's plugins as a filter imports them, and an import from them in any module.
PLUGINS = "ansible_collections.llmfleet.cluster.plugins."
IMPORT_FROM = re.compile(r"llmfleet\.cluster\.plugins\.([\w.]+) import \(?([\w\s,]+)\)?")
# A module of the collection, read: its words, and (module, names) of each import from the
# collection.
Modules = dict[Path, tuple[set[str], list[tuple[str, str]]]]


class FilterSource:
    """A filter plugin's source: what each filter it registers reads is the words of its
    function and of every function, class and constant of the plugin that names, to a fixed
    point, and the whole of each module of the collection it names that the plugin imports
    (with what those import). A filter the plugin registers otherwise reads the whole
    plugin.

    ``modules``: each module of the collection already read, to its words and its imports
    from the collection; the plugins of one collection share it, so each is read once."""

    def __init__(self, root: Path, path: Path, modules: Modules | None = None) -> None:
        self.root = root
        self.modules: Modules = {} if modules is None else modules
        self.text = path.read_text(encoding="utf-8")
        self.tree = ast.parse(self.text)
        self.symbols: dict[str, set[str]] = {}
        for node in self.tree.body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                self.symbols[node.name] = self._words(node)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        self.symbols[target.id] = self._words(node)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PLUGINS):
                for alias in node.names:
                    module = f"{node.module}.{alias.name}"
                    self.symbols[alias.asname or alias.name] = self._module_words(module, set())

    def _words(self, node: ast.AST) -> set[str]:
        return set(WORD.findall(ast.get_source_segment(self.text, node) or ""))

    def _module_words(self, dotted: str, seen: set[Path]) -> set[str]:
        """The words of the collection's module ``dotted`` (or of the package holding a name
        imported from it), with those of what it imports from the collection."""
        parts = dotted[len(PLUGINS) :].split(".")
        base = self.root / "plugins"
        for candidate in (
            base.joinpath(*parts).with_suffix(".py"),
            base.joinpath(*parts, "__init__.py"),
            base.joinpath(*parts[:-1]).with_suffix(".py"),
            base.joinpath(*parts[:-1], "__init__.py"),
        ):
            if candidate.is_file() and candidate not in seen:
                seen.add(candidate)
                if candidate not in self.modules:
                    text = candidate.read_text(encoding="utf-8")
                    self.modules[candidate] = (set(WORD.findall(text)), IMPORT_FROM.findall(text))
                module_words, imports = self.modules[candidate]
                found = set(module_words)
                for module, names in imports:
                    for name in WORD.findall(names):
                        found |= self._module_words(f"{PLUGINS}{module}.{name}", seen)
                return found
        return set()

    def _registered(self) -> dict[str, str | None]:
        """Each filter name FilterModule.filters returns, to its function's name (None when
        it is not a function of the plugin)."""
        plugin = [
            n for n in self.tree.body if isinstance(n, ast.ClassDef) and n.name == "FilterModule"
        ]
        for node in ast.walk(plugin[0]) if plugin else ():
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Dict):
                pairs = zip(node.value.keys, node.value.values, strict=True)
                return {
                    key.value: value.id if isinstance(value, ast.Name) else None
                    for key, value in pairs
                    if isinstance(key, ast.Constant) and isinstance(key.value, str)
                }
        return {}

    def reads(self) -> dict[str, set[str]]:
        """Each filter the plugin registers, to the words it reads."""
        found: dict[str, set[str]] = {}
        whole = set(WORD.findall(self.text))
        for name, function in self._registered().items():
            if function not in self.symbols:
                found[name] = whole
                continue
            reads: set[str] = set()
            pending, seen = [function], set()
            while pending:
                symbol = pending.pop()
                if symbol in seen or symbol not in self.symbols:
                    continue
                seen.add(symbol)
                reads |= self.symbols[symbol]
                pending += sorted(self.symbols[symbol] & self.symbols.keys())
            found[name] = reads
        return found
