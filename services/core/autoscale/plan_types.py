"""What the planner is given besides the view (`Fleet`) and what it answers (`ScalePlan`): plain values (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from schemas import SelectorSpec
from services.core.amounts import format_amounts
from services.core.selectors import selector_text
from services.core.state import Resources

DemandKind = Literal["actor", "placement_group", "virtual_cluster"]


@dataclass(frozen=True)
class Fleet:
    """The nodes the autoscaler already has, per node type."""

    running: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Type -> ids of registered nodes it launched (they carry `corral.io/node-type`)."""
    launching: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Type -> launch ids asked for and not registered yet (the planner counts them as empty nodes of the type)."""
    backed_off: frozenset[str] = frozenset()
    """Types whose last launch failed and that wait before the next try (the planner skips them)."""

    def running_count(self, node_type: str) -> int:
        """How many registered nodes of `node_type` the autoscaler has."""
        return len(self.running.get(node_type, ()))

    def launching_count(self, node_type: str) -> int:
        """How many launches of `node_type` have not registered yet."""
        return len(self.launching.get(node_type, ()))


@dataclass(frozen=True)
class Launch:
    """Launch `count` nodes of `node_type` for the work `work_ids` (none for `min_workers`), and why."""

    node_type: str
    count: int
    work_ids: tuple[str, ...]
    reason: str
    per_node: tuple[tuple[str, ...], ...] = ()
    """The work each of the `count` nodes is for (empty for a node launched for `min_workers`)."""
    nominated: tuple[Mapping[str, Resources], ...] = ()
    """Per node, the resources the plan put there for each piece of work (the room its node holds for it)."""


@dataclass(frozen=True)
class DemandGroup:
    """Pending work alike in shape, label selectors (fallbacks included), tolerations and group strategy.

    `shape` has one resource map per bundle (one for an actor); `selectors` one entry per option (the primary,
    then each fallback), each with one selector per bundle. `unmet` counts what the planner found no room for on
    existing nodes: actors, or whole placement groups / virtual clusters (gangs).
    """

    kind: DemandKind
    shape: tuple[Resources, ...]
    selectors: tuple[tuple[SelectorSpec, ...], ...]
    tolerations: SelectorSpec
    strategy: str
    work_ids: tuple[str, ...]
    unmet: int
    served_by: tuple[str, ...]
    """The node types that could host it, in the order the planner prefers them."""
    reasons: Mapping[str, str]
    """Node type -> why it cannot host it ("has untolerated taint {gpu_node: true}", "lacks GPU")."""
    launching: int = 0
    """Of `unmet`: how many have room on nodes launching or launched by this plan."""
    waiting: str = ""
    """Why the rest of `unmet` gets no node ("" when all of it has room)."""

    @property
    def count(self) -> int:
        """How many pending actors, placement groups or virtual clusters the group holds."""
        return len(self.work_ids)

    def describe(self) -> str:
        """One line, like `ray status`'s demand: `3 x actor {CPU: 1, GPU: 1} selector tier=db: launching gpu-a100`."""
        shape = " + ".join("{" + format_amounts(bundle, joiner=": ") + "}" for bundle in self.shape)
        parts = [f"{self.count} x {self.kind} {shape}"]
        if self.strategy:
            parts.append(self.strategy)
        if any(any(bundle) for bundle in self.selectors[0]):
            parts.append("selector " + " + ".join(selector_text(bundle) or "-" for bundle in self.selectors[0]))
        if len(self.selectors) > 1:
            parts.append(f"{len(self.selectors) - 1} fallback(s)")
        if self.tolerations:
            parts.append(f"tolerates {selector_text(self.tolerations)}")
        return " ".join(parts) + f": {self.outcome()}"

    def outcome(self) -> str:
        """What the autoscaler does about the group, in words."""
        if not self.unmet:
            return self.waiting or "fits on existing nodes"
        if not self.served_by:
            return "no node type can host it: " + "; ".join(f"{t} {why}" for t, why in self.reasons.items())
        done = f"launching nodes hold {self.launching} of {self.unmet}" if self.launching else ""
        return "; ".join(part for part in (done, self.waiting) if part) or "waiting"


@dataclass(frozen=True)
class TypeStatus:
    """A node type's counts: its bounds, what runs, what is launching, and what this plan adds."""

    name: str
    min_workers: int
    max_workers: int
    running: int
    launching: int
    planned: int


@dataclass(frozen=True)
class ScalePlan:
    """One round's answer: the launches to ask for, the demand (grouped, explained) and each type's counts."""

    launches: tuple[Launch, ...]
    demand: tuple[DemandGroup, ...]
    types: tuple[TypeStatus, ...]
    held_by: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Work id -> the launches (asked for in earlier rounds, not registered yet) whose nodes the plan counts it on."""
    counted_on: Mapping[str, Mapping[str, Resources]] = field(default_factory=dict)
    """Launch id (asked for in an earlier round, not registered yet) -> the work the plan counts on its node, with
    the resources it put there (what that node is to be nominated for, as `Launch.nominated`)."""
    existing: Mapping[str, Mapping[str, Resources]] = field(default_factory=dict)
    """Existing node id -> the work (placement groups mixing existing free room and new nodes) the plan put there,
    with the resources it put there (what that node is to hold for it, as `Launch.existing`)."""

    def group_of(self, work_id: str) -> DemandGroup | None:
        """The demand group holding a pending actor, placement group or virtual cluster (None: not demand)."""
        return next((group for group in self.demand if work_id in group.work_ids), None)

    def about(self, work_id: str) -> str:
        """What the autoscaler does about one piece of pending work, for `corral why` ("" when nothing)."""
        group = self.group_of(work_id)
        if group is None:
            return ""
        launches = [
            f"{sum(1 for node in one.per_node if work_id in node) or one.count} {one.node_type}"
            for one in self.launches
            if work_id in one.work_ids
        ]
        if launches:
            return f"autoscaler: launching {', '.join(launches)} for this"
        held = self.held_by.get(work_id)
        if held:
            return f"autoscaler: waiting for launch {', '.join(held)} to register"
        return f"autoscaler: {group.outcome()}"
