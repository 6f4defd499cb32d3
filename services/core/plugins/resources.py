"""Resource rule: the node's total can hold the work, whatever is in use (pure)."""

from __future__ import annotations

from services.core.framework.plugin import RANK_CAPACITY, Filter
from services.core.framework.registry import ActorWork, BundleWork, Prepared, Rule, register
from services.core.framework.shortage import shortage
from services.core.state import ClusterView, NodeState, Resources


class Capacity(Filter):
    """The node's total resources can hold the request (ignoring what is in use)."""

    rank = RANK_CAPACITY

    def __init__(self, resources: Resources) -> None:
        self.resources = resources

    def check(self, node: NodeState) -> str | None:
        return shortage(node.total, self.resources)


def for_actor(_view: ClusterView, work: ActorWork) -> Prepared:
    """Outside a bundle, unless lenders' room (which can grow a node) replaces the node's total."""
    if work.borrowing or work.request.group_target is not None:
        return ()
    return (Capacity(work.request.resources),)


def for_bundle(_view: ClusterView, work: BundleWork) -> Prepared:
    """Every bundle."""
    return (Capacity(work.need),)


register(Rule(__name__, RANK_CAPACITY, actor=for_actor, bundle=for_bundle))
