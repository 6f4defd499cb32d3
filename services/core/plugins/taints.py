"""Taints and tolerations: NoSchedule and NoExecute keep untolerating work off; PreferNoSchedule scores lower (pure)."""

from __future__ import annotations

from typing import Final

from schemas import Taint
from services.core.framework.plugin import RANK_TAINTS, Filter, Scorer
from services.core.framework.registry import Prepared, Rule, register
from services.core.labels import UNREACHABLE_TAINT
from services.core.request import CompiledGroup, CompiledRequest
from services.core.selectors import LabelSelector, Tolerations
from services.core.state import ClusterView, NodeState, Resources

PENALTY: Final = 100


def taint_reason(key: str, value: str) -> str:
    """The Kubernetes-style phrase for an untolerated taint (the liveness taint: since when the node is silent)."""
    if key == UNREACHABLE_TAINT:
        return f"were unreachable since {value} (missed heartbeats)"
    return f"had untolerated taint {{{key}: {value}}}"


def eviction_reason(taint: Taint, elapsed: float) -> str:
    """Why work leaves a node under a NoExecute taint in force for `elapsed` seconds."""
    if taint.key == UNREACHABLE_TAINT:
        lapsed = f"; its toleration of {elapsed:g}s lapsed" if elapsed > 0 else ""
        return f"its node was declared dead (unreachable since {taint.value}){lapsed}"
    return taint_reason(taint.key, taint.value)


class TaintFilter(Filter):
    """Reject nodes with a NoSchedule or NoExecute taint the request does not tolerate."""

    rank = RANK_TAINTS

    def __init__(self, tolerations: Tolerations) -> None:
        self.tolerations = tolerations

    def check(self, node: NodeState) -> str | None:
        for taint in node.blocking_taints:
            if not self.tolerations.tolerates(taint.key, taint.value):
                return taint_reason(taint.key, taint.value)
        return None


class PreferNoScheduleScorer(Scorer):
    """Minus 100 for each PreferNoSchedule taint not tolerated."""

    def __init__(self, tolerations: Tolerations) -> None:
        self.tolerations = tolerations

    def weight(self, node: NodeState) -> int:
        total = 0
        for taint in node.prefer_taints:
            if not self.tolerations.tolerates(taint.key, taint.value):
                total -= PENALTY
        return total


def _rules(view: ClusterView, tolerations: Tolerations) -> Prepared:
    if view.prefer_tainted:
        return TaintFilter(tolerations), PreferNoScheduleScorer(tolerations)
    return (TaintFilter(tolerations),)


def for_actor(view: ClusterView, work: CompiledRequest) -> Prepared:
    """Outside a bundle (a bundle was placed honouring them)."""
    return () if work.group_target is not None else _rules(view, work.tolerations)


def for_bundle(view: ClusterView, group: CompiledGroup, _need: Resources, _selector: LabelSelector) -> Prepared:
    """Every bundle."""
    return _rules(view, group.tolerations)


register(Rule(__name__, RANK_TAINTS, actor=for_actor, bundle=for_bundle))
