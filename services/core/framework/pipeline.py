"""The decision pipeline over prepared rules: narrow by index, filter, score, choose; or explain (pure)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from operator import attrgetter
from typing import Final

from schemas import Explanation
from services.core.framework.plugin import RANK_CAPACITY, RANK_FREE, Filter, Scorer
from services.core.framework.shortage import beyond_every_node, shortage
from services.core.prng import SplitMix64
from services.core.request import Policy
from services.core.ring import Chain
from services.core.state import ClusterView, NodeState, Resources, fits
from services.core.state.model import CPU, EPSILON, MEMORY
from services.core.state.nominations import LAUNCHING, closed_to, held_room, nominated_nodes

EXACT_PREFERRED_LIMIT: Final = 512
"""Preferred nodes (positive soft weight) are all scored up to this many; beyond it they are sampled too."""


def free_room(node: NodeState) -> Resources:
    """What is free on the node itself."""
    return node.free


RoomFits = Callable[[NodeState, float, float], bool]
"""Whether a CPU and a memory need fit the room a plan's `room` gives on a node, read without building that room
(a virtual cluster's lent room: see `borrowing.Lender.room_fits`)."""


_RANK: Final = attrgetter("rank")
"""A filter's place in the pipeline: a C getter, where a compiled lambda is a call back into Python per filter."""


class Plan:
    """One way to place one piece of work: its hard rules, soft rules, policy and where its resources come from."""

    __slots__ = (
        "excluded",
        "filters",
        "filters_past_room",
        "need",
        "need_cpu",
        "need_memory",
        "need_plain",
        "nominated",
        "nominated_room",
        "policy",
        "room",
        "room_fits",
        "scorers",
    )

    def __init__(
        self,
        need: Resources,
        filters: list[Filter],
        scorers: list[Scorer],
        policy: Policy = "DEFAULT",
        room: Callable[[NodeState], Resources] = free_room,
    ) -> None:
        self.need = need
        plain = True
        for name in need:  # a loop, not all() over a generator: no object per call
            if name not in (CPU, MEMORY):
                plain = False
        self.need_plain = plain
        """Whether the work asks for CPU and memory only (its walk then reads the nodes' plain fields)."""
        amount = need.get(CPU)
        self.need_cpu = 0.0 if amount is None else amount
        amount = need.get(MEMORY)
        self.need_memory = 0.0 if amount is None else amount
        self.filters = sorted(filters, key=_RANK)
        self.filters_past_room = [rule for rule in self.filters if not rule.checks_total]
        """The hard rules a node whose room holds the work can still fail: room is never more than the node's total
        (a room lent from elsewhere comes without the rules that check totals), so those pass whenever it fits."""
        self.scorers = scorers
        self.policy = policy
        self.room = room
        self.excluded: AbstractSet[str] = frozenset()
        self.nominated: tuple[str, ...] = ()
        """Nodes launched for this work (see `nominate`): the first that passes every rule and has room wins."""
        self.nominated_room = room
        """Where resources come from on a nominated node chosen outright: not from room held for other work."""
        self.room_fits: RoomFits | None = None
        """`room`'s fast twin for work that asks for CPU and memory only (None: ask `room`)."""

    def rejects(self, node: NodeState) -> str | None:
        """The first hard rule the node fails, if any."""
        return self._first_failed(node, self.filters)

    def rejects_fitting(self, node: NodeState) -> str | None:
        """`rejects` for a node whose room holds the work (the rules on its total are not asked again)."""
        return self._first_failed(node, self.filters_past_room)

    def _first_failed(self, node: NodeState, rules: list[Filter]) -> str | None:
        if self.excluded and node.node_id in self.excluded:  # only a STRICT_SPREAD bundle excludes nodes
            return EXCLUDED_REASON
        for rule in rules:
            reason = rule.check(node)
            if reason is not None:
                return reason
        return None

    def weight(self, node: NodeState) -> int:
        """The node's soft weight for this work."""
        total = 0
        for scorer in self.scorers:  # a loop, not sum() over a generator: a compiled generator is an object
            total += scorer.weight(node)
        return total

    def driver(self, view: ClusterView) -> Sequence[str]:
        """The smallest candidate list a rule offers, else every node."""
        shortest: Sequence[str] = view.ring.ids
        offered = False
        for rule in self.filters:  # a loop, not min(key=len): no call back into Python for each list
            candidates = rule.candidates
            if candidates is not None and (not offered or len(candidates) < len(shortest)):
                shortest, offered = candidates, True
        return shortest


_HASH_KEY: Final = attrgetter("hash_key")

EXCLUDED_REASON: Final = "was taken by another bundle of this placement group (STRICT_SPREAD)"


def policy_key(plan: Plan, node: NodeState) -> float:
    """How the policy ranks a node (lower is better): SPREAD the least used, else the most used below half, then
    the least used above; "used" is `NodeState.utilisation(plan.need)`, read from the node's plain fields when CPU
    and memory are all it has (the hot path)."""
    if node.plain:
        share = _used(node.total_cpu, node.free_cpu, plan.need_cpu, 0.0)
        share = _used(node.total_memory, node.free_memory, plan.need_memory, share)
    else:
        share = node.utilisation(plan.need)
    if plan.policy == "SPREAD":
        return share
    return -share if share < 0.5 else 1.0 + share


def _used(total: float, free: float, need: float, share: float) -> float:
    """`share`, or the share of `total` used once `need` is added, when that is more (nothing for a resource the node
    does not have). Adding a need of 0 changes no sum, so a resource the work does not ask for counts as it would in
    the dict's loop."""
    if total <= 0:
        return share
    used = (total - free + need) / total
    return used if used > share else share


def _preferred(view: ClusterView, plan: Plan, prng: SplitMix64) -> list[NodeState]:
    """The nodes soft rules can add weight to: all of them, or a seeded sample when there are very many."""
    lists = [scorer.preferred for scorer in plan.scorers if scorer.preferred]
    if not lists:
        return []
    ids: Sequence[str] = Chain(lists)
    if len(ids) > EXACT_PREFERRED_LIMIT:
        start = prng.below(len(ids))
        ids = [ids[(start + step) % len(ids)] for step in range(EXACT_PREFERRED_LIMIT)]
    nodes = view.nodes
    return [nodes[node_id] for node_id in dict.fromkeys(ids) if node_id in nodes]


def nominate(view: ClusterView, plan: Plan, work_id: str, priority: int) -> None:
    """Apply the view's nominated nodes to a plan for `work_id`: the nodes launched for it are tried first (chosen
    outright where the room they hold for it, or room nobody holds, takes it), the room nodes hold for other
    nominated work (of equal or higher priority) is not offered, nor, while one of its own launches is still
    coming, room on the other launched nodes."""
    if not (view.held or view.nominations):
        return
    plan.nominated = nominated_nodes(view, work_id)
    closed = closed_to(view, work_id, plan.nominated)
    if view.held or closed:
        plan.nominated_room = held_room(view.held, plan.room, work_id, None, closed)
        plan.room = held_room(view.held, plan.room, work_id, priority, closed)
        plan.room_fits = None  # the twin knows nothing of held room


def _nominated(view: ClusterView, plan: Plan) -> NodeState | None:
    """The first node nominated for the work that passes every rule and has room."""
    for node_id in plan.nominated:
        node = view.nodes.get(node_id)
        if node is not None and fits(plan.nominated_room(node), plan.need) and plan.rejects_fitting(node) is None:
            return node
    return None


def choose(
    view: ClusterView, plan: Plan, prng: SplitMix64, sample: int, trace: list[tuple[int, NodeState]] | None = None
) -> NodeState | None:
    """The node to place on now, or None when no node can take the work now.

    A node nominated for the work that passes every rule and has room is chosen outright. Otherwise the highest
    soft weight wins, then the lowest policy key; among nodes equal on both, a seeded choice in `hash_key` order
    (only the tied nodes are sorted, so the choice does not depend on the scan order).
    A `trace` list receives every node scored, with its soft weight (to explain the choice afterwards).
    """
    if plan.nominated:
        node = _nominated(view, plan)
        if node is not None:
            if trace is not None:
                trace.append((plan.weight(node), node))
            return node
    preferred = _preferred(view, plan, prng)
    seen = {node.node_id for node in preferred}
    plain = plan.room is free_room and plan.need_plain  # then the nodes' plain fields say whether the work fits
    scored: list[tuple[int, NodeState]] = []
    for node in preferred:
        if _has_room(plan, node, plain) and plan.rejects_fitting(node) is None:
            scored.append((plan.weight(node), node))
    scored.extend(_sample(view, plan, prng, sample, seen, plain))
    if trace is not None:
        trace.extend(scored)
    if len(scored) <= 1:
        return scored[0][1] if scored else None
    return _best(plan, scored, prng)


def _best(plan: Plan, scored: list[tuple[int, NodeState]], prng: SplitMix64) -> NodeState:
    """The highest weight, then the lowest policy key, then a seeded choice among the tied in `hash_key` order."""
    best_weight = scored[0][0]
    for weight, _node in scored:
        if weight > best_weight:  # noqa: PLR1730 - not max(): a loop makes no call back into Python per node
            best_weight = weight
    top = 0.0
    ties: list[NodeState] = []
    for weight, node in scored:
        if weight != best_weight:
            continue
        key = policy_key(plan, node)
        if not ties or key < top:
            top, ties = key, [node]
        elif key == top:
            ties.append(node)
    if len(ties) == 1:
        return ties[0]
    ties.sort(key=_HASH_KEY)
    return ties[prng.below(len(ties))]


def _sample(
    view: ClusterView, plan: Plan, prng: SplitMix64, sample: int, seen: set[str], plain: bool
) -> list[tuple[int, NodeState]]:
    """Walk the driver list from a random start; keep up to `sample` placeable nodes of weight >= 0 (`plain`: see
    `_has_room`).

    With a rule whose favoured nodes no index lists (a negative soft term), only nodes of the highest weight
    any node can get count towards the sample, so the walk never stops on lesser nodes while better ones exist.
    """
    ids = plan.driver(view)
    count = len(ids)
    if not count:
        return []
    nodes = view.nodes
    start = prng.below(count)
    exhaustive = False
    top = 0
    for scorer in plan.scorers:  # loops, not any() and sum() over generators: a compiled generator is an object
        exhaustive = exhaustive or scorer.exhaustive
        top += scorer.ceiling
    best = 0
    found: list[tuple[int, NodeState]] = []
    negative: list[tuple[int, NodeState]] = []
    for step in range(count):
        node_id = ids[(start + step) % count]
        if seen and node_id in seen:  # most walks score no preferred node first: no lookup per node then
            continue
        node = nodes.get(node_id)
        if node is None or not _has_room(plan, node, plain) or plan.rejects_fitting(node) is not None:
            continue
        weight = plan.weight(node) if plan.scorers else 0
        if weight < 0:
            negative.append((weight, node))
            continue
        found.append((weight, node))
        if exhaustive:
            if weight >= top:
                best += 1
            if best >= sample:
                break
        elif len(found) >= sample:
            break
    return found or negative


def _has_room(plan: Plan, node: NodeState, plain: bool) -> bool:
    """Whether the work fits the room `plan.room` gives on `node`; with `plain` (that room is the node's own free
    room, and the work asks for CPU and memory only), read from the node's plain fields as `fits` reads the dicts:
    only what the work asks for, each against what is free. A plan with a `room_fits` twin asks that."""
    if not plain:
        room_fits = plan.room_fits
        if room_fits is not None:
            return room_fits(node, plan.need_cpu, plan.need_memory)
        return fits(plan.room(node), plan.need)
    need = plan.need_cpu
    if need > 0 and node.free_cpu + EPSILON < need:
        return False
    need = plan.need_memory
    return not (need > 0 and node.free_memory + EPSILON < need)


def feasible(view: ClusterView, plan: Plan) -> bool:
    """Whether some node passes every hard rule, free resources aside (the work can wait for it)."""
    nodes = view.nodes
    for node_id in plan.driver(view):
        node = nodes.get(node_id)
        if node is not None and plan.rejects(node) is None:
            return True
    return False


def explain(view: ClusterView, plan: Plan, group_reason: str = "", scope: str = "") -> Explanation:
    """Count every node under the first rule that rejects it, in pipeline order, with the nodes behind each."""
    ranked: dict[str, tuple[int, list[str]]] = {}
    ranks = {id(rule): rule.rank for rule in plan.filters}
    beyond_capacity = True  # every node's own reason is its capacity (one reason can name both kinds)
    for node_id in sorted(view.nodes):
        node = view.nodes[node_id]
        rank, reason = RANK_FREE, None
        if node_id in plan.excluded:
            reason = EXCLUDED_REASON
        else:
            for rule in plan.filters:
                reason = rule.check(node)
                if reason is not None:
                    rank = ranks[id(rule)]
                    break
        if reason is None:
            reason = shortage(plan.room(node), plan.need) or "was not chosen"
        beyond_capacity = beyond_capacity and rank == RANK_CAPACITY
        entry = ranked.setdefault(reason, (rank, []))
        entry[1].append(node_id)
    order = sorted(ranked.items(), key=lambda item: (item[1][0], item[0]))
    reasons = {reason: len(ids) for reason, (_, ids) in order}
    total = len(view.nodes)
    where = f" of {scope}" if scope else ""
    parts = ", ".join(f"{count} node(s) {reason}" for reason, count in reasons.items()) or "there are no nodes"
    hints = "".join(f"; {hint}" for rule in plan.filters if total and (hint := rule.hint()))
    message = f"0/{total} nodes{where} are available: {parts}{hints}."
    if not scope and ranked and beyond_capacity and not group_reason.startswith(LAUNCHING):
        message = f"no node could ever host it ({beyond_every_node(view.nodes.values(), plan.need)}); {message}"
    if group_reason:
        message = f"{group_reason}; {message}"
    return Explanation(total, message, reasons, {reason: ids for reason, (_, ids) in order}, group_reason)
