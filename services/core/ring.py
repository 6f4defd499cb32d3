"""Node ids kept in a seeded hash order, so sampling does not depend on the order nodes arrived (pure)."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import overload


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

    def copy(self) -> HashRing:
        """A ring holding the same nodes, changed independently of this one."""
        ring = HashRing()
        ring.keys, ring.ids = list(self.keys), list(self.ids)
        return ring

    def __len__(self) -> int:
        return len(self.ids)


class Chain(Sequence[str]):
    """Several id lists read as one, without copying them (a candidate list built from many index entries)."""

    __slots__ = ("offsets", "parts", "size")

    def __init__(self, parts: Sequence[Sequence[str]]) -> None:
        self.parts: list[Sequence[str]] = []
        for part in parts:
            self.parts.extend(part.parts if isinstance(part, Chain) else [part] if part else [])
        self.offsets: list[int] = []
        total = 0
        for part in self.parts:
            self.offsets.append(total)
            total += len(part)
        self.size = total

    def __len__(self) -> int:
        return self.size

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self.size))]
        at = bisect_right(self.offsets, index) - 1
        return self.parts[at][index - self.offsets[at]]
