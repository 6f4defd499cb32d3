"""The labels view: the folded cluster plus when each node was last heard from."""

from __future__ import annotations

from collections.abc import Callable

from schemas import AnyEvent, NodeDied, NodeRegistered
from schemas.queries import ActorsQuery, ActorsReply, NodesQuery, NodesReply
from services.core import LabelSelector
from services.runtime.views import FoldedView, actor_info, node_info


class LabelsView(FoldedView):
    """Nodes, their labels and actors (folded from the log) and heartbeat times (kept in memory only)."""

    def __init__(self, clock: Callable[[], float], seed: int = 0) -> None:
        super().__init__(seed)
        self.last_seen: dict[str, float] = {}
        self.clock = clock

    def fold(self, event: AnyEvent, sequence: int, time_ns: int = 0) -> None:
        """Fold one event; a node that appears gets a fresh grace period."""
        super().fold(event, sequence, time_ns)
        if isinstance(event, NodeRegistered):
            self.last_seen[event.node_id] = self.clock()
        elif isinstance(event, NodeDied):
            self.last_seen.pop(event.node_id, None)

    def load(self, blob: bytes, sequence: int) -> None:
        """Replace the view from snapshot bytes; every node gets a fresh grace period."""
        super().load(blob, sequence)
        self.grace_all()

    def grace_all(self) -> None:
        """Every live node gets a fresh grace period (after the service could not hear heartbeats for a while)."""
        self.last_seen = dict.fromkeys(self.cluster.nodes, self.clock())

    def heard_from(self, node_id: str) -> bool:
        """A heartbeat (or a resuming registration) from a node; whether it is a live node of the view."""
        if node_id not in self.cluster.nodes:
            return False
        self.last_seen[node_id] = self.clock()
        return True

    def silent_for(self, node_id: str) -> float | None:
        """Seconds since a live node was last heard from (None for a node not live)."""
        seen = self.last_seen.get(node_id)
        return None if seen is None else self.clock() - seen

    def overdue(self, timeout: float) -> list[str]:
        """Live nodes not heard from for longer than `timeout`."""
        now = self.clock()
        return sorted(n for n in self.cluster.nodes if now - self.last_seen.get(n, now) > timeout)

    def nodes(self, query: NodesQuery) -> NodesReply:
        """Live nodes matching the selector."""
        selector = LabelSelector.parse(query.selector) if query.selector else None
        found = [
            node_info(node)
            for _, node in sorted(self.cluster.nodes.items())
            if selector is None or selector.matches(node.labels)
        ]
        return NodesReply(found)

    def actors(self, query: ActorsQuery) -> ActorsReply:
        """Placed actors of the namespace carrying every label pair asked for (virtual clusters' actors too)."""
        wanted = query.labels.items()
        found = [
            actor_info(actor)
            for actor in sorted(self.cluster.every_actor(), key=lambda actor: actor.request.actor_id)
            if actor.status == "placed"
            and actor.request.namespace == query.namespace
            and wanted <= actor.request.labels.items()
        ]
        return ActorsReply(found)
