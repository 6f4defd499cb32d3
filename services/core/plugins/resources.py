"""Resource rule: the node's total can hold the work, whatever is in use (pure)."""

from __future__ import annotations

from services.core.framework.plugin import RANK_CAPACITY, Filter
from services.core.framework.registry import Prepared, Rule, register
from services.core.framework.shortage import shortage
from services.core.request import CompiledGroup, CompiledRequest
from services.core.selectors import LabelSelector
from services.core.state import ClusterView, NodeState, Resources


class Capacity(Filter):
    """The node's total resources can hold the request (ignoring what is in use)."""

    rank = RANK_CAPACITY
    checks_total = True

    def __init__(self, resources: Resources) -> None:
        self.resources = resources

    def check(self, node: NodeState) -> str | None:
        return shortage(node.total, self.resources)


def for_actor(_view: ClusterView, work: CompiledRequest) -> Prepared:
    """Outside a bundle."""
    return () if work.group_target is not None else (Capacity(work.resources),)


def for_bundle(_view: ClusterView, _group: CompiledGroup, need: Resources, _selector: LabelSelector) -> Prepared:
    """Every bundle."""
    return (Capacity(need),)


register(Rule(__name__, RANK_CAPACITY, actor=for_actor, bundle=for_bundle))
