"""The proposals' path: a decision worker's choice of a node for a new actor on its own view, counting what its
earlier proposals not yet in the view hold (`choose_node`), and the allocator's check of that choice against its
view (`agrees`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from services.core.decide.actor import actor_plans
from services.core.framework.pipeline import choose
from services.core.prng import SplitMix64
from services.core.request import CompiledRequest
from services.core.state import ClusterView, NodeState, Resources, fits


def choose_node(
    view: ClusterView, work: CompiledRequest, prng: SplitMix64, taken: dict[str, Resources], sample_size: int
) -> str | None:
    """The node `view` would place `work` on, drawing from `prng` (the proposer's own) and counting `taken` (by node:
    what earlier proposals not in the view yet hold, which this one is added to) as used; None when none has room."""
    plans, _bundle = actor_plans(view, work)
    for plan in plans:
        plan.room = _less(plan.room, taken)
        node = choose(view, plan, prng, sample_size)
        if node is not None:
            held = taken.setdefault(node.node_id, {})
            for name, amount in work.resources.items():
                held[name] = held.get(name, 0.0) + amount
            return node.node_id
    return None


def agrees(view: ClusterView, work: CompiledRequest, node_id: str) -> bool:
    """Whether `view` agrees with placing `work` on `node_id`: the node is live, has the room and passes every hard
    rule of one option."""
    node = view.nodes.get(node_id)
    plans, _bundle = actor_plans(view, work)
    return node is not None and any(fits(p.room(node), p.need) and p.rejects(node) is None for p in plans)


def _less(room: Callable[[NodeState], Resources], taken: Mapping[str, Resources]) -> Callable[[NodeState], Resources]:
    """`room` with what `taken` holds on each node counted as used."""
    if not taken:
        return room

    def less(node: NodeState) -> Resources:
        free = room(node)
        used = taken.get(node.node_id)
        return free if used is None else {name: amount - used.get(name, 0.0) for name, amount in free.items()}

    return less
