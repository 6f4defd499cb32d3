"""Flexible resources: how much a virtual cluster may borrow on a parent node, growing and shrinking (pure).

A cluster's flexible node on a parent node grows by borrowing that node's free resources, never past the
cluster's `flexible_resource_max`; when the parent node is itself a flexible node of the parent cluster, that
one may grow in turn (recursively up the tree). Flexible nodes shrink back to `max(minimum share, used)`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from schemas import VirtualNodeResized
from services.core.framework.pipeline import RoomFits
from services.core.plugins.taints import TaintFilter
from services.core.prng import SplitMix64, stable_hash
from services.core.request import CompiledRequest
from services.core.state import ClusterView, NodeState, Resources, fits
from services.core.state.model import CPU, EPSILON, MEMORY
from services.core.state.nominations import held_quota, unheld
from services.core.state.tree import VNode, flexible_id, positive, vnode_labels
from services.core.state.view import VClusterState, parent_scope
from services.core.vclusters.spec import CompiledSpec

Specs = Callable[[str], CompiledSpec]
STANDINS: Final = 4
"""Parent nodes a cluster tries a new flexible node on, per decision that needs one (a seeded random pick)."""


class Lender:
    """Answers "how much more can this cluster hold here" and plans the growth that placing work needs."""

    def __init__(
        self,
        root: ClusterView,
        specs: Specs,
        claimant: tuple[str, int] | None = None,
        closed: frozenset[str] = frozenset(),
    ) -> None:
        self.root = root
        self.specs = specs
        self.claimant = claimant
        """The work (id, priority) growth is for: a root node's room held for other nominated work of equal or
        higher priority is not lent, nor the quota such work holds; without one (an admission), no held room or
        quota is."""
        self.closed = closed
        """Root nodes that lend the claimant nothing (launched in the round of a launch of its own still coming)."""
        self._quota: dict[str, Resources] = {}
        self._limits: dict[str, Resources] = {}
        """Per cluster, the headroom of each resource asked so far (`lendable` asks it for every node walked)."""

    def headroom(self, vc: VClusterState, names: Resources, *, holding: bool = True) -> Resources:
        """Per resource in `names`: how much more the cluster's flexible nodes may hold (inf: unbounded), less what
        its nominated actors hold of its maximum for others than the claimant (unless not `holding`)."""
        if holding:
            limits = self._limits_of(vc, names)
            return {name: limits[name] for name in names}
        spec, held = self.specs(vc.vc_id), vc.flexible_total
        return {name: spec.headroom(name, held.get(name, 0.0)) for name in names}

    def taken(self, vc: VClusterState) -> Resources:
        """What counts against `vc`'s maximum for the claimant: what its flexible nodes hold, and the quota its
        nominated actors hold (see `held_quota`; all of it without a claimant: an admission)."""
        taken = self._quota.get(vc.vc_id)
        if taken is None:
            taken = dict(vc.flexible_total)
            spec = self.specs(vc.vc_id)

            def room(name: str) -> float:
                return spec.headroom(name, vc.flexible_total.get(name, 0.0))

            work_id, priority = self.claimant or ("", None)
            quota = held_quota(self.root, vc, room, work_id, priority)
            for name, amount in quota.items():
                taken[name] = taken.get(name, 0.0) + amount
            self._quota[vc.vc_id] = taken
        return taken

    def host_room(self, vc: VClusterState, host: NodeState) -> Resources:
        """What `host` (a node of the parent's scope) can give `vc`: its free resources (on a root node, less the
        room it holds for nominated work, and nothing when closed), plus what it may borrow."""
        if not vc.parent:
            if host.node_id in self.closed:
                return {}
            if self.claimant is None:  # not *self.claimant: a compiled call with a star builds a tuple and a dict
                return unheld(self.root, host)
            work_id, priority = self.claimant
            return unheld(self.root, host, work_id, priority)
        parent = self.root.tree.clusters[vc.parent]
        vnode = parent.vnodes.get(host.node_id)
        if vnode is None or not vnode.flexible:
            return host.free
        above = parent_scope(self.root, parent).node(vnode.parent_node)
        if above is None:
            return host.free
        return self._add(host.free, self.lendable(parent, above))

    def lendable(self, vc: VClusterState, host: NodeState, headroom: Resources | None = None) -> Resources:
        """What a flexible node of `vc` on `host` may grow by now: the host's room within `vc`'s headroom
        (`headroom`, when the caller has it, for every resource that matters)."""
        room = self.host_room(vc, host)
        limits = headroom if headroom is not None else self._limits_of(vc, room)
        lent: Resources = {}
        for name, amount in room.items():  # a loop, not min() per resource: no call back into Python
            limit = limits.get(name)
            if limit is None:
                limit = 0.0
            lent[name] = amount if amount <= limit else limit
        return lent

    def _limits_of(self, vc: VClusterState, names: Resources) -> Resources:
        """The headroom of each resource in `names` (and of those asked before), remembered per cluster for this
        lender: what counts against the maximum (`taken`) is fixed for the lender's life too."""
        limits = self._limits.get(vc.vc_id)
        if limits is None:
            limits = self._limits[vc.vc_id] = {}
        for name in names:
            if name not in limits:
                spec, held = self.specs(vc.vc_id), self.taken(vc)
                limits[name] = spec.headroom(name, held.get(name, 0.0))
        return limits

    def room(self, vc: VClusterState, standins: dict[str, str]) -> Callable[[NodeState], Resources]:
        """The room function of the cluster's scope: flexible nodes (and `standins`: id -> parent node) count
        what they may still borrow."""
        parent_view = parent_scope(self.root, vc)

        def room(node: NodeState) -> Resources:
            host = _lending_host(vc, parent_view, standins, node)
            return node.free if host is None else self._add(node.free, self.lendable(vc, host))

        return room

    def room_fits(self, vc: VClusterState, standins: dict[str, str]) -> RoomFits | None:
        """`room`'s fast twin: whether a CPU and a memory need fit a node's room, read from the plain fields of the
        node and of the nodes it borrows from, as `fits(room(node), need)` reads the dicts (None while root nodes
        hold room for nominated work or lend the claimant nothing: ask `room` then)."""
        if self.root.held or self.closed:
            return None
        parent_view = parent_scope(self.root, vc)

        def room_fits(node: NodeState, cpu: float, memory: float) -> bool:
            free_cpu, free_memory = node.free_cpu, node.free_memory
            host = _lending_host(vc, parent_view, standins, node)
            if host is not None:
                lent_cpu, lent_memory = self._lendable_plain(vc, host)
                free_cpu += lent_cpu
                free_memory += lent_memory
            return not (cpu > 0 and free_cpu + EPSILON < cpu) and not (memory > 0 and free_memory + EPSILON < memory)

        return room_fits

    def _lendable_plain(self, vc: VClusterState, host: NodeState) -> tuple[float, float]:
        """`lendable(vc, host)`'s CPU and memory, when no root node holds room: a name missing from the room lends
        0, as a name present with 0 does (the headroom is never negative)."""
        room_cpu, room_memory = host.free_cpu, host.free_memory
        if vc.parent:
            parent = self.root.tree.clusters[vc.parent]
            vnode = parent.vnodes.get(host.node_id)
            above = parent_scope(self.root, parent).node(vnode.parent_node) if vnode and vnode.flexible else None
            if above is not None:
                lent_cpu, lent_memory = self._lendable_plain(parent, above)
                room_cpu, room_memory = room_cpu + lent_cpu, room_memory + lent_memory
        limits = self._limits_of(vc, _PLAIN)
        return _lent(room_cpu, limits[CPU]), _lent(room_memory, limits[MEMORY])

    def growth(self, vc: VClusterState, parent_node: str, need: Resources) -> list[VirtualNodeResized]:
        """The resizes (ancestors first) that give `vc`'s flexible node on `parent_node` `need` free resources."""
        vnode_id = flexible_id(vc.vc_id, parent_node)
        node = vc.scope.nodes.get(vnode_id) if vnode_id in vc.vnodes else None
        free = node.free if node is not None else {}
        deficit = positive({name: amount - free.get(name, 0.0) for name, amount in need.items()})
        if not deficit:
            return []
        steps: list[VirtualNodeResized] = []
        host = parent_scope(self.root, vc).nodes[parent_node]
        short = positive({name: amount - host.free.get(name, 0.0) for name, amount in deficit.items()})
        if short:
            parent = self.root.tree.clusters[vc.parent]
            steps += self.growth(parent, parent.vnodes[parent_node].parent_node, deficit)
        total = dict(node.total) if node is not None else {}
        for name, amount in deficit.items():
            total[name] = total.get(name, 0.0) + amount
        steps.append(VirtualNodeResized(vc_id=vc.vc_id, vnode_id=vnode_id, parent_node=parent_node, resources=total))
        return steps

    @staticmethod
    def shrunk(vc: VClusterState, vnode_id: str) -> VirtualNodeResized | None:
        """The resize that gives back what a flexible node holds beyond `max(its minimum share, used)`."""
        vnode = vc.vnodes.get(vnode_id)
        node = vc.scope.nodes.get(vnode_id)
        if vnode is None or node is None or not vnode.flexible:
            return None
        target = positive(
            {
                name: max(vnode.base.get(name, 0.0), total - node.free.get(name, 0.0))
                for name, total in node.total.items()
            }
        )
        if all(abs(target.get(name, 0.0) - total) < 1e-9 for name, total in node.total.items()):
            return None
        return VirtualNodeResized(vc_id=vc.vc_id, vnode_id=vnode_id, parent_node=vnode.parent_node, resources=target)

    @staticmethod
    def _add(free: Resources, extra: Resources) -> Resources:
        summed = dict(free)
        for name, amount in extra.items():
            have = summed.get(name)
            summed[name] = amount if have is None else have + amount
        return summed


def _lending_host(
    vc: VClusterState, parent_view: ClusterView, standins: dict[str, str], node: NodeState
) -> NodeState | None:
    """The parent node a node of `vc`'s scope may borrow on (a flexible node's, or a stand-in's); None for a
    fixed-size node, or a host no longer there."""
    vnode = vc.vnodes.get(node.node_id)
    if vnode is not None and not vnode.flexible:
        return None
    return parent_view.nodes.get(vnode.parent_node if vnode is not None else standins.get(node.node_id, ""))


_PLAIN: Final[Resources] = {CPU: 0.0, MEMORY: 0.0}
"""The names `_lendable_plain` asks the headroom of."""


def _lent(amount: float, limit: float) -> float:
    return amount if amount <= limit else limit


def stand_ins(
    lender: Lender, vc: VClusterState, spec: CompiledSpec, work: CompiledRequest, headroom: Resources, prng: SplitMix64
) -> list[tuple[NodeState, str]]:
    """For one decision: empty flexible nodes of `vc` (each with its parent node) that could lend `work`'s needs,
    on parent nodes walked from a seeded random start (a decision offers them in a copy of the scope)."""
    parent_view = parent_scope(lender.root, vc)
    ids = parent_view.ring.ids
    allowed, tolerated = TaintFilter(spec.tolerations), TaintFilter(work.tolerations)
    found: list[tuple[NodeState, str]] = []
    start = prng.below(len(ids)) if ids else 0
    for step in range(len(ids)):
        host = parent_view.nodes[ids[(start + step) % len(ids)]]
        if flexible_id(vc.vc_id, host.node_id) in vc.vnodes or tolerated.check(host) is not None:
            continue
        node = new_flexible_node(lender, vc, allowed, host)
        if node is None or not any(option.matches(node.labels) for option in work.options):
            continue
        if not fits(lender.lendable(vc, host, headroom), work.resources):
            continue
        found.append((node, host.node_id))
        if len(found) >= STANDINS:
            break
    return found


def new_flexible_node(lender: Lender, vc: VClusterState, allowed: TaintFilter, host: NodeState) -> NodeState | None:
    """The empty flexible node `vc` would get on `host` (its labels and taints), or None when the cluster's
    tolerations (`allowed`) do not let it use `host`."""
    if allowed.check(host) is not None:
        return None
    vnode_id = flexible_id(vc.vc_id, host.node_id)
    labels = vnode_labels(host.labels, VNode(vnode_id, host.node_id, {}, -1, {}), vc.vc_id)
    node = NodeState(vnode_id, stable_hash(lender.root.seed, vnode_id), {}, labels)
    node.set_taints(list(host.taints))
    return node
