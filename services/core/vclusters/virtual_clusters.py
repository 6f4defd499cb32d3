"""`VirtualClusters`: create and admit, destroy, borrow and shrink, repair; composed by `Cluster` (pure).

What it needs from the cluster that holds it is the `ClusterHooks` it is given; what the cluster needs from it
are its public methods.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from schemas import (
    AnyEvent,
    VirtualCluster,
    VirtualClusterDestroyed,
    VirtualClusterInfo,
    VirtualClusterQueued,
    VirtualNodesReserved,
)
from schemas.vclusters import Admitted, Destroyed, Queued
from services.core.decide.actor import Rules, first_fitting, new_nodes_fail, place_actor
from services.core.errors import NotFoundError
from services.core.plugins.taints import TaintFilter
from services.core.prng import SplitMix64
from services.core.request import CompiledRequest
from services.core.state import ClusterView, NodeState, Resources
from services.core.state.model import EPSILON
from services.core.state.nominations import closed_to, nominated_nodes
from services.core.state.tree import ROOT, flexible_id
from services.core.state.view import VClusterState, parent_scope
from services.core.vclusters.admission import (
    STARVATION_LIMIT,
    FreeCapacity,
    blocker,
    queue_position,
    queued_message,
    reserve,
)
from services.core.vclusters.borrowing import Lender, new_flexible_node, stand_ins
from services.core.vclusters.growth import NO_GROWTH, Growth, parent_growth
from services.core.vclusters.info import cluster_info, quota_reason
from services.core.vclusters.spec import CompiledSpec, destroy_requested, requested


@dataclass(frozen=True)
class ClusterHooks:
    """What virtual clusters need from the cluster that holds them."""

    emit: Callable[[AnyEvent], None]
    """Write an event (kept for the log and folded into the view)."""
    begin: Callable[[str], None]
    """Start a command about `subject` (the correlation of the events it writes)."""
    stop_work: Callable[[ClusterView, str], list[str]]
    """Stop every placement group, then every actor, of a scope for good; the ids stopped, sorted."""
    retry_all: Callable[[], None]
    """Re-try every kind of waiting work in every scope."""
    retry_scope: Callable[[ClusterView], bool]
    """Re-try every waiting work of one scope; whether anything was placed."""
    freed: Callable[[str, str, Resources], None]
    """Note that a scope (ROOT or a cluster id) got resources back on one of its nodes during the current command,
    and what that node had free before."""


class VirtualClusters:
    """Virtual clusters on top of a cluster's view, its seeded choices and its pending queue."""

    def __init__(
        self,
        view: ClusterView,
        prng: SplitMix64,
        hooks: ClusterHooks,
        *,
        rare_resources: tuple[str, ...],
        sample_size: int,
    ) -> None:
        self._view = view
        self._prng = prng
        self._hooks = hooks
        self.rare_resources = rare_resources
        self.sample_size = sample_size
        self._specs: dict[str, CompiledSpec] = {}

    def create(
        self, vc_id: str, spec: VirtualCluster, parent: str | None = None, priority: int = 0
    ) -> Admitted | Queued:
        """Reserve the cluster's minimum from `parent` (None: the root) all at once, or queue it until it can be.

        Asking again for a live cluster with the same spec, parent and priority returns where it stands.
        """
        event = requested(self._view.tree, vc_id, spec, parent, priority, self.rare_resources)
        if event is not None:
            self._hooks.begin(vc_id)
            self._hooks.emit(event)
            self.try_admit(self._view.tree.clusters[vc_id], announce=True)
        return self.admission(vc_id)

    def admission(self, vc_id: str) -> Admitted | Queued:
        """Where a cluster stands: admitted with its virtual nodes, or queued with the reason and its position."""
        vc = self.get(vc_id)
        if vc.status == "queued":
            message = queued_message(self._view, vc, vc.reason)
            return Queued(vc_id, message, queue_position(self._view, vc)[0])
        return Admitted(vc_id, sorted(vc.vnodes))

    def destroy_requested(self, vc_id: str, force: bool = False) -> Destroyed:
        """Give the cluster's (and its children's) resources back; live work refuses it unless `force` stops it."""
        event = destroy_requested(self._view.tree, vc_id, force)
        self._hooks.begin(vc_id)
        self._hooks.emit(event)
        return self.destroy(vc_id)

    def destroy(self, vc_id: str) -> Destroyed:
        """Stop the work of the cluster and its children, release their nodes, then re-try what waits."""
        tree = self._view.tree
        if vc_id not in tree.clusters:
            return Destroyed(vc_id, [])
        parent = tree.clusters[vc_id].parent
        gone, stopped = [], []
        for vc in tree.subtree(vc_id):
            stopped_here = self._hooks.stop_work(vc.scope, f"virtual cluster {vc.vc_id} destroyed")
            hosts = sorted({vnode.parent_node for vnode in vc.vnodes.values()})
            self._hooks.emit(VirtualClusterDestroyed(vc_id=vc.vc_id, stopped=stopped_here))
            if parent:
                for host in hosts:
                    self.shrink(tree.clusters[parent].scope, host)
            gone.append(vc.vc_id)
            stopped += stopped_here
        self._hooks.retry_all()
        return Destroyed(vc_id, gone, sorted(stopped))

    def info(self, vc_id: str) -> VirtualClusterInfo:
        """The cluster's spec, state, resources (total, max, available), virtual nodes, children and parent."""
        vc = self.get(vc_id)
        return cluster_info(self._view, vc, self.spec_of(vc_id), self._queue_reason(vc))

    def infos(self) -> list[VirtualClusterInfo]:
        """Every virtual cluster, parents before children (a queued one with the reason it was queued with)."""
        ordered = list(self._view.tree.clusters.values())
        return [cluster_info(self._view, vc, self.spec_of(vc.vc_id), vc.reason) for vc in ordered]

    def get(self, vc_id: str) -> VClusterState:
        """A live virtual cluster, or a `NotFoundError` naming it."""
        vc = self._view.tree.clusters.get(vc_id)
        if vc is None:
            raise NotFoundError(f"vc_id {vc_id!r}: no such virtual cluster")
        return vc

    def of_scope(self, scope: ClusterView) -> VClusterState | None:
        """The virtual cluster whose scope `scope` is (None for the root's)."""
        return self._view.tree.clusters.get(scope.scope_id) if scope.scope_id else None

    def spec_of(self, vc_id: str) -> CompiledSpec:
        """The compiled spec of a live cluster (compiled once, forgotten when the cluster is destroyed)."""
        spec = self._specs.get(vc_id)
        if spec is None:
            spec = self._specs[vc_id] = CompiledSpec(vc_id, self._view.tree.clusters[vc_id].spec, self.rare_resources)
        return spec

    def forget(self, vc_id: str) -> None:
        """Drop what was compiled for a destroyed cluster."""
        self._specs.pop(vc_id, None)

    def quota_reason(self, vc: VClusterState, work: CompiledRequest) -> str:
        """Why `vc` cannot grow to hold `work` ("" when it can)."""
        lender = Lender(self._view, self.spec_of, (work.request.actor_id, work.request.priority))
        return quota_reason(self._view, vc, self.spec_of(vc.vc_id), lender, work.resources)

    def _lender(self) -> Lender:
        return Lender(self._view, self.spec_of)

    def admit_waiting(self) -> None:
        """Admit waiting clusters (each parent's queue in order) and repair degraded ones."""
        tree = self._view.tree
        if not tree.queued and not tree.damaged:  # most calls: nothing waits, nothing to repair
            return
        queues: dict[str, list[VClusterState]] = {}
        for vc in tree.clusters.values():  # in arrival order, so parents come before their children
            if vc.status == "queued" and not vc.destroying:
                queues.setdefault(vc.parent, []).append(vc)
        free = FreeCapacity(self._view, self.spec_of)
        for parent in sorted(queues, key=lambda p: (p != ROOT, tree.clusters[p].arrival if p else 0)):
            for vc in sorted(queues[parent], key=lambda vc: (-vc.priority, vc.arrival)):
                if self.try_admit(vc, announce=False, free=free):
                    free.forget()
        for vc_id in sorted(tree.damaged, key=lambda vc_id: tree.clusters[vc_id].arrival):
            if not tree.clusters[vc_id].destroying:
                self._repair(tree.clusters[vc_id])

    def try_admit(self, vc: VClusterState, *, announce: bool, free: FreeCapacity | None = None) -> bool:
        """Admit `vc` if its whole minimum can be reserved now; otherwise record why it waits (once).

        With `free`, a cluster whose minimum exceeds what the parent has free in total is not tried further.
        """
        if vc.status != "queued" or vc.destroying:
            return False
        spec = self.spec_of(vc.vc_id)
        blocked = self._blocked(vc)
        if not blocked and free is not None and vc.reason and not free.may_hold(vc, spec):
            return False
        growth = NO_GROWTH if blocked else self._grow_parent(vc)
        planned = growth.slots if isinstance(growth, Growth) else None
        outcome = blocked or reserve(self._view, vc, spec, self._prng, self.sample_size, planned)
        if isinstance(outcome, str) and isinstance(growth, str):
            outcome = growth
        if not isinstance(outcome, str):
            self._hooks.emit(VirtualNodesReserved(vc_id=vc.vc_id, vnodes=outcome))
            self._hooks.retry_scope(vc.scope)
            return True
        self._shrink_parent(vc, growth)
        if announce or not vc.reason:
            self._hooks.emit(VirtualClusterQueued(vc_id=vc.vc_id, reason=outcome))
        return False

    def _blocked(self, vc: VClusterState) -> str:
        ahead = blocker(self._view, vc)
        if ahead is None:
            return ""
        return f"waits behind virtual cluster {ahead.vc_id}, which {STARVATION_LIMIT} later clusters have passed"

    def _queue_reason(self, vc: VClusterState) -> str:
        """Why a queued cluster waits now (the recorded reason is the one it was queued with)."""
        if vc.status != "queued":
            return ""
        blocked = self._blocked(vc)
        if blocked:
            return blocked
        spec = self.spec_of(vc.vc_id)
        outcome = reserve(self._view, vc, spec, SplitMix64(self._view.seed), self.sample_size)
        if not isinstance(outcome, str):
            return vc.reason
        growth = parent_growth(self._lender(), vc, spec)
        return growth if isinstance(growth, str) else outcome

    def _grow_parent(self, vc: VClusterState) -> Growth | str:
        """Grow the parent cluster's flexible nodes so it can hold what `vc` needs: how it grew, or why it cannot
        grow for it (then it does not grow)."""
        lender = self._lender()
        growth = parent_growth(lender, vc, self.spec_of(vc.vc_id))
        if isinstance(growth, str):
            return growth
        parent = self._view.tree.clusters.get(vc.parent)
        for host_id, amount in growth.hosts:
            assert parent is not None
            node = parent.scope.nodes.get(flexible_id(parent.vc_id, host_id))
            free = node.free if node is not None else {}
            need = {name: free.get(name, 0.0) + extra for name, extra in amount.items()}
            for step in lender.growth(parent, host_id, need):
                self._hooks.emit(step)
        return growth

    def _shrink_parent(self, vc: VClusterState, growth: Growth | str) -> None:
        """Give back what the parent grew for `vc` when the attempt failed."""
        if isinstance(growth, Growth):
            for host_id, _ in growth.hosts:
                self.shrink(self._view.scope(vc.parent), flexible_id(vc.parent, host_id))

    def _repair(self, vc: VClusterState) -> None:
        """Reserve again the fixed-size nodes and flexible minimum a dead node took, when the parent can."""
        growth = self._grow_parent(vc)
        planned = growth.slots if isinstance(growth, Growth) else None
        grants = reserve(self._view, vc, self.spec_of(vc.vc_id), self._prng, self.sample_size, planned)
        if isinstance(grants, str) or not grants:
            self._shrink_parent(vc, growth)
            return
        self._hooks.emit(VirtualNodesReserved(vc_id=vc.vc_id, vnodes=grants))

    def borrow(
        self, vc: VClusterState, work: CompiledRequest, rules: Rules | None = None
    ) -> tuple[NodeState, int] | None:
        """Place `work` by growing a flexible node of `vc` (borrowing from the parent), if its maximum allows
        (`rules`: the actor's, prepared on the cluster's scope as it is now, if the caller has them).

        The cluster's flexible node on a node launched for this work (nominated) grows first; then existing
        flexible nodes; only when none can does the cluster get a new one.
        """
        spec = self.spec_of(vc.vc_id)
        if vc.status != "admitted" or not spec.grows or work.group_target is not None:
            return None
        request, root = work.request, self._view
        nominations = bool(root.nominations) and not vc.parent
        nominated = nominated_nodes(root, request.actor_id) if nominations else ()
        closed = closed_to(root, request.actor_id, nominated) if nominations else frozenset()
        lender = Lender(root, self.spec_of, (request.actor_id, request.priority), closed)
        scope = vc.scope
        headroom = lender.headroom(vc, work.resources)
        if _past_maximum(scope, work.resources, headroom):
            return None  # even the freest node would have to grow past the maximum
        standins: dict[str, str] = {}
        placed = self._on_nominated(vc, spec, work, lender, nominated, standins) if nominated else None
        if placed is None:
            room, room_fits = lender.room(vc, standins), lender.room_fits(vc, standins)
            placed = place_actor(scope, work, self._prng, self.sample_size, room, rules, room_fits)
        if placed is None and not new_nodes_fail(scope, work, rules):  # no flexible node can grow enough: try new ones
            nodes = stand_ins(lender, vc, spec, work, headroom, self._prng)
            standins = {node.node_id: host_id for node, host_id in nodes}
            scratch = scope.with_candidates(node for node, _ in nodes)
            room, room_fits = lender.room(vc, standins), lender.room_fits(vc, standins)
            placed = place_actor(scratch, work, self._prng, self.sample_size, room, None, room_fits)
        if placed is None:
            return None
        node_id, bundle_index = placed[0].node_id, placed[1]
        vnode = vc.vnodes.get(node_id)
        if vnode is not None and not vnode.flexible:
            return scope.nodes[node_id], bundle_index
        host = vnode.parent_node if vnode is not None else standins[node_id]
        for step in lender.growth(vc, host, work.resources):
            self._hooks.emit(step)
        return scope.nodes[node_id], bundle_index

    def _on_nominated(
        self,
        vc: VClusterState,
        spec: CompiledSpec,
        work: CompiledRequest,
        lender: Lender,
        hosts: tuple[str, ...],
        standins: dict[str, str],
    ) -> tuple[NodeState, int] | None:
        """The cluster's flexible node (grown, or new: noted in `standins`) on the first of the nodes nominated for
        `work` (`hosts`) that passes every rule and can lend it room, as the scheduler chooses a nominated node
        outright."""
        scope, allowed = vc.scope, TaintFilter(spec.tolerations)
        nodes, extra = [], []
        for host_id in hosts:
            vnode_id = flexible_id(vc.vc_id, host_id)
            if vnode_id in vc.vnodes:
                node = scope.nodes.get(vnode_id)
            else:
                node = new_flexible_node(lender, vc, allowed, self._view.nodes[host_id])
                if node is not None:
                    extra.append(node)
                    standins[node.node_id] = host_id
            if node is not None:
                nodes.append(node)
        scratch = scope.with_candidates(extra) if extra else scope
        return first_fitting(scratch, work, nodes, lender.room(vc, standins))

    def may_grow(self, vc: VClusterState) -> bool:
        """Whether the cluster's flexible nodes may still borrow something from its parent (quota held for its
        nominated actors counts: they may borrow it)."""
        spec = self.spec_of(vc.vc_id)
        if vc.status != "admitted" or not spec.grows:
            return False
        headroom = self._lender().headroom(vc, dict.fromkeys(spec.maximum, 0.0), holding=False)
        return any(room > EPSILON for room in headroom.values())

    def shrink(self, scope: ClusterView, node_id: str | None) -> None:
        """Give back what a flexible node no longer uses, then let its parent's flexible node shrink in turn."""
        vc = self.of_scope(scope)
        while vc is not None and node_id is not None and vc.scope.nodes.get(node_id) is not None:
            vnode = vc.vnodes.get(node_id)
            step = Lender.shrunk(vc, node_id)
            if vnode is None or step is None:
                return
            host = parent_scope(self._view, vc).nodes.get(vnode.parent_node)
            before = dict(host.free) if host is not None else {}
            self._hooks.emit(step)
            self._hooks.freed(vc.parent, vnode.parent_node, before)
            node_id = vnode.parent_node
            vc = self._view.tree.clusters.get(vc.parent)


def _past_maximum(scope: ClusterView, need: Resources, headroom: Resources) -> bool:
    """Whether even the freest node of `scope` would have to grow past the cluster's maximum (`headroom` left, per
    resource) to hold `need`. Loops, not max() over a generator: a compiled generator is an object per call."""
    nodes = scope.nodes.values()
    for name, amount in need.items():
        most = 0.0
        first = True
        for node in nodes:
            free = node.free.get(name)
            have = 0.0 if free is None else free
            if first or have > most:
                most, first = have, False
        if amount - most > headroom[name] + 1e-9:
            return True
    return False
