"""Gang demand: placement groups and queued virtual clusters, placed all or nothing (pure).

A gang has options (a placement group's primary bundles, then each fallback); an option is a list of parts (a
placement group has one; a queued virtual cluster one per fixed-size group plus one for its flexible minimum),
each with a strategy and pieces (bundles) judged by the registry's bundle rules, exactly as `decide.group` builds
its plans: STRICT_PACK puts the summed bundles on one node, STRICT_SPREAD every bundle on a node of its own.
A unit that does not fit wholly on existing nodes' free room is placed piece by piece on existing free room,
launching or planned nodes and new nodes together (so once some of a group's launched nodes registered, the rest
still launching, nothing is launched again), all or nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from schemas import PlacementGroupRequest, SelectorSpec
from services.core.autoscale.bins import Bin, Bins, FreeRoom, FreeRooms
from services.core.autoscale.chain import Chain
from services.core.autoscale.demand import Demand, Verdicts, type_reason
from services.core.autoscale.plan_types import DemandKind
from services.core.framework.pipeline import Plan
from services.core.framework.registry import prepare, registered
from services.core.request import CompiledGroup, GroupOption
from services.core.selectors import LabelSelector
from services.core.state import ClusterView, NodeState, Resources
from services.core.state.view import VClusterState
from services.core.vclusters.admission import admission_need
from services.core.vclusters.spec import CompiledSpec

_BUNDLE_RULES: Final = tuple(rule.bundle for rule in registered() if rule.bundle is not None)


class Piece:
    """One bundle (or a STRICT_PACK group's summed bundles) and the scheduler's plan for it."""

    __slots__ = ("need", "plan", "types")

    def __init__(self, view: ClusterView, group: CompiledGroup, need: Resources, selector: LabelSelector) -> None:
        self.need = need
        filters, scorers = prepare(_BUNDLE_RULES, view, group, need, selector)
        self.plan = Plan(need, filters, scorers)
        self.types: tuple[str, ...] = ()
        """The node types whose empty node passes every rule of the piece, cheapest first (set by `judge`)."""


class Part:
    """Pieces placed under one strategy: STRICT_SPREAD keeps them on distinct nodes."""

    __slots__ = ("distinct", "pieces")

    def __init__(self, view: ClusterView, group: CompiledGroup, option: GroupOption) -> None:
        self.distinct = group.strategy == "STRICT_SPREAD"
        if group.strategy == "STRICT_PACK":
            need: Resources = {}
            for bundle in option.bundles:
                for name, amount in bundle.items():
                    need[name] = need.get(name, 0.0) + amount
            selector = LabelSelector(tuple(term for s in option.selectors for term in s.terms))
            self.pieces = [Piece(view, group, need, selector)]
        else:
            pieces = [Piece(view, group, b, s) for b, s in zip(option.bundles, option.selectors, strict=True)]
            self.pieces = sorted(pieces, key=lambda piece: -sum(piece.need.values()))  # hardest first


class GangDemand(Demand):
    """Identical pending gangs: each unit (a placement group or a virtual cluster) is placed whole or not at all,
    its pieces on existing nodes' free room, launching or planned nodes and new nodes together."""

    def __init__(self, key: bytes, scope: ClusterView, priority: int, options: list[list[Part]]) -> None:
        super().__init__(key, scope, priority)
        self.options = options
        self.room: FreeRoom | None = None
        """The free room of the existing nodes of its scope (set by `take_free`)."""
        self.on_existing: dict[str, list[tuple[NodeState, Resources]]] = {}
        """Of the units placed partly on existing nodes' free room and partly on launching or new nodes: the existing
        nodes and the room taken on each (the replay places them again, on these nodes and the bins)."""

    @property
    def served_at(self) -> int | None:
        """The priority the free room is served at (held room of lower-priority work is free to it)."""
        return self.priority

    def rejects(self, plan: Plan, node: NodeState) -> str | None:
        """Why a piece judged by `plan` may not go on `node`, None when it may."""
        return plan.rejects(node)

    def take_free(self, rooms: FreeRooms) -> list[str]:
        return self._take_free(rooms, self.work_ids)

    def _take_free(self, rooms: FreeRooms, work_ids: list[str]) -> list[str]:
        self.room = rooms.of(self.scope)
        work_ids = self.room.give_held(work_ids, self.served_at)
        for index, work_id in enumerate(work_ids):
            if not any(_place(self, option, work_id, None) for option in self.options):
                if self.scope.scope_id:  # a virtual cluster grows for actors only: new nodes cannot help
                    self.capped = (
                        f"placement groups in virtual cluster {self.scope.scope_id} reserve only its nodes "
                        "(it grows for actors, not for placement groups)"
                    )
                    return []
                return work_ids[index:]  # free room only shrinks: the identical rest cannot fit either
        return []

    def judge(self, bins: Bins) -> Verdicts:
        tiers: list[tuple[str, ...]] = []
        reasons: dict[str, str] = {}
        for index, option in enumerate(self.options):
            for part in option:
                for piece in part.pieces:
                    passing = []
                    for name, template in bins.templates.items():
                        reason = self.rejects(piece.plan, template)
                        if reason is None:
                            passing.append(name)
                        elif index == 0:
                            reasons.setdefault(name, type_reason(template, reason))
                    piece.types = tuple(sorted(passing, key=lambda name: (bins.cost(name), name)))
            servable = all(piece.types for part in option for piece in part.pieces)
            tiers.append(tuple(dict.fromkeys(n for p in option for c in p.pieces for n in c.types)) if servable else ())
        verdicts = Verdicts(tiers)
        served = set(verdicts.served)
        verdicts.reasons = {name: why for name, why in reasons.items() if name not in served}
        if not served and not verdicts.reasons:
            verdicts.reasons = {"every type": "can host some bundles, but no type can host the others"}
        return verdicts

    def place(self, bins: Bins, verdicts: Verdicts, left: list[str]) -> tuple[list[str], str]:
        for index, work_id in enumerate(left):
            tried = (option for option, tier in zip(self.options, verdicts.tiers, strict=True) if tier)
            if not any(_place(self, option, work_id, bins) for option in tried):
                return left[index:], _why_full(bins, verdicts.served)
        return [], ""


def _place(gang: GangDemand, option: list[Part], work_id: str, bins: Bins | None) -> bool:
    """Put every piece of the option (all or nothing) on existing nodes' free room first, then (given `bins`) on
    launching or planned nodes, then on new nodes; a unit using both existing and other nodes goes in the gang's
    `on_existing`."""
    assert gang.room is not None, "take_free comes first"
    unit = _Unit(work_id, gang.room, bins, gang.rejects)
    for part in option:
        used: set[str] = set()
        for piece in part.pieces:
            node_id = unit.put(piece, used if part.distinct else set())
            if node_id is None:
                unit.undo()
                return False
            used.add(node_id)
    if unit.taken and unit.loaded:
        gang.on_existing[work_id] = unit.taken
    return True


class _Unit:
    """One gang being placed: where its pieces went so far, so that it can be taken back whole."""

    def __init__(
        self, work_id: str, room: FreeRoom, bins: Bins | None, rejects: Callable[[Plan, NodeState], str | None]
    ) -> None:
        self.work_id, self.room, self.bins, self.rejects = work_id, room, bins, rejects
        self.taken: list[tuple[NodeState, Resources]] = []
        self.loaded: list[tuple[Bin, Resources]] = []
        self.launched: list[Bin] = []

    def put(self, piece: Piece, avoid: set[str]) -> str | None:
        """Put the piece on a node not in `avoid`: existing free room, else a launching or planned node, else a new
        node of its cheapest type that may launch; the node's id (None: no node takes it)."""
        need = piece.need
        node = next(
            (
                n
                for n in self.room.candidates(need, self.work_id)
                if n.node_id not in avoid and self.rejects(piece.plan, n) is None
            ),
            None,
        )
        if node is not None:
            self.room.take(node, need)
            self.taken.append((node, need))
            return node.node_id
        if self.bins is None:
            return None
        target = next((t for t in self.bins.fitting(piece.types, need) if t.node.node_id not in avoid), None)
        if target is None:
            chosen = self.bins.cheapest(piece.types, need, 1)
            if chosen is None:
                return None
            target = self.bins.launch(chosen)
            self.launched.append(target)
        target.load(self.work_id, need)
        self.loaded.append((target, need))
        return target.node.node_id

    def undo(self) -> None:
        """Take back every piece put so far."""
        for node, amount in reversed(self.taken):
            self.room.take(node, amount, -1)
        for target, amount in reversed(self.loaded):
            target.unload(self.work_id, amount)
        for added in reversed(self.launched):
            assert self.bins is not None
            self.bins.undo(added)


def _why_full(bins: Bins, served: tuple[str, ...]) -> str:
    return "; ".join(dict.fromkeys(bins.why_full(name) for name in served)) or "no node type can host every bundle"


class GroupDemand(GangDemand):
    """Identical pending placement groups."""

    kind: DemandKind = "placement_group"

    def __init__(self, key: bytes, scope: ClusterView, work: CompiledGroup) -> None:
        options = [[Part(scope, work, option)] for option in work.options]
        super().__init__(key, scope, work.request.priority, options)
        self.work = work
        request = work.request
        self.shape = tuple(dict(bundle) for bundle in work.options[0].bundles)
        self.selectors = tuple(_bundle_selectors(request, index) for index in range(len(work.options)))
        self.tolerations = request.tolerations
        self.strategy = request.strategy


def _bundle_selectors(request: PlacementGroupRequest, index: int) -> tuple[SelectorSpec, ...]:
    if index == 0:
        bundles, selectors = request.bundles, request.bundle_label_selector
    else:
        option = request.fallback_strategy[index - 1]
        bundles = option.get("bundles", request.bundles)
        selectors = option.get("bundle_label_selector", [])
    return tuple(selectors) if selectors else tuple({} for _ in bundles)


class QueuedClusterDemand(GangDemand):
    """A virtual cluster waiting for its minimum: its fixed-size nodes (each group under its policy) and its flexible
    minimum, as one gang. The minimum is planned as one piece on one node (admission may carve it from several).

    A cluster queued under another (`chain`: the parent and its ancestors) waits for room in its parent, which
    grows onto nodes of the root for it: its pieces are judged on the parent's flexible node on each node (the
    chain's tolerations and the node's labels), and it is demand only while the parent is a top-level cluster that
    may borrow all of it (every ancestor's maximum allows), else not demand with the reason.
    """

    kind: DemandKind = "virtual_cluster"

    def __init__(
        self,
        key: bytes,
        root: ClusterView,
        vc: VClusterState,
        spec: CompiledSpec,
        rare: tuple[str, ...],
        chain: Chain | None = None,
    ) -> None:
        parts = [Part(root, group, group.options[0]) for _, group in spec.groups]
        if spec.minimum:
            request = PlacementGroupRequest(
                pg_id=f"{vc.vc_id}-minimum", bundles=[spec.minimum], tolerations=vc.spec.tolerations
            )
            minimum = CompiledGroup(request, rare)
            parts.append(Part(root, minimum, minimum.options[0]))
        super().__init__(key, root, vc.priority, [parts] if parts else [])
        self.shape = (*(dict(node.resources) for node in spec.fixed), *([dict(spec.minimum)] if spec.minimum else []))
        self.selectors = (tuple({} for _ in self.shape),)
        self.tolerations = vc.spec.tolerations
        self.strategy = "gang"
        self.chain = chain
        self.need = admission_need(vc, spec)
        self.queued: list[str] = []
        """The clusters of this group in the order admission tries them."""
        self.refused: dict[str, str] = {}
        """Clusters of this group the parent may not grow for, and why."""

    def queue(self, vc_id: str) -> None:
        """Count one more identical cluster (given in admission order)."""
        self.work_ids.append(vc_id)
        self.queued.append(vc_id)

    def judge(self, bins: Bins) -> Verdicts:
        """As any gang; under a parent, a cluster some type can host also claims the parent's growth it needs
        (before the parent's own work: admission comes first), and one the parent may not grow for is refused with
        the reason."""
        verdicts = super().judge(bins)
        chain = self.chain
        if chain is not None:
            for vc_id in self.queued:
                why = chain.claim(self.need) if verdicts.served else chain.blocked() or chain.short(self.need)
                if why:
                    self.refused[vc_id] = why
        return verdicts

    @property
    def served_at(self) -> int | None:
        """None: no held room is free to a virtual cluster's admission."""
        return None

    def rejects(self, plan: Plan, node: NodeState) -> str | None:
        if self.chain is None:
            return plan.rejects(node)
        seen = self.chain.stand_in(node)
        return self.chain.refusal(node) if seen is None else plan.rejects(seen)

    def take_free(self, rooms: FreeRooms) -> list[str]:
        self.capped = "; ".join(dict.fromkeys(self.refused.values()))
        return self._take_free(rooms, [work_id for work_id in self.work_ids if work_id not in self.refused])
