"""The cluster view and its tree of virtual clusters, each with a scope of its own; `fold` applies one event (pure).

Every virtual cluster has its own scope: a `ClusterView` whose nodes are its virtual nodes, so every rule of the
core applies inside it unchanged.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Iterable
from typing import Final

from schemas import (
    ActorAffinityOperator,
    ActorAffinitySchedulingStrategy,
    ActorFailed,
    ActorPending,
    ActorPlaced,
    ActorRemoved,
    ActorSubmitted,
    AnyEvent,
    PlacementGroupBundlesLost,
    PlacementGroupPending,
    PlacementGroupPlaced,
    PlacementGroupRemoved,
    PlacementGroupSubmitted,
    ScheduleRequest,
    Taint,
    VirtualCluster,
    VirtualClusterDestroyed,
    VirtualClusterQueued,
    VirtualNodeResized,
    VirtualNodesReserved,
)
from services.core.labels import NODE_ID
from services.core.ring import HashRing
from services.core.state.folds import CHECKS, FOLDS
from services.core.state.indexes import DomainIndex, EntryKey, LabelIndex
from services.core.state.model import (
    EPSILON,
    FOOTPRINT_TOPOLOGY,
    ActorState,
    GroupState,
    Launch,
    NodeState,
    Resources,
)
from services.core.state.tree import ROOT, AdmissionStatus, VNode
from services.core.type_tests import TypeTest

INDEXED_TOPOLOGIES: Final = (NODE_ID, *FOOTPRINT_TOPOLOGY)
"""The topology keys `actor_index` counts by; the domains of any other key are derived from the node-id ones."""
AntiTerm = tuple[str, tuple[str, ...] | None, str]
SCHEDULER_EVENTS: Final = (
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
_FENCED: Final[TypeTest[AnyEvent]] = TypeTest(*SCHEDULER_EVENTS)
_ACTOR_AFFINITY: Final[TypeTest[ActorAffinitySchedulingStrategy]] = TypeTest(ActorAffinitySchedulingStrategy)
"""What every fold and every placed actor's indexing ask (see `type_tests`)."""
_NOT_IN: Final = ActorAffinityOperator.NOT_IN
_DOES_NOT_EXIST: Final = ActorAffinityOperator.DOES_NOT_EXIST
"""Operators read once: compiled, each read of an Enum class's member goes through `EnumType.__getattr__`."""


FOOTPRINTS_KEPT: Final = 100_000
"""Footprints of ended actors a view keeps for DataFlow (the newest); live actors' footprints are always kept."""


def hard_anti_terms(request: ScheduleRequest) -> list[AntiTerm]:
    """The hard NOT_IN / DOES_NOT_EXIST terms of an ANDed actor-affinity strategy: they bind newcomers too."""
    strategy = request.scheduling_strategy
    if not _ACTOR_AFFINITY.holds(strategy) or strategy.is_or_semantics:
        return []
    terms: list[AntiTerm] = []
    for expression in strategy.match_expressions:
        if expression.soft:
            continue
        if expression.operator == _NOT_IN:
            terms.append((expression.key, tuple(expression.values), expression.topology_key))
        elif expression.operator == _DOES_NOT_EXIST:
            terms.append((expression.key, None, expression.topology_key))
    return terms


class ClusterView:
    """Everything the scheduler knows, indexed for decisions; changed only through `fold` (see `folds.FOLDS`)."""

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
        self.footprints: dict[str, dict[str, str]] = {}
        """Actor id -> where it ran, as a DataFlow operation that runs after it inherits it (`NodeState.footprint`)."""
        self.ended: OrderedDict[str, None] = OrderedDict()
        """Actors that ended (removed, or failed for good) whose footprint is still kept, oldest first (an
        OrderedDict: dropping the oldest of a plain dict gets slower with every key dropped before it)."""
        self.footprints_kept = FOOTPRINTS_KEPT
        self.prefer_tainted: set[str] = set()
        self.pending: dict[str, None] = {}
        self.arrivals = 0
        self.version = 0
        self.epoch = 0
        self.launches: dict[str, Launch] = {}
        """The autoscaler's launches by id (the root view's only), live ones and the newest ended ones."""
        self.launched_nodes: dict[str, str] = {}
        """Live node id -> the launch it registered for."""
        self.ended_launches: OrderedDict[str, None] = OrderedDict()
        """Ended launches still kept, oldest first."""
        self.nominations: dict[str, list[str]] = {}
        """Pending work (root, and top-level virtual clusters' actors) -> the launches whose nodes are nominated for
        it (see `nominations`)."""
        self.held: dict[str, dict[str, tuple[int, Resources]]] = {}
        """Live node id -> pending work nominated to it -> (its priority, the room held for it there)."""
        self.released: set[str] = set()
        """Nodes whose held room was given back since the scheduler last looked (it re-tries waiting work there)."""
        self.launch_count = 0
        """Launches ever requested (the next launch id is numbered from it)."""
        self.autoscaler_epoch = 0
        self.node_type_labels: dict[str, dict[str, str]] = {}
        """The leading autoscaler's node types: the labels each gives the nodes it launches (the root view's only)."""
        self.log_time = 0.0
        """The log time of the event being folded (Unix seconds, as given to `fold`; 0 when none was)."""

    def fold(self, event: AnyEvent, at: float = 0.0) -> None:
        """Apply one event (a scheduler event of an epoch older than the current lease is skipped); `at` is the
        time the log stored it (a launched node's `Launch.idle_since` is taken from it: no clock is read here).

        Through the one fold table (`folds.FOLDS`); actor and placement-group events go to the scope of the virtual
        cluster the work runs in. All or nothing: an event that cannot be folded whole raises
        `UnfoldableEventError` and changes nothing (see `checks`).
        """
        self.log_time = at
        if not (_FENCED.holds(event) and event.epoch < self.epoch):
            rule = CHECKS.get(type(event))
            if rule is not None:
                rule(self, event)
            FOLDS[type(event)](self, event)
        self.version += 1

    def new_scope(self, vc_id: str) -> ClusterView:
        """An empty view for the nodes and work of virtual cluster `vc_id`, sharing this view's tree."""
        return ClusterView(self.seed, tree=self.tree, scope_id=vc_id)

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

    def actor_domains(self, entry: EntryKey, topology: str) -> dict[str, int]:
        """The domains (with counts) of `topology` where placed actors of `entry` are (read only)."""
        if topology in INDEXED_TOPOLOGIES:
            return self.actor_index.domains(entry, topology)
        found: dict[str, int] = {}
        for node_id, count in self.actor_index.domains(entry, NODE_ID).items():
            node = self.node(node_id)
            domain = node.labels.get(topology) if node is not None else None
            if domain is not None:
                found[domain] = found.get(domain, 0) + count
        return found

    def with_candidates(self, extra: Iterable[NodeState]) -> ClusterView:
        """A view for one decision that offers the `extra` nodes too; this view stays exactly as it is.

        It copies what adding nodes changes (nodes, hash ring, label index, PreferNoSchedule set) and shares the
        rest, so it is read, never folded into.
        """
        extra = list(extra)
        scratch = copy.copy(self)
        scratch.nodes = dict(self.nodes)
        scratch.ring = self.ring.copy()
        scratch.labels = self.labels.adding(extra)
        scratch.prefer_tainted = set(self.prefer_tainted)
        for node in extra:
            scratch.nodes[node.node_id] = node
            scratch.ring.add(node.hash_key, node.node_id)
            if node.prefer_taints:
                scratch.prefer_tainted.add(node.node_id)
        return scratch

    # what the folds keep indexed

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

    def drop_node(self, node_id: str) -> None:
        """Forget a node (a released virtual node) without a tombstone."""
        self.remove_live_node(node_id)
        self.dead.pop(node_id, None)

    def set_taints(self, node: NodeState, taints: list[Taint]) -> None:
        """Replace a node's declared taints, keeping the PreferNoSchedule index true."""
        node.set_taints(taints)
        self._index_prefer(node)

    def set_unreachable(self, node: NodeState, taint: Taint | None) -> None:
        """Set or clear a node's liveness taint (`corral.io/unreachable`)."""
        node.set_unreachable(taint)
        self._index_prefer(node)

    def _index_prefer(self, node: NodeState) -> None:
        if node.prefer_taints:
            self.prefer_tainted.add(node.node_id)
        else:
            self.prefer_tainted.discard(node.node_id)

    def index_actor(self, request: ScheduleRequest, node: NodeState, delta: int) -> None:
        """Count (`delta=1`) or uncount a placed actor's labels and hard anti-affinity in its node's domains."""
        namespace = request.namespace
        for topology in INDEXED_TOPOLOGIES:
            domain = node.labels.get(topology)
            if domain is None:
                continue
            for key, label_value in request.labels.items():
                self.actor_index.bump((namespace, key, label_value), topology, domain, delta)
                self.actor_index.bump((namespace, key, None), topology, domain, delta)
        for key, values, topology in hard_anti_terms(request):
            domain = node.labels.get(topology)
            if domain is None:
                continue
            for value in values if values is not None else (None,):
                self.anti_index.bump((namespace, key, value), topology, domain, delta)


class VClusterState:
    """One virtual cluster: spec, place in the tree, admission state, virtual nodes and its scope."""

    __slots__ = (
        "arrival",
        "children",
        "destroying",
        "overtaken",
        "parent",
        "priority",
        "reason",
        "scope",
        "spec",
        "status",
        "vc_id",
        "vnodes",
    )

    def __init__(self, vc_id: str, spec: VirtualCluster, parent: str, priority: int, arrival: int, scope: ClusterView):
        self.vc_id = vc_id
        self.spec = spec
        self.parent = parent
        self.priority = priority
        self.arrival = arrival
        self.status: AdmissionStatus = "queued"
        self.reason = ""
        self.overtaken = 0
        """Clusters that arrived later but were admitted first while this one waited (anti-starvation)."""
        self.destroying = False
        self.scope = scope
        self.vnodes: dict[str, VNode] = {}
        self.children: list[str] = []

    @property
    def flexible_total(self) -> Resources:
        """What the flexible nodes hold together."""
        total: Resources = {}
        for vnode in self.vnodes.values():
            if vnode.flexible:
                node = self.scope.nodes.get(vnode.vnode_id)
                for name, amount in (node.total if node is not None else {}).items():
                    total[name] = total.get(name, 0.0) + amount
        return total

    def live_work(self) -> list[str]:
        """The ids of the actors and placement groups living in this cluster (not its children)."""
        return sorted([*self.scope.actors, *self.scope.groups])


class VTree:
    """Every virtual cluster by id, and the scope each live actor or placement group belongs to."""

    __slots__ = ("arrivals", "clusters", "damaged", "queued", "work_scope")

    def __init__(self) -> None:
        self.clusters: dict[str, VClusterState] = {}
        self.work_scope: dict[str, str] = {}
        self.arrivals = 0
        self.damaged: set[str] = set()
        """Admitted clusters that lost part of their minimum with a dead node (to be reserved again)."""
        self.queued: set[str] = set()
        """Clusters waiting for admission: a command that frees room looks at the queues only when some wait."""

    def note_admission(self, vc: VClusterState) -> None:
        """Track whether a cluster waits for admission."""
        if vc.status == "queued":
            self.queued.add(vc.vc_id)
        else:
            self.queued.discard(vc.vc_id)

    def note_damage(self, vc: VClusterState) -> None:
        """Track whether an admitted cluster still holds its whole minimum."""
        if vc.status == "admitted" and not whole(vc):
            self.damaged.add(vc.vc_id)
        else:
            self.damaged.discard(vc.vc_id)

    def children_of(self, parent: str) -> list[VClusterState]:
        """The clusters directly under `parent` (ROOT for top-level ones), in arrival order."""
        found = [vc for vc in self.clusters.values() if vc.parent == parent]
        return sorted(found, key=lambda vc: vc.arrival)

    def subtree(self, vc_id: str) -> list[VClusterState]:
        """`vc_id` and every cluster under it, children before their parents."""
        vc = self.clusters[vc_id]
        found: list[VClusterState] = []
        for child in vc.children:
            found += self.subtree(child)
        return [*found, vc]

    def queue(self, parent: str) -> list[VClusterState]:
        """The parent's admission queue: higher priority first, then arrival."""
        waiting = [vc for vc in self.clusters.values() if vc.parent == parent and vc.status == "queued"]
        return sorted(waiting, key=lambda vc: (-vc.priority, vc.arrival))


def parent_scope(root: ClusterView, vc: VClusterState) -> ClusterView:
    """The view virtual nodes of `vc` are carved from: the root's, or the parent cluster's scope."""
    return root if vc.parent == ROOT else root.tree.clusters[vc.parent].scope


def whole(vc: VClusterState) -> bool:
    """Whether the cluster holds every fixed-size node of its spec and its whole flexible minimum."""
    slots = sum(len(group.nodes) for group in vc.spec.fixed_size_nodes)
    if sum(1 for vnode in vc.vnodes.values() if not vnode.flexible) < slots:
        return False
    held: Resources = {}
    for vnode in vc.vnodes.values():
        for name, amount in vnode.base.items():
            held[name] = held.get(name, 0.0) + amount
    return all(held.get(name, 0.0) + EPSILON >= amount for name, amount in vc.spec.flexible_resource_min.items())


def replay(events: Iterable[AnyEvent], seed: int = 0) -> ClusterView:
    """Fold a log into a fresh view."""
    view = ClusterView(seed)
    for event in events:
        view.fold(event)
    return view
