"""Validate a virtual-cluster spec and compile it once: fixed-size groups, flexible min and max, tolerations (pure)."""

from __future__ import annotations

import math
from typing import Final

from schemas import (
    FixedSizeNode,
    PlacementGroupRequest,
    VirtualCluster,
    VirtualClusterDestroyRequested,
    VirtualClusterRequested,
)
from services.core.amounts import format_amount
from services.core.errors import LabelError, NotFoundError, RejectedError, rule_error
from services.core.labels import validate_label_value, validate_labels
from services.core.request import (
    CompiledGroup,
    check_id,
    check_resources,
    compile_tolerations,
)
from services.core.selectors import Tolerations
from services.core.state.model import EPSILON, Resources
from services.core.state.view import VTree

VNODE_POLICIES: Final = ("PACK", "SPREAD", "STRICT_SPREAD")
UNBOUNDED: Final = None
_INFINITY: Final = math.inf


class CompiledSpec:
    """A validated spec: one synthetic placement group per fixed-size group, and the flexible range."""

    __slots__ = ("fixed", "groups", "maximum", "minimum", "spec", "tolerations", "vc_id")

    def __init__(self, vc_id: str, spec: VirtualCluster, rare: tuple[str, ...]) -> None:
        check_id("vc_id", vc_id)
        try:
            validate_label_value("vc_id", vc_id)
        except LabelError as error:
            raise RejectedError(f"vc_id {vc_id!r}: is used as a label value: {error}") from error
        if not isinstance(spec, VirtualCluster):
            raise rule_error("spec", spec, "must be a VirtualCluster")
        self.vc_id, self.spec = vc_id, spec
        self.minimum = check_resources("flexible_resource_min", spec.flexible_resource_min)
        given_max = check_resources("flexible_resource_max", spec.flexible_resource_max)
        self.fixed: list[FixedSizeNode] = []
        self.groups: list[tuple[int, CompiledGroup]] = []
        everything: Resources = {**self.minimum, **given_max}
        for index, group in enumerate(spec.fixed_size_nodes):
            self._group(index, group.nodes, group.scheduling_policy, rare)
        for node in self.fixed:
            for name, amount in node.resources.items():
                everything[name] = max(everything.get(name, 0.0), amount)
        self.maximum: dict[str, float | None] = self._maximum(given_max, spec)
        self.tolerations: Tolerations = compile_tolerations("tolerations", spec.tolerations, everything, rare, {})

    def _group(self, index: int, nodes: object, policy: object, rare: tuple[str, ...]) -> None:
        field = f"fixed_size_nodes[{index}]"
        if policy not in VNODE_POLICIES:
            raise rule_error(f"{field}.scheduling_policy", policy, f"must be one of {', '.join(VNODE_POLICIES)}")
        if not isinstance(nodes, list) or not nodes:
            raise rule_error(f"{field}.nodes", nodes, "must be a non-empty list of FixedSizeNode")
        first_slot = len(self.fixed)
        for position, node in enumerate(nodes):
            where = f"{field}.nodes[{position}]"
            if not isinstance(node, FixedSizeNode):
                raise rule_error(where, node, "must be a FixedSizeNode")
            resources = check_resources(f"{where}.resources", node.resources)
            if not resources:
                raise rule_error(f"{where}.resources", node.resources, "must ask for some resource")
            try:
                validate_labels(node.labels)
            except LabelError as error:
                raise LabelError(f"{where}.labels: {error}") from error
            self.fixed.append(FixedSizeNode(resources, dict(node.labels)))
        request = PlacementGroupRequest(
            pg_id=f"{self.vc_id}-group-{index}",
            bundles=[node.resources for node in self.fixed[first_slot:]],
            strategy=str(policy),  # type: ignore[arg-type]
            tolerations=self.spec.tolerations,
        )
        self.groups.append((first_slot, CompiledGroup(request, rare)))

    def _maximum(self, given: Resources, spec: VirtualCluster) -> dict[str, float | None]:
        """Per resource: the given max, else the min when there are fixed-size nodes, else unbounded."""
        maximum: dict[str, float | None] = {}
        for name in {*self.minimum, *given, *(name for node in self.fixed for name in node.resources)}:
            if name in spec.flexible_resource_max:
                maximum[name] = given.get(name, 0.0)
            elif self.fixed:
                maximum[name] = self.minimum.get(name, 0.0)
            else:
                maximum[name] = UNBOUNDED
            bound = maximum[name]
            if bound is not None and bound + EPSILON < self.minimum.get(name, 0.0):
                raise rule_error(
                    f"flexible_resource_max[{name!r}]",
                    spec.flexible_resource_max.get(name),
                    f"must be >= flexible_resource_min[{name!r}] ({format_amount(name, self.minimum[name])})",
                )
        return maximum

    def headroom(self, name: str, held: float) -> float:
        """How much more of `name` the flexible nodes may hold beyond `held`."""
        bound = self.maximum.get(name, UNBOUNDED if not self.fixed else 0.0)
        if bound is None:
            return _INFINITY
        left = bound - held
        return left if left > 0.0 else 0.0

    @property
    def grows(self) -> bool:
        """Whether the flexible nodes can ever hold more than the minimum."""
        return not self.fixed or any(
            bound is None or bound > self.minimum.get(name, 0.0) + EPSILON for name, bound in self.maximum.items()
        )


def check_parent(tree: VTree, vc_id: str, parent: str | None) -> str:
    """The parent's id ("" for the root): it must be a live cluster, and `vc_id` must be new."""
    if vc_id in tree.clusters:
        raise RejectedError(f"vc_id {vc_id!r}: a virtual cluster with this id already exists with another spec")
    if parent is None or parent == "":
        return ""
    check_id("parent", parent)
    found = tree.clusters.get(parent)
    if found is None:
        raise NotFoundError(f"parent {parent!r}: no such virtual cluster")
    if found.destroying:
        raise RejectedError(f"parent {parent!r}: the virtual cluster is being destroyed")
    return parent


def check_priority(priority: object) -> int:
    """A priority is an integer (higher is admitted first)."""
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise rule_error("priority", priority, "must be an integer")
    return priority


SHOWN_WORK: Final = 5
"""Live work ids a refused destroy names before summing up the rest."""


def requested(
    tree: VTree, vc_id: str, spec: VirtualCluster, parent: str | None, priority: int, rare: tuple[str, ...]
) -> VirtualClusterRequested | None:
    """The event a create writes, or None when the same cluster (spec, parent, priority) is already there.

    Raises a `RejectedError` naming what is wrong: a bad spec, an unknown parent, the id taken by another spec.
    """
    existing = tree.clusters.get(vc_id)
    if existing is not None and (existing.spec, existing.parent, existing.priority) == (spec, parent or "", priority):
        if existing.destroying:
            raise RejectedError(f"vc_id {vc_id!r}: the virtual cluster is being destroyed")
        return None
    parent_id = check_parent(tree, vc_id, parent)
    CompiledSpec(vc_id, spec, rare)
    return VirtualClusterRequested(vc_id=vc_id, spec=spec, parent=parent_id, priority=check_priority(priority))


def destroy_requested(tree: VTree, vc_id: str, force: bool) -> VirtualClusterDestroyRequested:
    """The event a destroy writes; refused (`RejectedError` naming the work) while there is live work and no force."""
    if vc_id not in tree.clusters:
        raise NotFoundError(f"vc_id {vc_id!r}: no such virtual cluster")
    live = sorted(work_id for vc in tree.subtree(vc_id) for work_id in vc.live_work())
    if live and not force:
        shown = ", ".join(live[:SHOWN_WORK])
        if len(live) > SHOWN_WORK:
            shown += f" and {len(live) - SHOWN_WORK} more"
        raise RejectedError(
            f"vc_id {vc_id!r}: still has live work ({shown}); stop it first or destroy it with --force (`force: true` "
            "in the API)"
        )
    return VirtualClusterDestroyRequested(vc_id=vc_id, force=force)
