"""The chaos run's figures from the event log and the requests it sent: lost, decided twice, nodes over-full, and
the longest time nothing was answered. Pure: no I/O, so a synthetic log tests it.

The log is folded here on its own terms, independently of the core: capacity per node (a physical node's
registered resources, a virtual node's grant), what the effective placements take from it, and the epoch fence
(a scheduler event of an epoch older than the newest election does not count, as in every view). Placement-group
bundles are not modelled (the chaos load makes none).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from schemas import (
    ActorFailed,
    ActorPending,
    ActorPlaced,
    ActorRemoved,
    ActorSubmitted,
    AnyEvent,
    NodeDied,
    NodeRegistered,
    SchedulerElected,
    TaintsChanged,
    VirtualClusterDestroyed,
    VirtualClusterDestroyRequested,
    VirtualClusterRequested,
    VirtualNodeResized,
    VirtualNodesReserved,
)
from schemas.events import VirtualNodeSize
from services.core.state.view import SCHEDULER_EVENTS

Kind = Literal["submit", "remove", "register", "remove_node", "taint", "untaint", "vc_create", "vc_destroy"]
SLACK = 1e-6
"""Rounding allowed before a node counts as over-full."""


@dataclass
class Request:
    """One request of the load (sent again with the same id while it is not answered)."""

    kind: Kind
    key: str
    """The id its decision names: the actor, the node, the virtual cluster, or `node/taint key`."""
    sent_at: float
    attempts: int = 1
    answered_at: float | None = None
    rejected: bool = False
    """Answered with a refusal (nothing to find in the log: a refused command writes nothing)."""
    reason: str = ""
    """Why it was refused."""


@dataclass(frozen=True)
class Overfull:
    """A node whose allocations passed its capacity at some point of the log."""

    node_id: str
    resource: str
    used: float
    capacity: float
    event_index: int


@dataclass
class LogFold:
    """What the log says happened, folded event by event."""

    decided: set[str] = field(default_factory=set)
    """Actors with an effective decision (placed or pending)."""
    live: set[str] = field(default_factory=set)
    """Actors submitted and not gone (removed, failed for good, or stopped with their virtual cluster)."""
    registered: set[str] = field(default_factory=set)
    died: set[str] = field(default_factory=set)
    taints: dict[str, set[str]] = field(default_factory=dict)
    """Live node -> the keys of its taints now."""
    tainted: set[str] = field(default_factory=set)
    """`node/key` for every taint that appeared on a node."""
    vc_requested: set[str] = field(default_factory=set)
    vc_destroy_requested: set[str] = field(default_factory=set)
    doubled: list[str] = field(default_factory=list)
    """Actors placed while already placed (no removal, failure or node death between)."""
    overfull: list[Overfull] = field(default_factory=list)
    fenced: int = 0
    """Scheduler events skipped for an older epoch."""


class _Capacity:
    """Nodes (physical and virtual), their capacity, and what effective placements and carvings take from them."""

    def __init__(self) -> None:
        self.capacity: dict[str, dict[str, float]] = {}
        self.used: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.parent: dict[str, str] = {}
        """Virtual node -> the node it is carved from."""
        self.cluster_of: dict[str, str] = {}
        """Virtual node -> its virtual cluster."""
        self.demand: dict[str, dict[str, float]] = {}
        """Actor -> its resources (from its request)."""
        self.location: dict[str, str] = {}
        """Actor -> the node it is placed on, while placed."""

    def take(self, node_id: str, amount: dict[str, float], sign: float = 1.0) -> None:
        used = self.used[node_id]
        for name, quantity in amount.items():
            used[name] += sign * quantity

    def place(self, actor_id: str, node_id: str) -> bool:
        """Place an actor; False when it was placed already."""
        again = actor_id in self.location
        self.free(actor_id)
        self.location[actor_id] = node_id
        self.take(node_id, self.demand.get(actor_id, {}))
        return not again

    def free(self, actor_id: str) -> None:
        node_id = self.location.pop(actor_id, None)
        if node_id is not None:
            self.take(node_id, self.demand.get(actor_id, {}), -1.0)

    def add_node(self, node_id: str, resources: dict[str, float]) -> None:
        self.capacity[node_id] = dict(resources)

    def drop_node(self, node_id: str) -> None:
        """A node is gone: its actors are freed, the virtual nodes carved from it too, and its carving returned."""
        for actor_id in [actor for actor, node in self.location.items() if node == node_id]:
            self.free(actor_id)
        for child in [vnode for vnode, parent in self.parent.items() if parent == node_id]:
            self.drop_node(child)
        if node_id in self.parent:
            self.resize(node_id, {})
        self.capacity.pop(node_id, None)
        self.used.pop(node_id, None)

    def resize(self, vnode_id: str, resources: dict[str, float], parent: str = "", vc_id: str = "") -> None:
        """Carve, grow, shrink or (with nothing) release a virtual node against its parent."""
        parent = self.parent.get(vnode_id, parent)
        if vnode_id in self.capacity and parent:
            self.take(parent, self.capacity[vnode_id], -1.0)
        wanted = {name: quantity for name, quantity in resources.items() if quantity > 0}
        if not wanted:
            if vnode_id in self.capacity:
                self.parent.pop(vnode_id, None)
                self.drop_node(vnode_id)
            return
        self.capacity[vnode_id] = wanted
        self.parent[vnode_id], self.cluster_of[vnode_id] = parent, vc_id or self.cluster_of.get(vnode_id, "")
        self.take(parent, wanted)

    def overfull(self, index: int) -> list[Overfull]:
        found = []
        for node_id, used in self.used.items():
            capacity = self.capacity.get(node_id)
            if capacity is None:
                continue
            for name, quantity in used.items():
                if quantity > capacity.get(name, 0.0) + SLACK:
                    found.append(Overfull(node_id, name, quantity, capacity.get(name, 0.0), index))
        return found


def fold_log(events: Iterable[AnyEvent]) -> LogFold:
    """Fold the log: effective decisions, doubled placements and over-full nodes."""
    fold, nodes, epoch = LogFold(), _Capacity(), 0
    reported: set[tuple[str, str]] = set()
    for index, event in enumerate(events):
        if isinstance(event, SCHEDULER_EVENTS) and event.epoch < epoch:
            fold.fenced += 1
            continue
        if isinstance(event, SchedulerElected):
            epoch = max(epoch, event.epoch)
        _apply(fold, nodes, event)
        for found in nodes.overfull(index):
            if (found.node_id, found.resource) not in reported:
                reported.add((found.node_id, found.resource))
                fold.overfull.append(found)
    return fold


def _resized(nodes: _Capacity, sizes: Sequence[VirtualNodeSize]) -> None:
    for size in sizes:
        nodes.resize(size.vnode_id, size.resources, size.parent_node, size.vc_id)


def _apply(fold: LogFold, nodes: _Capacity, event: AnyEvent) -> None:  # noqa: PLR0912 (one branch per event type)
    if isinstance(event, NodeRegistered):
        fold.registered.add(event.node_id)
        if event.node_id not in nodes.capacity:
            nodes.add_node(event.node_id, event.resources)
            fold.taints[event.node_id] = {taint.key for taint in event.taints}
    elif isinstance(event, NodeDied):
        fold.died.add(event.node_id)
        fold.taints.pop(event.node_id, None)
        nodes.drop_node(event.node_id)
    elif isinstance(event, TaintsChanged):
        before, after = fold.taints.get(event.node_id, set()), {taint.key for taint in event.taints}
        fold.tainted.update(f"{event.node_id}/{key}" for key in after - before)
        fold.taints[event.node_id] = after
    elif isinstance(event, ActorSubmitted):
        nodes.demand[event.request.actor_id] = dict(event.request.resources)
        fold.live.add(event.request.actor_id)
    elif isinstance(event, ActorPlaced):
        _resized(nodes, event.resized)
        if event.request is not None:
            nodes.demand[event.actor_id] = dict(event.request.resources)
            fold.live.add(event.actor_id)
        fold.decided.add(event.actor_id)
        if not event.placement_group_id and not nodes.place(event.actor_id, event.node_id):
            fold.doubled.append(event.actor_id)
    elif isinstance(event, ActorPending):
        fold.decided.add(event.actor_id)
    elif isinstance(event, ActorFailed):
        nodes.free(event.actor_id)
        if not event.will_restart:
            fold.live.discard(event.actor_id)
    elif isinstance(event, ActorRemoved):
        fold.live.discard(event.actor_id)
        nodes.free(event.actor_id)
        _resized(nodes, event.resized)
    elif isinstance(event, VirtualNodesReserved):
        for grant in event.vnodes:
            nodes.resize(grant.vnode_id, grant.resources, grant.parent_node, event.vc_id)
    elif isinstance(event, VirtualNodeResized):
        nodes.resize(event.vnode_id, event.resources, event.parent_node, event.vc_id)
    elif isinstance(event, VirtualClusterDestroyed):
        fold.live.difference_update(event.stopped)
        for vnode_id in [vnode for vnode, vc_id in nodes.cluster_of.items() if vc_id == event.vc_id]:
            nodes.resize(vnode_id, {})
            nodes.cluster_of.pop(vnode_id, None)
    elif isinstance(event, VirtualClusterRequested):
        fold.vc_requested.add(event.vc_id)
    elif isinstance(event, VirtualClusterDestroyRequested):
        fold.vc_destroy_requested.add(event.vc_id)


def in_log(request: Request, fold: LogFold) -> bool:
    """Whether the log holds the decision `request` asked for. A removal holds when the end of the log agrees: the
    actor is gone (removed, failed for good, stopped with its cluster), or the taint is not on the node (which may
    have died, or died and registered again without it)."""
    if request.kind == "remove":
        return request.key not in fold.live
    if request.kind == "untaint":
        node_id, key = request.key.split("/", 1)
        return key not in fold.taints.get(node_id, set())
    found = {
        "submit": fold.decided,
        "register": fold.registered,
        "remove_node": fold.died,
        "taint": fold.tainted,
        "vc_create": fold.vc_requested,
        "vc_destroy": fold.vc_destroy_requested,
    }[request.kind]
    return request.key in found


def lost(requests: Iterable[Request], fold: LogFold) -> list[Request]:
    """Requests sent and not refused whose decision the log does not hold."""
    return [request for request in requests if not request.rejected and not in_log(request, fold)]


def longest_gap(answers: Iterable[float], start: float, end: float) -> tuple[float, float]:
    """The longest stretch of [start, end] with no answer in it: (seconds, when it began)."""
    times = sorted(moment for moment in answers if start <= moment <= end)
    best, began, previous = 0.0, start, start
    for moment in [*times, end]:
        if moment - previous > best:
            best, began = moment - previous, previous
        previous = moment
    return best, began
