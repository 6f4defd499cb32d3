"""The cluster view and `fold`: apply one event to it; folding a log in order rebuilds it exactly (pure)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from schemas import (
    ActorAffinityOperator,
    ActorAffinitySchedulingStrategy,
    ActorFailed,
    ActorPending,
    ActorPlaced,
    ActorRemoved,
    ActorSubmitted,
    AnyEvent,
    NodeDied,
    NodeLabelsChanged,
    NodeLabelSchedulingStrategy,
    NodeRegistered,
    PlacementGroupBundlesLost,
    PlacementGroupPending,
    PlacementGroupPlaced,
    PlacementGroupRemoved,
    PlacementGroupSubmitted,
    SchedulerElected,
    ScheduleRequest,
    Taint,
    TaintsChanged,
    VirtualClusterDestroyed,
    VirtualClusterDestroyRequested,
    VirtualClusterQueued,
    VirtualClusterRequested,
    VirtualNodeResized,
    VirtualNodesReserved,
)
from services.core.labels import HOSTNAME, NODE_ID, REGION, ZONE
from services.core.prng import stable_hash
from services.core.ring import HashRing
from services.core.state import vfold
from services.core.state.checks import check
from services.core.state.indexes import DomainIndex, LabelIndex
from services.core.state.model import ActorState, GroupState, NodeState, give, take
from services.core.state.vtree import ROOT, VTree

RECORDED_TOPOLOGY = (HOSTNAME, ZONE, REGION)
AntiTerm = tuple[str, tuple[str, ...] | None, str]
SCHEDULER_EVENTS = (
    ActorSubmitted,
    ActorPlaced,
    ActorPending,
    ActorFailed,
    ActorRemoved,
    PlacementGroupSubmitted,
    PlacementGroupPlaced,
    PlacementGroupPending,
    PlacementGroupBundlesLost,
    PlacementGroupRemoved,
    VirtualClusterQueued,
    VirtualNodesReserved,
    VirtualNodeResized,
    VirtualClusterDestroyed,
)
"""Events only the scheduler writes: fenced by the lease epoch."""
WORK_EVENTS = (ActorPlaced, ActorPending, ActorFailed, ActorRemoved)
GROUP_EVENTS = (PlacementGroupPlaced, PlacementGroupPending, PlacementGroupBundlesLost, PlacementGroupRemoved)


RECORDS_KEPT = 100_000
"""DataFlow records of ended actors a view keeps (the newest); live actors' records are always kept."""


def hard_anti_terms(request: ScheduleRequest) -> list[AntiTerm]:
    """The hard NOT_IN / DOES_NOT_EXIST terms of an ANDed actor-affinity strategy: they bind newcomers too."""
    strategy = request.scheduling_strategy
    if not isinstance(strategy, ActorAffinitySchedulingStrategy) or strategy.is_or_semantics:
        return []
    terms: list[AntiTerm] = []
    for expression in strategy.match_expressions:
        if expression.soft:
            continue
        if expression.operator == ActorAffinityOperator.NOT_IN:
            terms.append((expression.key, tuple(expression.values), expression.topology_key))
        elif expression.operator == ActorAffinityOperator.DOES_NOT_EXIST:
            terms.append((expression.key, None, expression.topology_key))
    return terms


class ClusterView:
    """Everything the scheduler knows, indexed for decisions; changed only through `fold`."""

    def __init__(self, seed: int = 0, *, tree: VTree | None = None, scope_id: str = ROOT) -> None:
        self.seed = seed
        self.scope_id = scope_id
        """ROOT for the physical cluster, else the virtual cluster whose nodes this view holds."""
        self.tree = tree if tree is not None else VTree()
        self.carved: dict[str, dict[str, str]] = {}
        """Node id -> {virtual node id: cluster id} for the virtual nodes carved out of it."""
        self.nodes: dict[str, NodeState] = {}
        self.dead: dict[str, NodeState] = {}
        self.ring = HashRing()
        self.labels = LabelIndex()
        self.actors: dict[str, ActorState] = {}
        self.groups: dict[str, GroupState] = {}
        self.actor_index = DomainIndex()
        self.anti_index = DomainIndex()
        self.topologies: set[str] = {NODE_ID, *RECORDED_TOPOLOGY}
        """The topology keys `actor_index` counts by: widened by decisions (`track_topology`), so a cache that
        is neither snapshotted nor digested (a replay widens it again when a decision first needs a key)."""
        self.records: dict[str, dict[str, str]] = {}
        self.ended: OrderedDict[str, None] = OrderedDict()
        """Actors that ended (removed, or failed for good) whose record is still kept, oldest first (an
        OrderedDict: dropping the oldest of a plain dict gets slower with every key dropped before it)."""
        self.records_kept = RECORDS_KEPT
        self.prefer_tainted: set[str] = set()
        self.pending: dict[str, None] = {}
        self.arrivals = 0
        self.version = 0
        self.epoch = 0
        self._handlers: dict[type, Callable[[Any], None]] = {
            NodeRegistered: self._on_node_registered,
            NodeDied: self._on_node_died,
            NodeLabelsChanged: self._on_node_labels_changed,
            TaintsChanged: self._on_taints_changed,
            ActorSubmitted: self._on_actor_submitted,
            ActorPlaced: self._on_actor_placed,
            ActorPending: self._on_actor_pending,
            ActorFailed: self._on_actor_failed,
            ActorRemoved: self._on_actor_removed,
            PlacementGroupSubmitted: self._on_group_submitted,
            PlacementGroupPlaced: self._on_group_placed,
            PlacementGroupPending: self._on_group_pending,
            PlacementGroupBundlesLost: self._on_bundles_lost,
            PlacementGroupRemoved: self._on_group_removed,
            SchedulerElected: self._on_scheduler_elected,
            VirtualClusterRequested: lambda e: vfold.on_requested(self, e),
            VirtualClusterQueued: lambda e: vfold.on_queued(self, e),
            VirtualNodesReserved: lambda e: vfold.on_reserved(self, e),
            VirtualNodeResized: lambda e: vfold.on_resized(self, e),
            VirtualClusterDestroyRequested: lambda e: vfold.on_destroy_requested(self, e),
            VirtualClusterDestroyed: lambda e: vfold.on_destroyed(self, e),
        }

    def fold(self, event: AnyEvent) -> None:
        """Apply one event (a scheduler event of an epoch older than the current lease is skipped).

        Actor and placement-group events go to the scope of the virtual cluster the work runs in. All or nothing:
        an event that cannot be folded whole raises `UnfoldableEventError` and changes nothing (see `checks`).
        """
        if not (isinstance(event, SCHEDULER_EVENTS) and event.epoch < self.epoch):
            check(self, event)
            if isinstance(event, ActorPlaced):
                for size in event.resized:  # the growth that made room comes first
                    vfold.on_resized(self, size)
                if event.request is not None:
                    self._submitted(event.request)  # placed as submitted: the submission next
            if self.tree.clusters and isinstance(event, (*WORK_EVENTS, *GROUP_EVENTS)):
                self._fold_scoped(event)
            else:
                self._handlers[type(event)](event)
            if isinstance(event, ActorRemoved):
                for size in event.resized:  # then the shrink its leaving allowed
                    vfold.on_resized(self, size)
        self.version += 1

    def _fold_scoped(self, event: AnyEvent) -> None:
        tree = self.tree
        work_id = event.actor_id if isinstance(event, WORK_EVENTS) else getattr(event, "pg_id", "")
        scope = self.scope(tree.work_scope.get(work_id, ROOT))
        scope.apply(event)
        if work_id not in scope.actors and work_id not in scope.groups:
            tree.work_scope.pop(work_id, None)

    def apply(self, event: AnyEvent) -> None:
        """Apply one event to this view itself (no fencing, no routing)."""
        self._handlers[type(event)](event)

    def scope(self, vc_id: str | None) -> ClusterView:
        """The view of a virtual cluster's nodes and work (the root view for ROOT or None)."""
        if not vc_id:
            return self
        return self.tree.clusters[vc_id].scope

    def every_actor(self) -> list[ActorState]:
        """Every live actor: the root's, then each virtual cluster's (in arrival order)."""
        found = list(self.actors.values())
        for vc in self.tree.clusters.values():
            found += vc.scope.actors.values()
        return found

    def scope_of(self, work_id: str) -> ClusterView:
        """The view an actor or placement group lives in."""
        return self.scope(self.tree.work_scope.get(work_id, ROOT))

    def node(self, node_id: str) -> NodeState | None:
        """A live node, or the tombstone of a dead one (work folded onto it is released from it)."""
        return self.nodes.get(node_id) or self.dead.get(node_id)

    def _node_of(self, node_id: str) -> NodeState:
        node = self.node(node_id)
        assert node is not None, f"no node {node_id}"
        return node

    def _on_scheduler_elected(self, event: SchedulerElected) -> None:
        self.epoch = max(self.epoch, event.epoch)

    def track_topology(self, topology: str) -> None:
        """Index actor labels by `topology` domains from now on (done once per new topology key)."""
        if topology in self.topologies:
            return
        self.topologies.add(topology)
        for actor in self.actors.values():
            if actor.node_id is not None:
                self._index_labels(actor.request, self._node_of(actor.node_id), 1, (topology,))

    # nodes

    def _on_node_registered(self, event: NodeRegistered) -> None:
        if event.node_id in self.nodes:
            return  # a live node registering again resumes: nothing changes
        self.bury(event.node_id)
        node = NodeState(event.node_id, stable_hash(self.seed, event.node_id), event.resources, event.labels)
        node.address = event.address
        self.set_taints(node, event.taints)
        node.record = self.record_of_node(node)
        self.add_live_node(node)

    @staticmethod
    def record_of_node(node: NodeState) -> dict[str, str]:
        """The topology labels a DataFlow operation placed on `node` passes on."""
        return {key: node.labels[key] for key in RECORDED_TOPOLOGY if key in node.labels}

    def add_live_node(self, node: NodeState) -> None:
        """Make `node` a candidate: keep it and index it by hash and labels."""
        self.nodes[node.node_id] = node
        self.ring.add(node.hash_key, node.node_id)
        self.labels.add(node)

    def remove_live_node(self, node_id: str) -> NodeState | None:
        """Stop offering a live node as a candidate (the undoing of `add_live_node`; tombstones stay)."""
        node = self.nodes.pop(node_id, None)
        if node is not None:
            self.prefer_tainted.discard(node_id)
            self.ring.remove(node.hash_key, node_id)
            self.labels.remove(node)
        return node

    def _on_node_died(self, event: NodeDied) -> None:
        node = self.remove_live_node(event.node_id)
        if node is None:
            return
        self.dead[node.node_id] = node
        vfold.carry_down(self, event)

    def drop_node(self, node_id: str) -> None:
        """Forget a node (a released virtual node) without a tombstone."""
        self.remove_live_node(node_id)
        self.dead.pop(node_id, None)

    def bury(self, node_id: str) -> None:
        """Forget a dead node for good, detaching whatever the scheduler has not failed yet."""
        node = self.dead.pop(node_id, None)
        if node is None:
            return
        for actor_id in sorted(node.actors):
            self._release_actor(actor_id)
        for pg_id, index in sorted(node.bundles):
            self._release_bundle(self.groups[pg_id], index)

    def _on_node_labels_changed(self, event: NodeLabelsChanged) -> None:
        node = self.nodes.get(event.node_id)
        if node is None:
            return
        placed = [self.actors[actor_id] for actor_id in sorted(node.actors)]
        for actor in placed:
            self.index_actor(actor.request, node, -1)
        self.labels.remove(node)
        node.labels = dict(event.labels)
        node.record = self.record_of_node(node)
        self.labels.add(node)
        for actor in placed:
            self.index_actor(actor.request, node, 1)
        vfold.carry_down(self, event)

    def _on_taints_changed(self, event: TaintsChanged) -> None:
        node = self.nodes.get(event.node_id)
        if node is not None:
            self.set_taints(node, event.taints)
            vfold.carry_down(self, event)

    def set_taints(self, node: NodeState, taints: list[Taint]) -> None:
        """Replace a node's taints, keeping the PreferNoSchedule index true."""
        node.set_taints(taints)
        if node.prefer_taints:
            self.prefer_tainted.add(node.node_id)
        else:
            self.prefer_tainted.discard(node.node_id)

    # actors

    def _on_actor_submitted(self, event: ActorSubmitted) -> None:
        self._submitted(event.request)

    def _submitted(self, request: ScheduleRequest) -> None:
        scope = self._enter(request.actor_id, request.vcluster_id)
        scope.arrivals += 1
        scope.actors[request.actor_id] = ActorState(request, scope.arrivals)
        scope.pending[request.actor_id] = None

    def _enter(self, work_id: str, vc_id: str | None) -> ClusterView:
        """The scope new work joins (recorded so later events about it find it)."""
        if vc_id and vc_id in self.tree.clusters:
            self.tree.work_scope[work_id] = vc_id
            return self.tree.clusters[vc_id].scope
        return self

    def _on_actor_placed(self, event: ActorPlaced) -> None:
        actor = self.actors[event.actor_id]
        node = self.node(event.node_id)
        assert node is not None, f"actor {event.actor_id} placed on never-registered node {event.node_id}"
        actor.status, actor.node_id, actor.explanation = "placed", node.node_id, None
        if event.placement_group_id:
            group = self.groups[event.placement_group_id]
            take(group.bundle_free[event.bundle_index], actor.request.resources)
            group.actors.add(actor.request.actor_id)
            actor.bundle = (event.placement_group_id, event.bundle_index)
        else:
            take(node.free, actor.request.resources)
        node.actors.add(event.actor_id)
        self.index_actor(actor.request, node, 1)
        self.records[event.actor_id] = self._record_of(actor.request, node)
        self.ended.pop(event.actor_id, None)
        self.pending.pop(event.actor_id, None)

    def _on_actor_pending(self, event: ActorPending) -> None:
        actor = self.actors[event.actor_id]
        actor.explanation = event.explanation
        self.pending[event.actor_id] = None

    def _on_actor_failed(self, event: ActorFailed) -> None:
        actor = self._release_actor(event.actor_id)
        if event.will_restart:
            actor.restarts += 1
            actor.status = "pending"
            self.pending[event.actor_id] = None
        else:
            del self.actors[event.actor_id]
            self._ended(event.actor_id)

    def _on_actor_removed(self, event: ActorRemoved) -> None:
        self._release_actor(event.actor_id)
        del self.actors[event.actor_id]
        self.pending.pop(event.actor_id, None)
        self._ended(event.actor_id)

    def _ended(self, actor_id: str) -> None:
        """Keep an ended actor's record for later DataFlow operations, dropping the oldest beyond `records_kept`."""
        if actor_id not in self.records:
            return
        self.ended[actor_id] = None
        self.ended.move_to_end(actor_id)
        while len(self.ended) > self.records_kept:
            oldest, _ = self.ended.popitem(last=False)
            del self.records[oldest]

    def _release_actor(self, actor_id: str) -> ActorState:
        actor = self.actors[actor_id]
        node = self.node(actor.node_id) if actor.node_id is not None else None
        if node is None:
            actor.node_id, actor.bundle = None, None
            return actor
        if actor.bundle is not None:
            group = self.groups.get(actor.bundle[0])
            if group is not None:
                give(group.bundle_free[actor.bundle[1]], actor.request.resources)
                group.actors.discard(actor_id)
        else:
            give(node.free, actor.request.resources)
        node.actors.discard(actor_id)
        self.index_actor(actor.request, node, -1)
        actor.node_id, actor.bundle = None, None
        return actor

    def _record_of(self, request: ScheduleRequest, node: NodeState) -> dict[str, str]:
        """What a later DataFlow operation inherits: topology labels, plus the keys the request selected on."""
        keys = list(request.label_selector)
        strategy = request.scheduling_strategy
        if isinstance(strategy, NodeLabelSchedulingStrategy):
            keys += [*strategy.hard, *strategy.soft]
        extra = {key: node.labels[key] for key in keys if key in node.labels and key not in node.record}
        return {**node.record, **extra} if extra else node.record

    def index_actor(self, request: ScheduleRequest, node: NodeState, delta: int) -> None:
        """Count (`delta=1`) or uncount a placed actor's labels and hard anti-affinity in its node's domains."""
        self._index_labels(request, node, delta, self.topologies)
        namespace = request.namespace
        for key, values, topology in hard_anti_terms(request):
            domain = node.labels.get(topology)
            if domain is None:
                continue
            for value in values if values is not None else (None,):
                self.anti_index.bump((namespace, key, value), topology, domain, delta)

    def _index_labels(self, request: ScheduleRequest, node: NodeState, delta: int, topologies: Iterable[str]) -> None:
        namespace = request.namespace
        for topology in topologies:
            domain = node.labels.get(topology)
            if domain is None:
                continue
            for key, value in request.labels.items():
                self.actor_index.bump((namespace, key, value), topology, domain, delta)
                self.actor_index.bump((namespace, key, None), topology, domain, delta)

    # placement groups

    def _on_group_submitted(self, event: PlacementGroupSubmitted) -> None:
        scope = self._enter(event.request.pg_id, event.request.vcluster_id)
        scope.arrivals += 1
        scope.groups[event.request.pg_id] = GroupState(event.request, scope.arrivals)
        scope.pending[event.request.pg_id] = None

    def _on_group_placed(self, event: PlacementGroupPlaced) -> None:
        group = self.groups[event.pg_id]
        if group.option != event.option or len(group.bundles) != len(event.bundle_nodes):
            group.option = event.option
            group.bundles = group.option_bundles(event.option)
            group.bundle_nodes = [None] * len(group.bundles)
            group.bundle_free = [dict(b) for b in group.bundles]
        for index, node_id in enumerate(event.bundle_nodes):
            if group.bundle_nodes[index] is None:
                node = self.node(node_id)
                assert node is not None, f"bundle placed on never-registered node {node_id}"
                take(node.free, group.bundles[index])
                node.bundles.add((event.pg_id, index))
                group.bundle_nodes[index] = node_id
        group.status, group.explanation = "placed", None
        self.pending.pop(event.pg_id, None)

    def _on_group_pending(self, event: PlacementGroupPending) -> None:
        group = self.groups[event.pg_id]
        group.explanation = event.explanation
        self.pending[event.pg_id] = None

    def _on_bundles_lost(self, event: PlacementGroupBundlesLost) -> None:
        group = self.groups[event.pg_id]
        for index in event.bundle_indices:
            self._release_bundle(group, index)
        group.status = "pending"
        self.pending[event.pg_id] = None

    def _on_group_removed(self, event: PlacementGroupRemoved) -> None:
        group = self.groups.pop(event.pg_id)
        for index in range(len(group.bundles)):
            self._release_bundle(group, index)
        self.pending.pop(event.pg_id, None)

    def _release_bundle(self, group: GroupState, index: int) -> None:
        node_id = group.bundle_nodes[index]
        if node_id is None:
            return
        node = self.node(node_id)
        if node is not None:
            give(node.free, group.bundles[index])
            node.bundles.discard((group.request.pg_id, index))
        group.bundle_nodes[index] = None
        group.bundle_free[index] = dict(group.bundles[index])


def replay(events: Iterable[AnyEvent], seed: int = 0) -> ClusterView:
    """Fold a log into a fresh view."""
    view = ClusterView(seed)
    for event in events:
        view.fold(event)
    return view
