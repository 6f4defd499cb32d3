"""Explain a placement after the fact: re-run the decision on the view the scheduler had, and trace the framework
as kube-scheduler describes it (nodes in and out per filter, the scored nodes with each scorer's part) (pure).

The scheduler records only the inputs on `ActorPlaced` (its PRNG state and the log sequence it had folded); the
filter counts and score tables are recomputed here on demand.
"""

from __future__ import annotations

from typing import Final

import msgspec

from schemas import ActorPlaced, ActorSubmitted, AnyEvent
from services.core.cluster import DEFAULT_SAMPLE
from services.core.decide.actor import actor_plans
from services.core.framework.pipeline import Plan, choose, policy_key
from services.core.framework.plugin import Filter, Scorer
from services.core.prng import SplitMix64
from services.core.request import CompiledRequest
from services.core.state import ClusterView, NodeState, fits
from services.core.state.view import SCHEDULER_EVENTS

FREE_RESOURCES: Final = "FreeResources"
"""The name of the last filter step: the node has the work's resources free now."""


class FilterStep(msgspec.Struct, frozen=True):
    """One filter plugin: how many nodes reached it, and how many of those it let through."""

    plugin: str
    reached: int
    passed: int


class ScoredNode(msgspec.Struct, frozen=True):
    """A node the decision scored: its soft weight (each scorer's part) and its policy rank (lower is better)."""

    node_id: str
    weight: int
    weights: dict[str, int]
    policy_rank: float


class OptionTrace(msgspec.Struct, frozen=True):
    """One option (0: the primary selector, then the fallbacks) as the framework ran it.

    `narrowed_by` names the rule whose index gave the candidate list (empty: every node was a candidate);
    `scored` holds the best `top` scored nodes, best first (among equals the chosen one first); `ties` how many
    share the best score (a seeded choice among them picked `chosen`).
    """

    option: int
    nodes: int
    narrowed_by: str
    candidates: int
    filters: list[FilterStep]
    sampled: int
    scored: list[ScoredNode]
    ties: int
    chosen: str | None


class PlacementTrace(msgspec.Struct, frozen=True):
    """Why an actor went where it went: each option tried, and whether re-running it chose the recorded node."""

    actor_id: str
    node_id: str
    options: list[OptionTrace]
    reproduced: bool
    note: str = ""


def known_when_deciding(sequence: int, event: AnyEvent, placed: ActorPlaced, placed_at: int) -> bool:
    """Whether the scheduler had folded the log's event at `sequence` when it made the placement stored at
    `placed_at`: every event up to the sequence it had folded, and after that only its own (same epoch) events,
    which it folded as it wrote them; others' events appended meanwhile it had not seen."""
    folded = placed.folded or placed_at - 1
    return sequence <= folded or (isinstance(event, SCHEDULER_EVENTS) and event.epoch == placed.epoch)


def view_for_decision(view: ClusterView, placed: ActorPlaced) -> ClusterView:
    """Fold into `view` (the fold of what the scheduler had folded when it decided) the submission a merged
    `ActorPlaced` stands for, as the scheduler folded it just before deciding; returns `view`."""
    if placed.request is not None:
        view.fold(ActorSubmitted(request=placed.request, epoch=placed.epoch))
    return view


def explain_placed(
    view: ClusterView,
    placed: ActorPlaced,
    rare_resources: tuple[str, ...] = (),
    *,
    sample: int = DEFAULT_SAMPLE,
    top: int = 5,
) -> PlacementTrace:
    """Re-run the decision `placed` records on `view` (see `view_for_decision`) with the recorded PRNG state, and
    trace it: per option, the filters' counts and the `top` scored nodes."""
    actor_id = placed.actor_id
    if placed.prng < 0:
        note = "this placement was logged before decisions recorded their inputs: it cannot be re-run"
        return PlacementTrace(actor_id, placed.node_id, [], reproduced=False, note=note)
    scope = view.scope_of(actor_id)
    work = CompiledRequest(scope.actors[actor_id].request, rare_resources)
    prng = SplitMix64(placed.prng)
    plans, _bundle = actor_plans(scope, work)
    options = []
    for index, plan in enumerate(plans):
        scored: list[tuple[int, NodeState]] = []
        node = choose(scope, plan, prng, sample, trace=scored)
        options.append(_option(scope, plan, index, scored, node, top))
        if node is not None:
            break
    chosen = options[-1].chosen if options else None
    reproduced = chosen == placed.node_id
    note = "" if reproduced else _not_reproduced(chosen, placed.node_id)
    return PlacementTrace(actor_id, placed.node_id, options, reproduced=reproduced, note=note)


def _not_reproduced(chosen: str | None, recorded: str) -> str:
    if chosen is None:
        return f"no node of its own scope could take it: it went to {recorded} on borrowed resources"
    return f"re-running the decision chose {chosen}, not {recorded} (the log does not hold the view it had)"


def _option(
    view: ClusterView, plan: Plan, index: int, scored: list[tuple[int, NodeState]], chosen: NodeState | None, top: int
) -> OptionTrace:
    chosen_id = chosen.node_id if chosen is not None else None
    driver = plan.driver(view)
    narrowed_by = next((_name(f) for f in plan.filters if f.candidates is not None and f.candidates is driver), "")
    candidates = [view.nodes[node_id] for node_id in dict.fromkeys(driver) if node_id in view.nodes]
    ranked = sorted(
        (
            ScoredNode(node.node_id, weight, _weights(plan.scorers, node), policy_key(plan, node))
            for weight, node in scored
        ),
        key=lambda entry: (-entry.weight, entry.policy_rank, entry.node_id != chosen_id, entry.node_id),
    )
    best = ranked[0] if ranked else None
    ties = sum(1 for entry in ranked if best and (entry.weight, entry.policy_rank) == (best.weight, best.policy_rank))
    return OptionTrace(
        option=index,
        nodes=len(view.nodes),
        narrowed_by=narrowed_by,
        candidates=len(candidates),
        filters=_filter_steps(plan, candidates),
        sampled=len(scored),
        scored=ranked[:top],
        ties=ties,
        chosen=chosen_id,
    )


def _filter_steps(plan: Plan, nodes: list[NodeState]) -> list[FilterStep]:
    """Each filter in pipeline order with the nodes that reached it and passed it, then the free-resources check."""
    steps = []
    for rule in plan.filters:
        kept = [node for node in nodes if rule.check(node) is None]
        steps.append(FilterStep(_name(rule), len(nodes), len(kept)))
        nodes = kept
    kept = [node for node in nodes if node.node_id not in plan.excluded and fits(plan.room(node), plan.need)]
    steps.append(FilterStep(FREE_RESOURCES, len(nodes), len(kept)))
    return steps


def _weights(scorers: list[Scorer], node: NodeState) -> dict[str, int]:
    weights: dict[str, int] = {}
    for scorer in scorers:
        name = _name(scorer)
        weights[name] = weights.get(name, 0) + scorer.weight(node)
    return weights


def _name(rule: Filter | Scorer) -> str:
    return type(rule).__name__
