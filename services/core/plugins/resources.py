"""Resource rules: enough capacity in total (feasible) and free now (placeable) (pure)."""

from __future__ import annotations

from services.core.plugins.base import RANK_CAPACITY, Filter
from services.core.state import NodeState, Resources
from services.core.state.model import EPSILON


def shortage(have: Resources, need: Resources) -> str | None:
    """`Insufficient <resource>` for the first resource `have` lacks, else None."""
    for name, amount in need.items():
        if have.get(name, 0.0) + EPSILON < amount:
            return f"Insufficient {name}"
    return None


class Capacity(Filter):
    """The node's total resources can hold the request (ignoring what is in use)."""

    rank = RANK_CAPACITY

    def __init__(self, resources: Resources) -> None:
        self.resources = resources

    def check(self, node: NodeState) -> str | None:
        return shortage(node.total, self.resources)
