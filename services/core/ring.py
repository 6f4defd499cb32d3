"""Node ids kept in a seeded hash order, so sampling does not depend on the order nodes arrived (pure)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator


class HashRing:
    """A sorted list of `(hash key, node id)`; walking it from a random start visits nodes in a fair order."""

    __slots__ = ("ids", "keys")

    def __init__(self) -> None:
        self.keys: list[int] = []
        self.ids: list[str] = []

    def add(self, key: int, node_id: str) -> None:
        """Insert a node (no-op when present)."""
        at = bisect_left(self.keys, key)
        while at < len(self.keys) and self.keys[at] == key:
            if self.ids[at] == node_id:
                return
            at += 1
        self.keys.insert(at, key)
        self.ids.insert(at, node_id)

    def remove(self, key: int, node_id: str) -> None:
        """Remove a node (no-op when absent)."""
        at = bisect_left(self.keys, key)
        while at < len(self.keys) and self.keys[at] == key:
            if self.ids[at] == node_id:
                del self.keys[at]
                del self.ids[at]
                return
            at += 1

    def __len__(self) -> int:
        return len(self.ids)

    def walk(self, start: int) -> Iterator[str]:
        """Every node once, starting at position `start` and wrapping around."""
        ids = self.ids
        count = len(ids)
        for step in range(count):
            yield ids[(start + step) % count]
