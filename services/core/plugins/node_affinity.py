"""NodeAffinity: hard means that node or pending; soft means prefer it (pure)."""

from __future__ import annotations

from typing import Final

from services.core.framework.plugin import RANK_NODE_AFFINITY, Filter, Scorer
from services.core.framework.registry import Prepared, Rule, register
from services.core.request import CompiledRequest
from services.core.state import ClusterView, NodeState

NODE_AFFINITY_REASON: Final = "didn't match the node affinity"
SOFT_WEIGHT: Final = 100


class NodeAffinityFilter(Filter):
    """Only the named node passes."""

    rank = RANK_NODE_AFFINITY

    def __init__(self, node_id: str) -> None:
        self.node_id = node_id
        self.candidates = [node_id]

    def check(self, node: NodeState) -> str | None:
        return None if node.node_id == self.node_id else NODE_AFFINITY_REASON


class NodeAffinityScorer(Scorer):
    """100 for the named node."""

    def __init__(self, node_id: str) -> None:
        self.node_id = node_id
        self.preferred = [node_id]
        self.ceiling = SOFT_WEIGHT

    def weight(self, node: NodeState) -> int:
        return SOFT_WEIGHT if node.node_id == self.node_id else 0


def for_actor(_view: ClusterView, work: CompiledRequest) -> Prepared:
    """The NodeAffinity strategy: soft scores its node, hard filters every other."""
    affinity = work.node_affinity
    if affinity is None:
        return ()
    return (NodeAffinityScorer(affinity.node_id),) if affinity.soft else (NodeAffinityFilter(affinity.node_id),)


register(Rule(__name__, RANK_NODE_AFFINITY, actor=for_actor))
