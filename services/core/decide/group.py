"""Decide a placement group: reserve every bundle of the first option that fits now (gang), or explain (pure)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

import services.core.plugins  # noqa: F401 - importing the package registers every rule, read below
from schemas import Explanation, PlacementStrategy
from services.core.framework.pipeline import Plan, choose, explain, feasible, free_room, nominate
from services.core.framework.registry import prepare, registered
from services.core.prng import SplitMix64
from services.core.request import CompiledGroup, GroupOption
from services.core.selectors import LabelSelector
from services.core.state import ClusterView, NodeState, Resources, fits
from services.core.state.nominations import awaited

_BUNDLE_RULES: Final = tuple(rule.bundle for rule in registered() if rule.bundle is not None)

GroupDecision = tuple[int, list[str]] | Explanation
"""(option index, node per bundle), or why the group waits."""


class _Failure:
    """Where an option got stuck: the plan of the bundle that found no node, and a group-level reason."""

    def __init__(self, plan: Plan, group_reason: str) -> None:
        self.plan = plan
        self.group_reason = group_reason


class _Overlay:
    """Resources tentatively taken by bundles already chosen in this attempt."""

    def __init__(self) -> None:
        self.taken: dict[str, Resources] = {}

    def room(self, node: NodeState) -> Resources:
        extra = self.taken.get(node.node_id)
        if not extra:
            return node.free
        return {name: node.free.get(name, 0.0) - extra.get(name, 0.0) for name in {*node.free, *extra}}

    def take(self, node_id: str, amount: Resources) -> None:
        held = self.taken.setdefault(node_id, {})
        for name, quantity in amount.items():
            held[name] = held.get(name, 0.0) + quantity


def _bundle_plan(
    view: ClusterView,
    work: CompiledGroup,
    need: Resources,
    selector: LabelSelector,
    room: Callable[[NodeState], Resources],
) -> Plan:
    filters, scorers = prepare(_BUNDLE_RULES, view, work, need, selector)
    plan = Plan(need, filters, scorers, "SPREAD" if work.strategy in ("SPREAD", "STRICT_SPREAD") else "DEFAULT", room)
    nominate(view, plan, work.request.pg_id, work.request.priority)
    return plan


def _summed(option: GroupOption) -> tuple[Resources, LabelSelector]:
    need: Resources = {}
    for bundle in option.bundles:
        for name, amount in bundle.items():
            need[name] = need.get(name, 0.0) + amount
    return need, LabelSelector(tuple(term for selector in option.selectors for term in selector.terms))


def _spread_capacity(view: ClusterView, plans: list[Plan]) -> int:
    """How many distinct nodes could hold at least one bundle, free resources aside."""
    return sum(1 for node in view.nodes.values() if any(p.rejects(node) is None for p in plans))


def _strict_pack(
    view: ClusterView, work: CompiledGroup, option: GroupOption, prng: SplitMix64, sample: int
) -> list[str] | _Failure:
    need, selector = _summed(option)
    plan = _bundle_plan(view, work, need, selector, free_room)
    node = choose(view, plan, prng, sample)
    if node is not None:
        return [node.node_id] * len(option.bundles)
    reason = "" if feasible(view, plan) else f"STRICT_PACK: no single node can hold all {len(option.bundles)} bundles"
    return _Failure(plan, reason)


def _place_option(
    view: ClusterView, work: CompiledGroup, option: GroupOption, prng: SplitMix64, sample: int, kept: dict[int, str]
) -> list[str] | _Failure:
    if work.strategy == "STRICT_PACK" and not kept:
        return _strict_pack(view, work, option, prng, sample)
    if work.strategy == "PACK" and not kept:
        together = _strict_pack(view, work, option, prng, sample)
        if isinstance(together, list):
            return together
    natural = _assign(view, work, option, prng, sample, kept, list(range(len(option.bundles))))
    if isinstance(natural, list):
        return natural
    hardest_first = sorted(
        range(len(option.bundles)),
        key=lambda i: (not option.selectors[i], -sum(option.bundles[i].values()), i),
    )
    retried = _assign(view, work, option, prng, sample, kept, hardest_first)
    return retried if isinstance(retried, list) else natural


def _assign(
    view: ClusterView,
    work: CompiledGroup,
    option: GroupOption,
    prng: SplitMix64,
    sample: int,
    kept: dict[int, str],
    order: list[int],
) -> list[str] | _Failure:
    """Place the bundles one by one in `order` (greedy); the first one that finds no node fails the attempt."""
    overlay = _Overlay()
    chosen: dict[int, str] = dict(kept)
    used = _Used(chosen.values())
    for index in order:
        need = option.bundles[index]
        if index in chosen:
            continue
        plan = _bundle_plan(view, work, need, option.selectors[index], overlay.room)
        node = _pick(view, work.strategy, plan, used, _shape(need, option.selectors[index]), prng, sample)
        if node is None:
            reason = ""
            if work.strategy == "STRICT_SPREAD":
                able = _spread_capacity(view, _distinct_plans(view, work, option, overlay.room))
                if able < len(option.bundles):
                    reason = (
                        f"STRICT_SPREAD needs {len(option.bundles)} distinct nodes but only {able} can take a bundle"
                    )
            return _Failure(plan, reason)
        chosen[index] = node.node_id
        used.add(node.node_id)
        overlay.take(node.node_id, need)
    return [chosen[index] for index in range(len(option.bundles))]


Shape = tuple[tuple[tuple[str, float], ...], tuple[tuple[str, str, frozenset[str]], ...]]
"""A bundle's resources and selector terms: bundles of one shape pass the same rules on every node."""


def _shape(need: Resources, selector: LabelSelector) -> Shape:
    return tuple(sorted(need.items())), tuple((term.key, term.op, term.values) for term in selector.terms)


class _Used:
    """The nodes one attempt put bundles on, in order, and what it learned per bundle shape (room only shrinks
    during an attempt, so a node full for a shape stays full, and a shape no unused node could take finds none
    later): without it, each bundle re-checked every node used so far, or every node, and a group of thousands of
    bundles took minutes."""

    def __init__(self, node_ids: Iterable[str]) -> None:
        self.order: dict[str, None] = dict.fromkeys(node_ids)
        self.ids = list(self.order)
        self.full_before: dict[Shape, int] = {}
        """PACK: the used nodes before this position had no room for the shape."""
        self.spread_out: set[Shape] = set()
        """SPREAD: shapes that found no unused node."""

    def add(self, node_id: str) -> None:
        if node_id not in self.order:
            self.order[node_id] = None
            self.ids.append(node_id)


def _pick(
    view: ClusterView,
    strategy: PlacementStrategy,
    plan: Plan,
    used: _Used,
    shape: Shape,
    prng: SplitMix64,
    sample: int,
) -> NodeState | None:
    if strategy in ("PACK", "STRICT_PACK"):
        for position in range(used.full_before.get(shape, 0), len(used.ids)):
            node = view.nodes.get(used.ids[position])
            if node is not None and fits(plan.room(node), plan.need) and plan.rejects(node) is None:
                used.full_before[shape] = position
                return node
        used.full_before[shape] = len(used.ids)
        if strategy == "STRICT_PACK" and used.ids:
            return None
        return choose(view, plan, prng, sample)
    if shape not in used.spread_out:
        plan.excluded = used.order.keys()
        node = choose(view, plan, prng, sample)
        if node is not None or strategy == "STRICT_SPREAD":
            return node
        used.spread_out.add(shape)
    plan.excluded = frozenset()
    return choose(view, plan, prng, sample)


def _distinct_plans(
    view: ClusterView, work: CompiledGroup, option: GroupOption, room: Callable[[NodeState], Resources]
) -> list[Plan]:
    """One plan per bundle shape of the option."""
    shapes = {_shape(b, s): (b, s) for b, s in zip(option.bundles, option.selectors, strict=True)}
    return [_bundle_plan(view, work, need, selector, room) for need, selector in shapes.values()]


def _option_feasible(view: ClusterView, work: CompiledGroup, option: GroupOption) -> bool:
    if work.strategy == "STRICT_PACK":
        need, selector = _summed(option)
        return feasible(view, _bundle_plan(view, work, need, selector, free_room))
    plans = _distinct_plans(view, work, option, free_room)
    if not all(feasible(view, plan) for plan in plans):
        return False
    return work.strategy != "STRICT_SPREAD" or _spread_capacity(view, plans) >= len(option.bundles)


def decide_group(
    view: ClusterView,
    work: CompiledGroup,
    prng: SplitMix64,
    sample: int,
    kept: dict[int, str] | None = None,
    option_index: int | None = None,
    where: str = "",
) -> GroupDecision:
    """Reserve the first option that fits now; `kept` bundles (still reserved) stay where they are.

    `where` names the virtual cluster whose nodes the view holds, for the explanation.
    """
    waiting = awaited(view, work.request.pg_id)
    if waiting:  # all or nothing: the group goes on the nodes launched for it once they are all there
        first = work.options[0]
        return explain(view, _bundle_plan(view, work, first.bundles[0], first.selectors[0], free_room), waiting, where)
    indices = [option_index] if option_index is not None else list(range(len(work.options)))
    failures: list[_Failure] = []
    for index in indices:
        outcome = _place_option(view, work, work.options[index], prng, sample, kept or {})
        if isinstance(outcome, list):
            return index, outcome
        failures.append(outcome)
    for index, failure in zip(indices, failures, strict=True):
        if _option_feasible(view, work, work.options[index]):
            return explain(view, failure.plan, failure.group_reason, where)
    return explain(view, failures[0].plan, failures[0].group_reason, where)
