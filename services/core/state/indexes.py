"""Indexes over the view: node labels -> nodes, and actor labels -> topology domains (pure)."""

from __future__ import annotations

from services.core.ring import HashRing
from services.core.state.model import NodeState

EntryKey = tuple[str, str, str | None]
"""(namespace, label key, label value); value None aggregates every value of the key."""


class LabelIndex:
    """Node label key -> value -> the nodes carrying it, in hash order for fair sampling."""

    __slots__ = ("by_key",)

    def __init__(self) -> None:
        self.by_key: dict[str, dict[str, HashRing]] = {}

    def add(self, node: NodeState) -> None:
        """Index every label of `node`."""
        for key, value in node.labels.items():
            self.by_key.setdefault(key, {}).setdefault(value, HashRing()).add(node.hash_key, node.node_id)

    def remove(self, node: NodeState) -> None:
        """Drop every label of `node` from the index."""
        for key, value in node.labels.items():
            values = self.by_key.get(key)
            if values is None or value not in values:
                continue
            ring = values[value]
            ring.remove(node.hash_key, node.node_id)
            if not len(ring):
                del values[value]
            if not values:
                del self.by_key[key]

    def adding(self, nodes: list[NodeState]) -> LabelIndex:
        """A copy of this index with `nodes` indexed too; this index stays as it is (only what changes is copied)."""
        index = LabelIndex()
        index.by_key = dict(self.by_key)
        copied: set[tuple[str, str | None]] = set()
        for node in nodes:
            for key, value in node.labels.items():
                if (key, None) not in copied:
                    index.by_key[key] = dict(self.by_key.get(key, {}))
                    copied.add((key, None))
                values = index.by_key[key]
                if (key, value) not in copied:
                    ring = values.get(value)
                    values[value] = ring.copy() if ring is not None else HashRing()
                    copied.add((key, value))
                values[value].add(node.hash_key, node.node_id)
        return index

    def nodes(self, key: str, value: str) -> HashRing | None:
        """The nodes whose label `key` equals `value`."""
        values = self.by_key.get(key)
        return None if values is None else values.get(value)


class DomainIndex:
    """(namespace, key, value) -> topology key -> domain value -> how many actors count there."""

    __slots__ = ("counts",)

    def __init__(self) -> None:
        self.counts: dict[EntryKey, dict[str, dict[str, int]]] = {}

    def bump(self, entry: EntryKey, topology: str, domain: str, delta: int) -> None:
        """Add `delta` actors to `domain`; entries that reach zero disappear."""
        by_topology = self.counts.get(entry)  # not setdefault(entry, {}): that builds a dict at every call
        if by_topology is None:
            by_topology = self.counts[entry] = {}
        domains = by_topology.get(topology)
        if domains is None:
            domains = by_topology[topology] = {}
        count = domains.get(domain, 0) + delta
        if count > 0:
            domains[domain] = count
            return
        domains.pop(domain, None)
        if not domains:
            del by_topology[topology]
            if not by_topology:
                del self.counts[entry]

    def domains(self, entry: EntryKey, topology: str) -> dict[str, int]:
        """The domains (with counts) where actors of `entry` are, under `topology`."""
        by_topology = self.counts.get(entry)
        if by_topology is None:
            return {}
        return by_topology.get(topology, {})
