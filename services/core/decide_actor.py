"""Decide one actor or task: build a plan per option (primary selector, then fallbacks), choose, or explain (pure)."""

from __future__ import annotations

from collections.abc import Callable

from schemas import Explanation
from services.core.pipeline import Plan, choose, explain, feasible
from services.core.plugins.actor_affinity import ActorAffinityFilter, ActorAffinityScorer, ExistingAntiAffinityFilter
from services.core.plugins.base import RANK_NODE_LABELS, Filter, Scorer
from services.core.plugins.bundles import BundleTarget
from services.core.plugins.dataflow import DataFlowPrefer, DataFlowRequire
from services.core.plugins.node_affinity import NodeAffinityFilter, NodeAffinityScorer
from services.core.plugins.node_labels import SelectorFilter, SoftLabels
from services.core.plugins.resources import Capacity
from services.core.plugins.taints import PreferNoScheduleScorer, TaintFilter
from services.core.prng import SplitMix64
from services.core.request import CompiledRequest
from services.core.state import ClusterView, NodeState, Resources

Decision = tuple[NodeState, int] | Explanation
"""The node (and bundle index, -1 outside placement groups) to place on, or why the actor waits."""


def _shared_rules(  # noqa: PLR0912 - one branch per rule, in pipeline order, reads best as one list
    view: ClusterView, work: CompiledRequest, *, capacity: bool = True
) -> tuple[list[Filter], list[Scorer], BundleTarget | None]:
    request = work.request
    filters: list[Filter] = []
    scorers: list[Scorer] = []
    bundle = BundleTarget(view, work.group_target, work.resources) if work.group_target else None
    if bundle is not None:
        filters.append(bundle)
    else:
        filters += (
            [Capacity(work.resources), TaintFilter(work.tolerations)] if capacity else [TaintFilter(work.tolerations)]
        )
        if view.prefer_tainted:
            scorers.append(PreferNoScheduleScorer(work.tolerations))
    if work.node_label_hard is not None:
        filters.append(SelectorFilter(view, work.node_label_hard, rank=RANK_NODE_LABELS))
    if work.node_label_soft is not None:
        scorers.append(SoftLabels(view, work.node_label_soft))
    if work.node_affinity is not None:
        if work.node_affinity.soft:
            scorers.append(NodeAffinityScorer(work.node_affinity.node_id))
        else:
            filters.append(NodeAffinityFilter(work.node_affinity.node_id))
    if work.affinity is not None:
        affinity = ActorAffinityFilter(view, request.namespace, request.labels, work.affinity)
        if affinity.active:
            filters.append(affinity)
        soft = ActorAffinityScorer(view, request.namespace, work.affinity)
        if soft.active:
            scorers.append(soft)
    if request.labels:
        existing = ExistingAntiAffinityFilter(view, request.namespace, request.labels)
        if existing.active:
            filters.append(existing)
    if work.run_after is not None:
        if work.run_after.policy == "Require":
            filters.append(DataFlowRequire(view, work.run_after))
        else:
            scorers.append(DataFlowPrefer(view, work.run_after))
    return filters, scorers, bundle


def actor_plans(
    view: ClusterView, work: CompiledRequest, room: Callable[[NodeState], Resources] | None = None
) -> tuple[list[Plan], BundleTarget | None]:
    """One plan per option: the shared rules plus that option's label selector.

    A `room` (what a node can give now, borrowing included) replaces the node's free resources and its total.
    """
    filters, scorers, bundle = _shared_rules(view, work, capacity=room is None)
    plans = []
    for selector in work.options:
        rules = [*filters, SelectorFilter(view, selector)] if selector else list(filters)
        plan = Plan(work.resources, rules, scorers, work.policy)
        if bundle is not None:
            plan.room = bundle.room
        elif room is not None:
            plan.room = room
        plans.append(plan)
    return plans, bundle


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
) -> tuple[NodeState, int] | None:
    """The node (and bundle index) of the first option that can place the actor now, or None."""
    plans, bundle = actor_plans(view, work, room)
    for plan in plans:
        node = choose(view, plan, prng, sample)
        if node is not None:
            return node, bundle.slot(node) if bundle is not None else -1
    return None


def new_nodes_fail(view: ClusterView, work: CompiledRequest) -> bool:
    """Whether every option has a hard rule no newly added node could pass (hard affinity to actors on the same
    node, or to actors of which none is placed)."""
    plans, _bundle = actor_plans(view, work)
    return all(any(rule.new_nodes_fail for rule in plan.filters) for plan in plans)


def decide_actor(view: ClusterView, work: CompiledRequest, prng: SplitMix64, sample: int) -> Decision:
    """Place now on the first option that can; else explain the first feasible option (or the primary)."""
    return place_actor(view, work, prng, sample) or explain_actor(view, work)


def explain_actor(view: ClusterView, work: CompiledRequest, where: str = "", reason: str = "") -> Explanation:
    """Why the actor cannot be placed now (`where` names a virtual cluster; `reason` is what blocks it there)."""
    plans, bundle = actor_plans(view, work)
    waiting_on = next((plan for plan in plans if feasible(view, plan)), plans[0])
    return explain(view, waiting_on, _group_reason(work, bundle) or reason, where)
