"""DataFlow affinity inheritance (proposal 003): Require / Prefer the node labels an earlier operation ran on (pure)."""

from __future__ import annotations

from typing import Final

from schemas import Prefer, RunAfter
from services.core.framework.plugin import RANK_DATAFLOW, Filter, Scorer
from services.core.framework.registry import Prepared, Rule, register
from services.core.labels import HOSTNAME
from services.core.request import CompiledRequest
from services.core.ring import Chain
from services.core.state import ClusterView, NodeState

DATAFLOW_REASON: Final = "didn't match the DataFlow affinity"
DEFAULT_PREFER: Final = (Prefer(HOSTNAME, 100),)


def footprint(view: ClusterView, operation_id: str) -> dict[str, str] | None:
    """The earlier operation's footprint (`ClusterView.footprints`); a placed placement group leaves an empty one;
    None while never placed."""
    found = view.footprints.get(operation_id)
    if found is None:
        group = view.groups.get(operation_id)
        if group is not None and group.status == "placed":
            return {}
    return found


class DataFlowRequire(Filter):
    """Equal values for each `require` key of the earlier operation's footprint; wait while it was never placed."""

    rank = RANK_DATAFLOW

    def __init__(self, view: ClusterView, run_after: RunAfter) -> None:
        inherited = footprint(view, run_after.operation_id)
        self.waiting = inherited is None
        keys = run_after.require or [HOSTNAME]
        self.required = {key: inherited[key] for key in keys if key in inherited} if inherited is not None else {}
        if self.waiting:
            self.candidates = []
        elif self.required:
            key, value = next(iter(self.required.items()))
            ring = view.labels.nodes(key, value)
            self.candidates = ring.ids if ring is not None else []

    def check(self, node: NodeState) -> str | None:
        if self.waiting:
            return DATAFLOW_REASON
        labels = node.labels
        for key, value in self.required.items():
            if labels.get(key) != value:
                return DATAFLOW_REASON
        return None


class DataFlowPrefer(Scorer):
    """Each `prefer` key whose value equals the footprint's adds its weight; never blocks."""

    def __init__(self, view: ClusterView, run_after: RunAfter) -> None:
        inherited = footprint(view, run_after.operation_id) or {}
        prefers = run_after.prefer or list(DEFAULT_PREFER)
        self.wanted = [(p.name, inherited[p.name], p.weight) for p in prefers if p.name in inherited and p.weight]
        rings = [view.labels.nodes(key, value) for key, value, _ in self.wanted]
        self.preferred = Chain([ring.ids for ring in rings if ring is not None])
        self.ceiling = sum(weight for _, _, weight in self.wanted)

    def weight(self, node: NodeState) -> int:
        labels = node.labels
        return sum(weight for key, value, weight in self.wanted if labels.get(key) == value)


def for_actor(view: ClusterView, work: CompiledRequest) -> Prepared:
    """`run_after`: Require filters, Prefer scores."""
    run_after = work.run_after
    if run_after is None:
        return ()
    return (DataFlowRequire(view, run_after),) if run_after.policy == "Require" else (DataFlowPrefer(view, run_after),)


register(Rule(__name__, RANK_DATAFLOW, actor=for_actor))
