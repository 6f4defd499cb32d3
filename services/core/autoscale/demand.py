"""Demand: pending work grouped (identical requests together) and judged against node types by the core's rules.

A group first takes free capacity on existing nodes (`take_free`), is then judged against each node type's
imagined empty node with the very plans the scheduler builds (`judge`), and what is left is put on launching
and new nodes (`place`; a gang's pieces there may mix in existing free room). Each kind of work (actor,
placement group, virtual cluster) is one class here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from schemas import ScheduleRequest, SelectorSpec
from services.core.amounts import format_amount
from services.core.autoscale.bins import Bin, Bins, FreeRoom, FreeRooms, copies_in
from services.core.autoscale.chain import Chain
from services.core.autoscale.plan_types import DemandKind
from services.core.decide.actor import actor_plans
from services.core.framework.pipeline import Plan
from services.core.request import CompiledRequest
from services.core.state import ClusterView, NodeState, Resources, fits, hard_anti_terms


def type_reason(template: NodeState, reason: str) -> str:
    """A rule's rejection of a node, said of a node type: "has untolerated taint {..}", "lacks GPU"."""
    if reason.startswith("Insufficient "):
        name = reason.removeprefix("Insufficient ")
        have = template.total.get(name, 0.0)
        return f"lacks {name}" if have <= 0 else f"has only {name} {format_amount(name, have)}"
    if reason.startswith("had "):
        return "has " + reason.removeprefix("had ")
    if reason.startswith("didn't "):
        return "doesn't " + reason.removeprefix("didn't ")
    return reason


@dataclass
class Verdicts:
    """Which node types can host a demand: per option (primary, then fallbacks) the types that pass, cheapest
    first; and for each type that passes none, why (the primary option's first failing rule)."""

    tiers: list[tuple[str, ...]]
    reasons: dict[str, str] = field(default_factory=dict)

    @property
    def served(self) -> tuple[str, ...]:
        """Every type that passes some option, in preference order."""
        return tuple(dict.fromkeys(name for tier in self.tiers for name in tier))


class Spread:
    """Hard anti-affinity of a request to its own labels: no two copies in one domain of each such topology."""

    def __init__(self, request: ScheduleRequest) -> None:
        self.topologies = sorted(
            {
                topology
                for key, values, topology in hard_anti_terms(request)
                if key in request.labels and (values is None or request.labels[key] in values)
            }
        )
        self.used: dict[str, set[str]] = {topology: set() for topology in self.topologies}

    @property
    def active(self) -> bool:
        """Whether copies repel each other."""
        return bool(self.topologies)

    def allows(self, node: NodeState) -> bool:
        """Whether a copy may go on `node` (no copy in its domains yet)."""
        for topology in self.topologies:
            domain = node.labels.get(topology)
            if domain is not None and domain in self.used[topology]:
                return False
        return True

    def use(self, node: NodeState) -> None:
        """A copy went on `node`."""
        for topology in self.topologies:
            domain = node.labels.get(topology)
            if domain is not None:
                self.used[topology].add(domain)


class Demand:
    """Identical pending work: its key, priority and ids, and what the demand section shows of it."""

    kind: DemandKind = "actor"

    def __init__(self, key: bytes, scope: ClusterView, priority: int) -> None:
        self.key = key
        self.scope = scope
        self.priority = priority
        self.work_ids: list[str] = []

    def order(self) -> tuple[int, float]:
        """Serve higher priority first, then the largest shapes (first-fit decreasing packs tightest); the planner
        breaks ties by how few types serve the work, then by key: never by arrival, so the packing does not
        depend on the order work came in."""
        return -self.priority, -sum(sum(bundle.values()) for bundle in self.shape)

    shape: tuple[Resources, ...] = ()
    selectors: tuple[tuple[SelectorSpec, ...], ...] = ()
    tolerations: SelectorSpec = {}  # noqa: RUF012 - read only
    strategy = ""
    capped = ""
    """Why part of the work is not demand (a virtual cluster's maximum), "" when all of it is."""

    def take_free(self, rooms: FreeRooms) -> list[str]:
        """Count what fits on existing nodes' free capacity as placed; the work ids left over (the demand)."""
        raise NotImplementedError

    def judge(self, bins: Bins) -> Verdicts:
        """Which node types could host this work, and why the others cannot."""
        raise NotImplementedError

    def place(self, bins: Bins, verdicts: Verdicts, left: list[str]) -> tuple[list[str], str]:
        """Put the left-over work on launching and new nodes; what still has no room, and why."""
        raise NotImplementedError


class ActorDemand(Demand):
    """Identical pending actors or tasks (one request, many ids), at the root or inside a virtual cluster."""

    def __init__(self, key: bytes, scope: ClusterView, work: CompiledRequest, chain: Chain | None = None) -> None:
        super().__init__(key, scope, work.request.priority)
        self.work = work
        request = work.request
        self.shape = (work.resources,)
        options = [request.label_selector, *(option["label_selector"] for option in request.fallback_strategy)]
        self.selectors = tuple((spec,) for spec in options)
        self.tolerations = request.tolerations
        self.spread = Spread(request)
        self.chain = chain
        """Inside a virtual cluster: the cluster and its ancestors, whose maximum and tolerations bound growth."""
        self._plans: list[Plan] | None = None

    @property
    def plans(self) -> list[Plan]:
        """The scheduler's plans for this request, one per option."""
        if self._plans is None:
            self._plans = actor_plans(self.scope, self.work)[0]
        return self._plans

    def _most(self, left: int) -> int:
        return 1 if self.spread.active else left

    def take_free(self, rooms: FreeRooms) -> list[str]:
        room = rooms.of(self.scope)
        if self.chain is None:
            return self._take(room, room.give_held(self.work_ids, self.priority), lambda node: node)
        left = self._take(room, list(self.work_ids), lambda node: node)
        if not left:
            return left
        left, self.capped = self.chain.cap(left, self.work.resources)
        host = rooms.of(self.chain.host_scope)
        return self._take(host, host.give_held(left, self.priority), self.chain.stand_in)

    def _take(self, room: FreeRoom, left: list[str], judged: Callable[[NodeState], NodeState | None]) -> list[str]:
        """Count copies on the free room of `room`'s nodes (each judged as `judged` makes it), each id on a node
        nominated for it first (as the scheduler tries them); the ids left."""
        need = self.work.resources
        for plan in self.plans:
            if room.holds_on:
                left = [work_id for work_id in left if not self._on_nominated(room, work_id, plan, judged)]
            for node in room.candidates(need):
                if not left:
                    return left
                seen = judged(node)
                if seen is None or plan.rejects(seen) is not None or not self.spread.allows(seen):
                    continue
                copies = copies_in(room.room(node), need, self._most(len(left)))
                if copies:
                    room.take(node, need, copies)
                    self.spread.use(seen)
                    left = left[copies:]
        return left

    def _on_nominated(
        self, room: FreeRoom, work_id: str, plan: Plan, judged: Callable[[NodeState], NodeState | None]
    ) -> bool:
        """Whether `work_id` is counted on a node nominated for it (taking its room there)."""
        need = self.work.resources
        for node in room.nominated(need, work_id):
            seen = judged(node)
            if seen is not None and plan.rejects(seen) is None and self.spread.allows(seen):
                room.take(node, need)
                self.spread.use(seen)
                return True
        return False

    def judge(self, bins: Bins) -> Verdicts:
        tiers = []
        reasons: dict[str, str] = {}
        for index, plan in enumerate(self.plans):
            tier = []
            for name, template in bins.templates.items():
                reason = self._rejection(plan, template)
                if reason is None:
                    tier.append(name)
                elif index == 0:
                    reasons[name] = type_reason(template, reason)
            tiers.append(tuple(sorted(tier, key=lambda name: (bins.cost(name), name))))
        verdicts = Verdicts(tiers)
        served = set(verdicts.served)
        verdicts.reasons = {name: why for name, why in reasons.items() if name not in served}
        if self.chain is not None and not served and not self._room_now():
            self.chain.stuck.update(self.work_ids)
        return verdicts

    def _room_now(self) -> bool:
        """Whether some existing node its virtual cluster may grow onto has the free room and passes its rules."""
        assert self.chain is not None
        need = self.work.resources
        for node in self.chain.host_scope.nodes.values():
            seen = self.chain.stand_in(node) if fits(node.free, need) else None
            if seen is not None and any(plan.rejects(seen) is None for plan in self.plans):
                return True
        return False

    def _rejection(self, plan: Plan, template: NodeState) -> str | None:
        """Why a new node like `template` cannot take this work (inside a virtual cluster: its flexible node)."""
        if self.chain is None:
            return plan.rejects(template)
        seen = self.chain.stand_in(template)
        return self.chain.refusal(template) if seen is None else plan.rejects(seen)

    def place(self, bins: Bins, verdicts: Verdicts, left: list[str]) -> tuple[list[str], str]:
        need = self.work.resources
        for target in bins.fitting(verdicts.served, need):
            if not left:
                break
            if self.spread.allows(self._seen(target.node)):
                left = self._put(target, left)
        refused: set[str] = set()
        while left:
            chosen = next_type(bins, verdicts, refused, need, len(left))
            if chosen is None:
                return left, _why_full(bins, verdicts.served, refused)
            if self.spread.allows(self._seen(bins.templates[chosen])):
                left = self._put(bins.launch(chosen), left)
            else:
                refused.add(chosen)
        return left, ""

    def _put(self, target: Bin, left: list[str]) -> list[str]:
        """Put as many copies as fit (one, with hard anti-affinity to itself) on `target`; the ids left."""
        need = self.work.resources
        copies = copies_in(target.node.free, need, self._most(len(left)))
        if copies:
            target.put(need, left[:copies])
            self.spread.use(self._seen(target.node))
        return left[copies:]

    def _seen(self, node: NodeState) -> NodeState:
        """The node as this work sees it: inside a virtual cluster, its flexible node on it."""
        return (self.chain.stand_in(node) if self.chain is not None else None) or node


def next_type(bins: Bins, verdicts: Verdicts, refused: set[str], need: Resources, count: int) -> str | None:
    """The type to launch next: the first option with a type that may still launch, its cheapest for `count`."""
    for tier in verdicts.tiers:
        chosen = bins.cheapest(tuple(name for name in tier if name not in refused), need, count)
        if chosen is not None:
            return chosen
    return None


def _why_full(bins: Bins, served: tuple[str, ...], refused: set[str]) -> str:
    parts = [bins.why_full(name) for name in served if name not in refused]
    parts += [f"{name} would share a domain with another copy (hard anti-affinity)" for name in sorted(refused)]
    return "; ".join(dict.fromkeys(parts))
