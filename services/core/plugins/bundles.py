"""Placement-group rules: an actor runs inside a reserved bundle; a bundle honours its bundle label selector (pure)."""

from __future__ import annotations

from typing import Final

from schemas import PlacementGroupSchedulingStrategy
from services.core.framework.plugin import RANK_BUNDLE, Filter
from services.core.framework.registry import Prepared, Rule, register
from services.core.framework.shortage import shortage
from services.core.plugins.node_labels import SelectorFilter
from services.core.request import CompiledGroup, CompiledRequest
from services.core.selectors import LabelSelector
from services.core.state import ClusterView, NodeState, Resources, fits

BUNDLE_SELECTOR_REASON: Final = "didn't match the bundle label selector"
BUNDLE_REASON: Final = "didn't match the placement group bundle"


class BundleTarget(Filter):
    """Only nodes holding a reserved bundle of the group (the given index, or any) whose size can hold the actor."""

    rank = RANK_BUNDLE

    def __init__(self, view: ClusterView, target: PlacementGroupSchedulingStrategy, need: Resources) -> None:
        self.need = need
        self.slots: dict[str, list[int]] = {}
        group = view.groups.get(target.placement_group_id)
        self.group = group
        self.placed = group is not None and group.status == "placed"
        if group is not None:
            for index, node_id in enumerate(group.bundle_nodes):
                if node_id is not None and target.bundle_index in (-1, index):
                    self.slots.setdefault(node_id, []).append(index)
        live = [node_id for node_id in self.slots if node_id in view.nodes]
        self.candidates = sorted(live, key=lambda node_id: view.nodes[node_id].hash_key)

    def check(self, node: NodeState) -> str | None:
        indices = self.slots.get(node.node_id)
        if not indices or self.group is None:
            return BUNDLE_REASON
        reasons = [shortage(self.group.bundles[i], self.need) for i in indices]
        return None if None in reasons else reasons[0]

    def slot(self, node: NodeState) -> int:
        """The bundle on `node` the actor goes into: the first with room now, else the first."""
        indices = self.slots.get(node.node_id, [])
        assert self.group is not None and indices, "slot() is asked only for nodes that passed check()"
        for index in indices:
            if fits(self.group.bundle_free[index], self.need):
                return index
        return indices[0]

    def room(self, node: NodeState) -> Resources:
        """What is free in the bundle the actor would use on this node."""
        if self.group is None or node.node_id not in self.slots:
            return {}
        return self.group.bundle_free[self.slot(node)]


def for_actor(view: ClusterView, work: CompiledRequest) -> Prepared:
    """An actor of a placement group goes into one of its reserved bundles."""
    target = work.group_target
    return () if target is None else (BundleTarget(view, target, work.resources),)


def for_bundle(view: ClusterView, _group: CompiledGroup, _need: Resources, selector: LabelSelector) -> Prepared:
    """A bundle honours its bundle label selector, when it has terms."""
    return (SelectorFilter(view, selector, BUNDLE_SELECTOR_REASON, RANK_BUNDLE),) if selector else ()


register(Rule(__name__, RANK_BUNDLE, actor=for_actor, bundle=for_bundle))
