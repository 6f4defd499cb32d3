"""Taints and tolerations: NoSchedule and NoExecute keep untolerating work off; PreferNoSchedule scores lower (pure)."""

from __future__ import annotations

from services.core.plugins.base import RANK_TAINTS, Filter, Scorer
from services.core.selectors import Tolerations
from services.core.state import NodeState

PENALTY = 100


def taint_reason(key: str, value: str) -> str:
    """The Kubernetes-style phrase for an untolerated taint."""
    return f"had untolerated taint {{{key}: {value}}}"


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
