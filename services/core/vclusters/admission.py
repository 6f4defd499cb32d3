"""Admission of virtual clusters: reserve the whole minimum or nothing, the queue order and its anti-starvation rule.

A cluster's minimum is every fixed-size node (each group placed PACK / SPREAD / STRICT_SPREAD over the parent's
nodes, as a placement group would be) plus the flexible minimum, carved from the nodes of the parent's scope.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from schemas import Explanation, VirtualNodeGrant
from services.core.amounts import format_amounts
from services.core.decide.group import decide_group
from services.core.plugins.taints import TaintFilter
from services.core.prng import SplitMix64
from services.core.state import ClusterView, NodeState, Resources, fits
from services.core.state.model import EPSILON
from services.core.state.nominations import unheld
from services.core.state.tree import fixed_id, flexible_id, positive
from services.core.state.view import VClusterState, parent_scope
from services.core.vclusters.spec import CompiledSpec

STARVATION_LIMIT: Final = 16
"""While a cluster waits, at most this many clusters that arrived after it are admitted ahead of it."""


class _Hold:
    """Resources tentatively taken from parent nodes during one attempt, given back at the end."""

    def __init__(self) -> None:
        self.held: list[tuple[NodeState, Resources]] = []

    def take(self, node: NodeState, amount: Resources) -> None:
        node.take(amount)
        self.held.append((node, amount))

    def release(self) -> None:
        for node, amount in reversed(self.held):
            node.give(amount)
        self.held.clear()


def reserve(
    root: ClusterView,
    vc: VClusterState,
    spec: CompiledSpec,
    prng: SplitMix64,
    sample: int,
    planned: dict[int, str] | None = None,
) -> list[VirtualNodeGrant] | str:
    """The virtual nodes still missing from the minimum (all of it for a queued cluster), or why not now.

    `planned` (slot -> parent node, what the parent grew for) places those fixed-size nodes instead of a decision.
    """
    if vc.parent and root.tree.clusters[vc.parent].status == "queued":
        return f"its parent virtual cluster {vc.parent} is not admitted yet"
    parent_view = parent_scope(root, vc)
    hold = _Hold()
    try:
        grants: list[VirtualNodeGrant] = []
        for index, (first_slot, group) in enumerate(spec.groups):
            slots = range(first_slot, first_slot + len(group.request.bundles))
            kept = {
                slot - first_slot: vc.vnodes[fixed_id(vc.vc_id, slot)].parent_node
                for slot in slots
                if fixed_id(vc.vc_id, slot) in vc.vnodes
            }
            if len(kept) == len(slots):
                continue
            chosen = [kept.get(slot - first_slot) or (planned or {}).get(slot, "") for slot in slots]
            if not all(chosen):
                decision = decide_group(parent_view, group, prng, sample, kept)
                if isinstance(decision, Explanation):
                    return f"fixed_size_nodes[{index}]: {decision.message}"
                chosen = decision[1]
            for offset, node_id in enumerate(chosen):
                if offset in kept:
                    continue
                fixed = spec.fixed[first_slot + offset]
                hold.take(parent_view.nodes[node_id], fixed.resources)
                grants.append(
                    VirtualNodeGrant(
                        fixed_id(vc.vc_id, first_slot + offset),
                        node_id,
                        fixed.resources,
                        fixed.labels,
                        first_slot + offset,
                    )
                )
        flexible = _carve_minimum(parent_view, vc, spec, prng)
        if isinstance(flexible, str):
            return flexible
        return grants + flexible
    finally:
        hold.release()


def missing_minimum(vc: VClusterState, spec: CompiledSpec) -> Resources:
    """The part of the flexible minimum no live flexible node holds (lost with a dead node)."""
    held: Resources = {}
    for vnode in vc.vnodes.values():
        for name, amount in vnode.base.items():
            held[name] = held.get(name, 0.0) + amount
    return positive({name: amount - held.get(name, 0.0) for name, amount in spec.minimum.items()})


def admission_need(vc: VClusterState, spec: CompiledSpec) -> Resources:
    """What admitting (or repairing) `vc` still takes from its parent: missing fixed-size nodes and minimum."""
    need = dict(missing_minimum(vc, spec))
    for slot, fixed in enumerate(spec.fixed):
        if fixed_id(vc.vc_id, slot) not in vc.vnodes:
            for name, amount in fixed.resources.items():
                need[name] = need.get(name, 0.0) + amount
    return need


def _carve_minimum(
    parent_view: ClusterView, vc: VClusterState, spec: CompiledSpec, prng: SplitMix64
) -> list[VirtualNodeGrant] | str:
    """The flexible minimum still missing: on one parent node that can hold it all (from a seeded start), else
    carved from as few parent nodes as possible (most free first); room a root node holds for nominated work is
    not carved."""
    remaining = missing_minimum(vc, spec)
    if not remaining:
        return []
    tolerated = TaintFilter(spec.tolerations)
    holding = {vnode.parent_node for vnode in vc.vnodes.values() if vnode.flexible}
    ids = parent_view.ring.ids
    start = prng.below(len(ids)) if ids else 0
    for step in range(len(ids)):
        node = parent_view.nodes[ids[(start + step) % len(ids)]]
        if fits(unheld(parent_view, node), remaining) and node.node_id not in holding and tolerated.check(node) is None:
            return [VirtualNodeGrant(flexible_id(vc.vc_id, node.node_id), node.node_id, remaining)]
    nodes = [parent_view.nodes[node_id] for node_id in ids if node_id not in holding]
    usable = [node for node in nodes if tolerated.check(node) is None]
    free = {node.node_id: unheld(parent_view, node) for node in usable}
    usable.sort(key=lambda node: -_share_size(free[node.node_id], remaining))  # fewest, largest pieces first
    grants = []
    for node in usable:
        share = positive({name: min(free[node.node_id].get(name, 0.0), need) for name, need in remaining.items()})
        if not share:
            continue
        grants.append(VirtualNodeGrant(flexible_id(vc.vc_id, node.node_id), node.node_id, share))
        remaining = positive({name: need - share.get(name, 0.0) for name, need in remaining.items()})
        if not remaining:
            return grants
    short = format_amounts(dict(sorted(remaining.items())), joiner=" ")
    where = f"virtual cluster {vc.parent}" if vc.parent else "the cluster"
    return f"the flexible minimum is {short} more than {where} has free on nodes it may use"


def _share_size(free: Resources, remaining: Resources) -> float:
    """How much of the remaining minimum a node can hold, as a fraction summed over resources."""
    return sum(min(max(free.get(name, 0.0), 0.0), need) / need for name, need in remaining.items())


class FreeCapacity:
    """What each parent has free in total on the nodes a spec may use: a quick bound before a full attempt."""

    def __init__(self, root: ClusterView, specs: Callable[[str], CompiledSpec]) -> None:
        self.root = root
        self.specs = specs
        self._free: dict[tuple[str, str], Resources] = {}

    def may_hold(self, vc: VClusterState, spec: CompiledSpec) -> bool:
        """False when the parent's free resources, summed over its usable nodes, cannot cover `vc`'s minimum.

        A parent cluster that can still grow always may (its growth is planned by the full attempt).
        """
        parent = self.root.tree.clusters.get(vc.parent)
        if parent is not None and parent.status != "queued" and self.specs(parent.vc_id).grows:
            return True
        key = (vc.parent, repr(sorted(spec.tolerations.by_key.items(), key=lambda item: item[0])))
        free = self._free.get(key)
        if free is None:
            tolerated = TaintFilter(spec.tolerations)
            free = {}
            for node in parent_scope(self.root, vc).nodes.values():
                if tolerated.check(node) is None:
                    for name, amount in node.free.items():
                        free[name] = free.get(name, 0.0) + amount
            self._free[key] = free
        return all(free.get(name, 0.0) + EPSILON >= amount for name, amount in admission_need(vc, spec).items())

    def forget(self) -> None:
        """Resources were taken: sum again on the next question."""
        self._free.clear()


def blocker(root: ClusterView, vc: VClusterState) -> VClusterState | None:
    """An earlier waiting cluster that later ones may no longer pass (it was overtaken too often)."""
    for waiting in root.tree.queue(vc.parent):
        if waiting.arrival < vc.arrival and waiting.overtaken >= STARVATION_LIMIT:
            return waiting
    return None


def queue_position(root: ClusterView, vc: VClusterState) -> tuple[int, int]:
    """(position, length) of `vc` in its parent's admission queue; position 1 is the head."""
    queue = root.tree.queue(vc.parent)
    ids = [waiting.vc_id for waiting in queue]
    return (ids.index(vc.vc_id) + 1 if vc.vc_id in ids else 0), len(ids)


def queued_message(root: ClusterView, vc: VClusterState, reason: str) -> str:
    """Why `vc` waits (`reason`), with its place in the queue."""
    position, length = queue_position(root, vc)
    where = f"virtual cluster {vc.parent}" if vc.parent else "the root cluster"
    reason = reason or vc.reason or "not tried yet"
    place = f"position {position} of {length}"
    return f"virtual cluster {vc.vc_id} waits in the admission queue of {where} ({place}): {reason}"


def degraded_message(vc: VClusterState, spec: CompiledSpec) -> str:
    """What a degraded cluster lacks, or "" when it has its whole minimum."""
    lost = [fixed_id(vc.vc_id, slot) for slot in range(len(spec.fixed)) if fixed_id(vc.vc_id, slot) not in vc.vnodes]
    missing = missing_minimum(vc, spec)
    parts = []
    if lost:
        parts.append(f"fixed-size node(s) {', '.join(lost)} lost and not reserved again yet")
    if missing:
        parts.append("flexible minimum short by " + format_amounts(missing, joiner=" "))
    return "; ".join(parts)
