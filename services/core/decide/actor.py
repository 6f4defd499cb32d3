"""Decide one actor or task: build a plan per option (primary selector, then fallbacks), choose, or explain (pure)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import services.core.plugins  # noqa: F401 - importing the package registers every rule, read below
from schemas import Explanation
from services.core.framework.pipeline import Plan, RoomFits, choose, explain, feasible, nominate
from services.core.framework.plugin import Filter, Scorer
from services.core.framework.registry import prepare, registered
from services.core.plugins.bundles import BundleTarget
from services.core.prng import SplitMix64
from services.core.request import CompiledRequest
from services.core.state import ClusterView, NodeState, Resources, fits

_ACTOR_RULES: Final = tuple(rule.actor for rule in registered() if rule.actor is not None)
_OPTION_RULES: Final = tuple(rule.option for rule in registered() if rule.option is not None)


class Rules:
    """The shared rules of an actor prepared on one view: plans built again on that view, while it does not change
    (one decision: placing, then borrowing, then asking whether new nodes could take it), need not prepare them
    again (most of a plan's cost). A plain class, not a frozen dataclass: compiled, that one is built through
    `object.__setattr__` per field."""

    __slots__ = ("filters", "scorers", "view")

    def __init__(self, view: ClusterView, filters: list[Filter], scorers: list[Scorer]) -> None:
        self.view, self.filters, self.scorers = view, filters, scorers


def prepared_rules(view: ClusterView, work: CompiledRequest) -> Rules:
    """The actor's shared rules on `view`, as it is now."""
    filters, scorers = prepare(_ACTOR_RULES, view, work)
    return Rules(view, filters, scorers)


def actor_plans(
    view: ClusterView,
    work: CompiledRequest,
    room: Callable[[NodeState], Resources] | None = None,
    rules: Rules | None = None,
    room_fits: RoomFits | None = None,
) -> tuple[list[Plan], BundleTarget | None]:
    """One plan per option: the shared rules plus that option's label selector.

    A `room` (what a node can give now, borrowing included) replaces the node's free resources and its total;
    `room_fits`, its fast twin, is asked instead for work that needs CPU and memory only.
    `rules` prepared on this same view (unchanged since) are used as they are; on another view they are not.
    """
    if rules is not None and rules.view is view:
        filters, scorers = rules.filters, rules.scorers
    else:
        filters, scorers = prepare(_ACTOR_RULES, view, work)
    if room is not None:
        filters = [rule for rule in filters if not rule.checks_total]
    bundle = _bundle_target(filters) if work.group_target is not None else None
    plans = []
    nominations = bool(view.held or view.nominations)
    for selector in work.options:
        option_rules = list(filters)
        for make in _OPTION_RULES:
            option_rules += make(view, selector)
        plan = Plan(work.resources, option_rules, scorers, work.policy)
        if bundle is not None:
            plan.room = bundle.room
        else:
            if room is not None:
                plan.room = room
                if plan.need_plain:
                    plan.room_fits = room_fits
            if nominations:
                nominate(view, plan, work.request.actor_id, work.request.priority)
        plans.append(plan)
    return plans, bundle


def _bundle_target(filters: list[Filter]) -> BundleTarget | None:
    return next((rule for rule in filters if isinstance(rule, BundleTarget)), None)


def _group_reason(work: CompiledRequest, bundle: BundleTarget | None) -> str:
    if bundle is not None and not bundle.placed:
        return f"placement group {work.group_target.placement_group_id if work.group_target else ''} is not placed yet"
    return ""


def place_actor(
    view: ClusterView,
    work: CompiledRequest,
    prng: SplitMix64,
    sample: int,
    room: Callable[[NodeState], Resources] | None = None,
    rules: Rules | None = None,
    room_fits: RoomFits | None = None,
) -> tuple[NodeState, int] | None:
    """The node (and bundle index) of the first option that can place the actor now, or None (`rules`, `room_fits`:
    see `actor_plans`)."""
    plans, bundle = actor_plans(view, work, room, rules, room_fits)
    for plan in plans:
        node = choose(view, plan, prng, sample)
        if node is not None:
            return node, bundle.slot(node) if bundle is not None else -1
    return None


def first_fitting(
    view: ClusterView, work: CompiledRequest, nodes: list[NodeState], room: Callable[[NodeState], Resources]
) -> tuple[NodeState, int] | None:
    """The first of `nodes` (nominated for the actor) that passes every rule of an option and has room, chosen
    outright as the pipeline chooses a nominated node; None when none does."""
    plans, _bundle = actor_plans(view, work, room)
    for plan in plans:
        for node in nodes:
            if fits(plan.room(node), plan.need) and plan.rejects(node) is None:
                return node, -1
    return None


def new_nodes_fail(view: ClusterView, work: CompiledRequest, rules: Rules | None = None) -> bool:
    """Whether every option has a hard rule no newly added node could pass (hard affinity to actors on the same
    node, or to actors of which none is placed; `rules`: see `actor_plans`)."""
    plans, _bundle = actor_plans(view, work, rules=rules)
    return all(any(rule.new_nodes_fail for rule in plan.filters) for plan in plans)


def explain_actor(view: ClusterView, work: CompiledRequest, where: str = "", reason: str = "") -> Explanation:
    """Why the actor cannot be placed now (`where` names a virtual cluster; `reason` is what blocks it there)."""
    plans, bundle = actor_plans(view, work)
    waiting_on = next((plan for plan in plans if feasible(view, plan)), plans[0])
    return explain(view, waiting_on, _group_reason(work, bundle) or reason, where)
