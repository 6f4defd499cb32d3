"""The virtual-cluster operations of `Cluster`: create and admit, destroy, borrow and shrink, repair (pure).

A mixin: `Cluster` provides the recording and the pending queue it calls (declared below for the type checker).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from schemas import (
    AnyEvent,
    VirtualCluster,
    VirtualClusterDestroyed,
    VirtualClusterInfo,
    VirtualClusterQueued,
    VirtualNodesReserved,
)
from schemas.vclusters import Admitted, Destroyed, Queued
from services.core.decide.actor import new_nodes_fail, place_actor
from services.core.errors import NotFoundError
from services.core.plugins.taints import TaintFilter
from services.core.prng import SplitMix64, stable_hash
from services.core.request import CompiledRequest
from services.core.state import ClusterView, NodeState, Resources, fits
from services.core.state.model import EPSILON
from services.core.state.vfold import STARVATION_LIMIT, parent_scope
from services.core.state.vtree import ROOT, VClusterState, VNode, flexible_id, vnode_labels
from services.core.vcluster_admission import FreeCapacity, blocker, queue_position, queued_message, reserve
from services.core.vcluster_borrow import Lender, parent_growth
from services.core.vcluster_info import cluster_info
from services.core.vcluster_spec import CompiledSpec, destroy_requested, requested

STANDINS = 4
"""Parent nodes a cluster tries a new flexible node on, per decision that needs one (a seeded random pick)."""


class VirtualClusterOps:
    """Virtual clusters on top of the fold and the pending queue of `Cluster`."""

    seed: int
    rare_resources: tuple[str, ...]
    sample_size: int
    _view: ClusterView
    _prng: SplitMix64
    _specs: dict[str, CompiledSpec]
    _freed: set[str]

    if TYPE_CHECKING:

        def _emit(self, event: AnyEvent) -> None: ...
        def _begin(self, subject: str) -> None: ...
        def _react(self, event: AnyEvent) -> None: ...
        def _retry_pending(self, *, everything: bool) -> None: ...
        def _retry_scope(self, scope: ClusterView, *, wake_all: bool) -> bool: ...
        def _stop_group(self, pg_id: str, reason: str) -> None: ...
        def _fail_actors(self, actor_ids: list[str], reason: str, *, restart: bool = True) -> None: ...
        def _vc(self, scope: ClusterView) -> VClusterState | None: ...

    def create_virtual_cluster(
        self, vc_id: str, spec: VirtualCluster, parent: str | None = None, priority: int = 0
    ) -> Admitted | Queued:
        """Reserve the cluster's minimum from `parent` (None: the root) all at once, or queue it until it can be.

        Asking again for a live cluster with the same spec, parent and priority returns where it stands.
        """
        event = requested(self._view.tree, vc_id, spec, parent, priority, self.rare_resources)
        if event is not None:
            self._begin(vc_id)
            self._emit(event)
            self._react(event)
        return self.admission(vc_id)

    def admission(self, vc_id: str) -> Admitted | Queued:
        """Where a cluster stands: admitted with its virtual nodes, or queued with the reason and its position."""
        vc = self._cluster(vc_id)
        if vc.status == "queued":
            message = queued_message(self._view, vc, vc.reason)
            return Queued(vc_id, message, queue_position(self._view, vc)[0])
        return Admitted(vc_id, sorted(vc.vnodes))

    def destroy_virtual_cluster(self, vc_id: str, force: bool = False) -> Destroyed:
        """Give the cluster's (and its children's) resources back; live work refuses it unless `force` stops it."""
        event = destroy_requested(self._view.tree, vc_id, force)
        self._begin(vc_id)
        self._emit(event)
        return self._destroy(vc_id)

    def _destroy(self, vc_id: str) -> Destroyed:
        """Stop the work of the cluster and its children, release their nodes, then re-try what waits."""
        tree = self._view.tree
        if vc_id not in tree.clusters:
            return Destroyed(vc_id, [])
        parent = tree.clusters[vc_id].parent
        gone, stopped = [], []
        for vc in tree.subtree(vc_id):
            reason = f"virtual cluster {vc.vc_id} destroyed"
            mine = sorted(vc.scope.groups)
            for pg_id in mine:
                self._stop_group(pg_id, reason)
            actors = sorted(vc.scope.actors)
            self._fail_actors(actors, reason, restart=False)
            hosts = sorted({vnode.parent_node for vnode in vc.vnodes.values()})
            self._emit(VirtualClusterDestroyed(vc_id=vc.vc_id, stopped=sorted(mine + actors)))
            if parent:
                for host in hosts:
                    self._shrink(tree.clusters[parent].scope, host)
            gone.append(vc.vc_id)
            stopped += sorted(mine + actors)
        self._retry_pending(everything=True)
        return Destroyed(vc_id, gone, sorted(stopped))

    def virtual_cluster(self, vc_id: str) -> VirtualClusterInfo:
        """The cluster's spec, state, resources (total, max, available), virtual nodes, children and parent."""
        vc = self._cluster(vc_id)
        return cluster_info(self._view, vc, self._spec_of(vc_id), self._queue_reason(vc))

    def virtual_clusters(self) -> list[VirtualClusterInfo]:
        """Every virtual cluster, parents before children (a queued one with the reason it was queued with)."""
        ordered = list(self._view.tree.clusters.values())
        return [cluster_info(self._view, vc, self._spec_of(vc.vc_id), vc.reason) for vc in ordered]

    def _cluster(self, vc_id: str) -> VClusterState:
        vc = self._view.tree.clusters.get(vc_id)
        if vc is None:
            raise NotFoundError(f"vc_id {vc_id!r}: no such virtual cluster")
        return vc

    def _spec_of(self, vc_id: str) -> CompiledSpec:
        spec = self._specs.get(vc_id)
        if spec is None:
            spec = self._specs[vc_id] = CompiledSpec(vc_id, self._view.tree.clusters[vc_id].spec, self.rare_resources)
        return spec

    def _lender(self) -> Lender:
        return Lender(self._view, self._spec_of)

    def _admit_waiting(self) -> None:
        """Admit waiting clusters (each parent's queue in order) and repair degraded ones."""
        tree = self._view.tree
        queues: dict[str, list[VClusterState]] = {}
        for vc in tree.clusters.values():  # in arrival order, so parents come before their children
            if vc.status == "queued" and not vc.destroying:
                queues.setdefault(vc.parent, []).append(vc)
        free = FreeCapacity(self._view, self._spec_of)
        for parent in sorted(queues, key=lambda p: (p != ROOT, tree.clusters[p].arrival if p else 0)):
            for vc in sorted(queues[parent], key=lambda vc: (-vc.priority, vc.arrival)):
                if self._try_admit(vc, announce=False, free=free):
                    free.forget()
        for vc_id in sorted(tree.damaged, key=lambda vc_id: tree.clusters[vc_id].arrival):
            if not tree.clusters[vc_id].destroying:
                self._repair(tree.clusters[vc_id])

    def _try_admit(self, vc: VClusterState, *, announce: bool, free: FreeCapacity | None = None) -> bool:
        """Admit `vc` if its whole minimum can be reserved now; otherwise record why it waits (once).

        With `free`, a cluster whose minimum exceeds what the parent has free in total is not tried further.
        """
        if vc.status != "queued" or vc.destroying:
            return False
        spec = self._spec_of(vc.vc_id)
        blocked = self._blocked(vc)
        if not blocked and free is not None and vc.reason and not free.may_hold(vc, spec):
            return False
        grown = [] if blocked else self._grow_parent(vc)
        outcome = blocked or reserve(self._view, vc, spec, self._prng, self.sample_size)
        if not isinstance(outcome, str):
            self._emit(VirtualNodesReserved(vc_id=vc.vc_id, vnodes=outcome))
            self._retry_scope(vc.scope, wake_all=True)
            return True
        for vnode_id in grown:
            self._shrink(self._view.scope(vc.parent), vnode_id)
        if announce or not vc.reason:
            self._emit(VirtualClusterQueued(vc_id=vc.vc_id, reason=outcome))
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
        outcome = self._blocked(vc) or reserve(
            self._view, vc, self._spec_of(vc.vc_id), SplitMix64(self.seed), self.sample_size
        )
        return outcome if isinstance(outcome, str) else vc.reason

    def _grow_parent(self, vc: VClusterState) -> list[str]:
        """Grow the parent cluster's flexible nodes so it can hold what `vc` needs; the grown nodes' ids."""
        lender = self._lender()
        plan = parent_growth(lender, vc, self._spec_of(vc.vc_id)) or []
        parent = self._view.tree.clusters.get(vc.parent)
        grown = []
        for host_id, amount in plan:
            assert parent is not None
            vnode_id = flexible_id(parent.vc_id, host_id)
            node = parent.scope.nodes.get(vnode_id)
            free = node.free if node is not None else {}
            need = {name: free.get(name, 0.0) + extra for name, extra in amount.items()}
            for step in lender.growth(parent, host_id, need):
                self._emit(step)
            grown.append(vnode_id)
        return grown

    def _repair(self, vc: VClusterState) -> None:
        """Reserve again the fixed-size nodes and flexible minimum a dead node took, when the parent can."""
        grown = self._grow_parent(vc)
        grants = reserve(self._view, vc, self._spec_of(vc.vc_id), self._prng, self.sample_size)
        if isinstance(grants, str) or not grants:
            for vnode_id in grown:
                self._shrink(self._view.scope(vc.parent), vnode_id)
            return
        self._emit(VirtualNodesReserved(vc_id=vc.vc_id, vnodes=grants))

    def _borrow(self, vc: VClusterState, work: CompiledRequest) -> tuple[NodeState, int] | None:
        """Place `work` by growing a flexible node of `vc` (borrowing from the parent), if its maximum allows.

        Existing flexible nodes grow first; only when none can does the cluster get a new one.
        """
        spec = self._spec_of(vc.vc_id)
        if vc.status != "admitted" or not spec.grows or work.group_target is not None:
            return None
        lender = self._lender()
        scope = vc.scope
        headroom = lender.headroom(vc, work.resources)
        most_free = {
            name: max((node.free.get(name, 0.0) for node in scope.nodes.values()), default=0.0)
            for name in work.resources
        }
        if any(amount - most_free[name] > headroom[name] + 1e-9 for name, amount in work.resources.items()):
            return None  # even the freest node would have to grow past the maximum
        standins: dict[str, str] = {}
        placed = place_actor(scope, work, self._prng, self.sample_size, lender.room(vc, standins))
        if placed is None and not new_nodes_fail(scope, work):  # no flexible node can grow enough: try new ones
            standins = self._standins(vc, spec, work, lender, headroom)
            try:
                placed = place_actor(scope, work, self._prng, self.sample_size, lender.room(vc, standins))
            finally:
                for vnode_id in standins:  # a tombstone of the same id (its host died and came back) stays
                    scope.remove_live_node(vnode_id)
        if placed is None:
            return None
        node_id, bundle_index = placed[0].node_id, placed[1]
        vnode = vc.vnodes.get(node_id)
        if vnode is not None and not vnode.flexible:
            return scope.nodes[node_id], bundle_index
        host = vnode.parent_node if vnode is not None else standins[node_id]
        for step in lender.growth(vc, host, work.resources):
            self._emit(step)
        return scope.nodes[node_id], bundle_index

    def _standins(
        self, vc: VClusterState, spec: CompiledSpec, work: CompiledRequest, lender: Lender, headroom: Resources
    ) -> dict[str, str]:
        """Add to the scope, for one decision, empty flexible nodes on parent nodes that could lend `work`'s needs."""
        parent_view = parent_scope(self._view, vc)
        ids = parent_view.ring.ids
        allowed, tolerated = TaintFilter(spec.tolerations), TaintFilter(work.tolerations)
        standins: dict[str, str] = {}
        start = self._prng.below(len(ids)) if ids else 0
        for step in range(len(ids)):
            host = parent_view.nodes[ids[(start + step) % len(ids)]]
            vnode_id = flexible_id(vc.vc_id, host.node_id)
            if vnode_id in vc.vnodes or allowed.check(host) is not None or tolerated.check(host) is not None:
                continue
            labels = vnode_labels(host.labels, VNode(vnode_id, host.node_id, {}, -1, {}), vc.vc_id)
            if not any(option.matches(labels) for option in work.options):
                continue
            if not fits(lender.lendable(vc, host, headroom), work.resources):
                continue
            node = NodeState(vnode_id, stable_hash(self.seed, vnode_id), {}, labels)
            vc.scope.set_taints(node, list(host.taints))
            vc.scope.add_live_node(node)
            standins[vnode_id] = host.node_id
            if len(standins) >= STANDINS:
                break
        return standins

    def _may_grow(self, vc: VClusterState) -> bool:
        """Whether the cluster's flexible nodes may still borrow something from its parent."""
        spec = self._spec_of(vc.vc_id)
        if vc.status != "admitted" or not spec.grows:
            return False
        return any(room > EPSILON for room in self._lender().headroom(vc, dict.fromkeys(spec.maximum, 0.0)).values())

    def _shrink(self, scope: ClusterView, node_id: str | None) -> None:
        """Give back what a flexible node no longer uses, then let its parent's flexible node shrink in turn."""
        vc = self._vc(scope)
        while vc is not None and node_id is not None and vc.scope.nodes.get(node_id) is not None:
            vnode = vc.vnodes.get(node_id)
            step = Lender.shrunk(vc, node_id)
            if vnode is None or step is None:
                return
            self._emit(step)
            self._freed.add(vc.parent)
            node_id = vnode.parent_node
            vc = self._view.tree.clusters.get(vc.parent)
