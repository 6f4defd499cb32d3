"""A virtual cluster and its ancestors, as the planner sees them: how much more work inside may borrow (the
flexible maximum), and the flexible node the cluster would get on a node (pure)."""

from __future__ import annotations

import math
from functools import partial

from services.core.amounts import format_amount
from services.core.plugins.taints import TaintFilter
from services.core.state import ClusterView, NodeState, Resources
from services.core.state.model import EPSILON
from services.core.state.nominations import held_quota, quota_order
from services.core.state.tree import VNode, flexible_id, vnode_labels
from services.core.state.view import VClusterState, parent_scope
from services.core.vclusters.spec import CompiledSpec


class Chain:
    """`vc` and every cluster above it (innermost first), with their compiled specs."""

    def __init__(self, root: ClusterView, vc: VClusterState, rare_resources: tuple[str, ...]) -> None:
        self.vc = vc
        self.clusters: list[tuple[VClusterState, CompiledSpec]] = []
        current: VClusterState | None = vc
        while current is not None:
            self.clusters.append((current, CompiledSpec(current.vc_id, current.spec, rare_resources)))
            current = root.tree.clusters.get(current.parent) if current.parent else None
        self.root = root
        self.host_scope = parent_scope(root, vc)
        """The scope whose nodes `vc`'s flexible nodes are carved from."""
        self.claimed: Resources = {}
        """What queued child clusters counted as demand will take of `vc`'s growth (admission comes first)."""
        self.stuck: set[str] = set()
        """Pending actors of `vc` that neither a node type nor an existing node's free room can host: the scheduler
        places none of them now, so they take none of the maximum `within` gives out."""
        self._filters = [(other.vc_id, TaintFilter(spec.tolerations)) for other, spec in self.clusters]
        self._stand_ins: dict[str, NodeState | None] = {}
        self._within: set[str] | None = None

    def headroom(self, names: Resources, *, admission: bool = False) -> Resources:
        """Per resource of `names`: how much more every cluster of the chain may still borrow (inf: unbounded); for
        an `admission`, less the quota each cluster's nominated actors hold (the scheduler keeps it from them)."""
        room = dict.fromkeys(names, math.inf)
        for vc, spec in self.clusters:
            held = dict(vc.flexible_total)
            if vc is self.vc:
                for name, amount in self.claimed.items():
                    held[name] = held.get(name, 0.0) + amount
            kept = held_quota(self.root, vc, partial(_room, spec, held)) if admission else {}
            for name in room:
                room[name] = min(room[name], spec.headroom(name, held.get(name, 0.0) + kept.get(name, 0.0)))
        return room

    def claim(self, need: Resources) -> str:
        """Count a queued child cluster's `need` against `vc`'s growth, after the quota its nominated actors hold;
        why it cannot be ("" when it is)."""
        why = self.blocked() or self.short(need)
        if not why:
            for name, amount in need.items():
                self.claimed[name] = self.claimed.get(name, 0.0) + amount
        return why

    def blocked(self) -> str:
        """Why no new node can help `vc` grow ("" when one can): a cluster of the chain is queued or never grows,
        or `vc` is nested (its flexible nodes are carved only from nodes its parent holds already, and a new
        node holds none of its parent's)."""
        for vc, spec in self.clusters:
            if vc.status == "queued":
                return f"virtual cluster {vc.vc_id} is not admitted yet (its minimum is the demand)"
            if not spec.grows:
                return f"virtual cluster {vc.vc_id} does not grow (fixed-size nodes and flexible minimum only)"
        if self.vc.parent:
            return (
                f"virtual cluster {self.vc.vc_id} grows only on nodes virtual cluster {self.vc.parent} holds "
                "already (a new node is none of them)"
            )
        return ""

    def short(self, need: Resources) -> str:
        """Why the chain may not borrow all of `need` more for a child's admission ("" when it may)."""
        room = self.headroom(need, admission=True)
        if all(amount <= room[name] + EPSILON for name, amount in need.items()):
            return ""
        return self._limit(room, need)

    def _limit(self, room: Resources, need: Resources) -> str:
        shown = ", ".join(
            f"{name} {format_amount(name, room[name])}" for name in sorted(need) if room[name] != math.inf
        )
        return f"virtual cluster {self.vc.vc_id} may borrow only {shown} more (its flexible maximum)"

    def cap(self, work_ids: list[str], need: Resources) -> tuple[list[str], str]:
        """The work that still fits within the clusters' maximum (the demand), and why the rest waits ("" if none)."""
        blocked = self.blocked()
        if blocked:
            return [], blocked
        within = [work_id for work_id in work_ids if work_id in self.within()]
        if len(within) == len(work_ids):
            return work_ids, ""
        reason = self._limit(self.headroom(need), need)
        return within, f"{reason}: {len(work_ids) - len(within)} of {len(work_ids)} are not demand"

    def within(self) -> set[str]:
        """The pending actors of the cluster whose growth its maximum allows, given out in the scheduler's queue
        order (`quota_order`: priority, nominated actors first, then arrival; the quota nominated actors hold is
        kept from those after them), as the scheduler will borrow for them (`stuck` ones take none of it): an actor
        that does not fit what is left is skipped and the next one may still fit."""
        if self._within is None:
            scope, root = self.vc.scope, self.root
            actors = [scope.actors[work_id] for work_id in scope.pending if work_id in scope.actors]
            actors.sort(
                key=lambda actor: quota_order(root, actor.request.actor_id, actor.request.priority, actor.arrival)
            )
            room: Resources = {}
            self._within = set()
            for actor in actors:
                need = {name: float(amount) for name, amount in actor.request.resources.items() if amount > 0}
                for name in need:
                    if name not in room:
                        room[name] = self.headroom({name: 0.0})[name]
                if all(amount <= room[name] + EPSILON for name, amount in need.items()):
                    self._within.add(actor.request.actor_id)
                    if actor.request.actor_id in self.stuck:
                        continue
                    for name, amount in need.items():
                        room[name] -= amount
        return self._within

    def refusal(self, node: NodeState) -> str | None:
        """Why no cluster of the chain may carve a flexible node out of `node` (a taint it does not tolerate)."""
        for vc_id, taints in self._filters:
            reason = taints.check(node)
            if reason is not None:
                return f"{reason} (virtual cluster {vc_id}'s tolerations)"
        return None

    def stand_in(self, node: NodeState) -> NodeState | None:
        """The flexible node `vc` would have on `node` (its labels and taints), or None when it may not use it."""
        if node.node_id not in self._stand_ins:
            found = None
            if self.refusal(node) is None:
                vnode_id = flexible_id(self.vc.vc_id, node.node_id)
                labels = vnode_labels(node.labels, VNode(vnode_id, node.node_id, {}, -1, {}), self.vc.vc_id)
                found = NodeState(vnode_id, node.hash_key, node.total, labels)
                found.set_taints(list(node.taints))
            self._stand_ins[node.node_id] = found
        return self._stand_ins[node.node_id]


def _room(spec: CompiledSpec, held: Resources, name: str) -> float:
    """How much more of `name` a cluster's maximum allows beyond `held`."""
    return spec.headroom(name, held.get(name, 0.0))
