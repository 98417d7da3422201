"""A small stock keeper: the task Claude Code is timed on edits this file."""

from __future__ import annotations


class Inventory:
    def __init__(self) -> None:
        self.items: dict[str, int] = {}

    def add(self, name: str, count: int) -> None:
        self.items[name] = self.items.get(name, 0) + count

    def remove(self, name: str, count: int) -> None:
        self.items[name] = self.items.get(name, 0) - count

    def total(self) -> int:
        return sum(self.items.values())
