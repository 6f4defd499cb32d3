"""What resources a node lacks for some work, in the words explanations use (pure)."""

from __future__ import annotations

from collections.abc import Iterable

from services.core.amounts import format_amount
from services.core.state import NodeState, Resources
from services.core.state.model import EPSILON


def shortage(have: Resources, need: Resources) -> str | None:
    """`Insufficient <resource>` for the first resource `have` lacks, else None."""
    for name, amount in need.items():
        if have.get(name, 0.0) + EPSILON < amount:
            return f"Insufficient {name}"
    return None


def beyond_every_node(nodes: Iterable[NodeState], need: Resources) -> str:
    """Why no node could hold `need` even empty: `needs CPU 64; the largest node has 16` per resource no node has
    enough of, or `needs CPU 12, GPU 1 together; no node has all of them`."""
    totals = [node.total for node in nodes]
    parts = []
    for name, amount in need.items():
        largest = max((total.get(name, 0.0) for total in totals), default=0.0)
        if largest + EPSILON < amount:
            parts.append(
                f"needs {name} {format_amount(name, amount)}; the largest node has {format_amount(name, largest)}"
            )
    if parts:
        return "; ".join(parts)
    wanted = ", ".join(f"{name} {format_amount(name, amount)}" for name, amount in need.items())
    return f"needs {wanted} together; no node has all of them"
