"""The cluster view folded from events: records, indexes and `fold` (pure: no I/O, clock or randomness)."""

from services.core.state.model import ActorState, GroupState, NodeState, Resources, fits, give, take
from services.core.state.view import ClusterView, hard_anti_terms, replay

__all__ = [
    "ActorState",
    "ClusterView",
    "GroupState",
    "NodeState",
    "Resources",
    "fits",
    "give",
    "hard_anti_terms",
    "replay",
    "take",
]
