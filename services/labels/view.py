"""The labels view: the folded cluster plus the liveness clocks of its nodes (kept in memory only)."""

from __future__ import annotations

from collections.abc import Callable

from schemas import AnyEvent, NodeDeclaredDead, NodeDied, NodeReachable, NodeRegistered, NodeUnreachable
from schemas.queries import ActorsQuery, ActorsReply, NodesQuery, NodesReply
from services.core import LabelSelector
from services.core.liveness import Silence
from services.core.type_tests import TypeTest
from services.runtime.views import FoldedView, actor_info, node_info

_CLOCKED = TypeTest[NodeRegistered | NodeDied | NodeUnreachable | NodeReachable | NodeDeclaredDead](
    NodeRegistered, NodeDied, NodeUnreachable, NodeReachable, NodeDeclaredDead
)
"""The events that start or stop a node's liveness clocks."""


class LabelsView(FoldedView):
    """Nodes, their labels and actors (folded from the log) and, per node, when it was last heard from, became
    unreachable and was declared dead (on this service's clock: only silences it could have heard count)."""

    def __init__(
        self, clock: Callable[[], float], seed: int = 0, wall_clock: Callable[[], float] = lambda: 0.0
    ) -> None:
        super().__init__(seed)
        self.clock, self.wall_clock = clock, wall_clock
        self.last_seen: dict[str, float] = {}
        self.silent_from: dict[str, float] = {}
        """Unreachable nodes -> when this service saw them become so (or last could not hear them)."""
        self.dead_from: dict[str, float] = {}
        """Nodes declared dead -> this clock's time at which their `dead_for` was 0."""

    def fold(self, event: AnyEvent, sequence: int, time_ns: int = 0) -> None:
        """Fold one event and start or stop the node's liveness clocks."""
        super().fold(event, sequence, time_ns)
        if not _CLOCKED.holds(event):  # most events are the work's: no clock read, no five failed isinstance
            return
        now = self.clock()
        if isinstance(event, NodeRegistered) and event.node_id not in self.last_seen:
            self.last_seen[event.node_id] = now
        elif isinstance(event, NodeDied):
            for clocks in (self.last_seen, self.silent_from, self.dead_from):
                clocks.pop(event.node_id, None)
        elif isinstance(event, NodeUnreachable):
            self.silent_from[event.node_id] = now
        elif isinstance(event, NodeReachable):
            self.silent_from.pop(event.node_id, None)
            self.dead_from.pop(event.node_id, None)
        elif isinstance(event, NodeDeclaredDead):
            self.dead_from.setdefault(event.node_id, now - event.dead_for)

    def load(self, blob: bytes, sequence: int) -> None:
        """Replace the view from snapshot bytes; every node's clocks start again now."""
        super().load(blob, sequence)
        self.last_seen.clear()
        self.grace_all()

    def grace_all(self) -> None:
        """Nobody could be heard for a while (a bus outage, a stall): a silence so far does not count. A reachable
        node gets a fresh heartbeat timeout, an unreachable one a fresh grace; a dead one's count pauses."""
        now = self.clock()
        for node_id, node in self.cluster.nodes.items():
            if node.unreachable_since is None:
                self.last_seen[node_id] = now
            elif node.dead_for is None:
                self.silent_from[node_id] = now
            else:
                self.dead_from[node_id] = now - node.dead_for

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

    def silence(self, node_id: str) -> Silence:
        """The node's silences as of now."""
        now = self.clock()
        seen = self.last_seen.get(node_id, now)
        silent_from = self.silent_from.get(node_id, now)
        return Silence(
            silent_for=now - seen,
            last_heard=self.wall_clock() - (now - seen),
            heard_again=node_id in self.silent_from and node_id in self.last_seen and seen > silent_from,
            unreachable_for=now - silent_from,
            dead_for=now - self.dead_from.get(node_id, now),
        )

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
