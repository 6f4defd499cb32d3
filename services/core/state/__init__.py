"""The cluster view folded from events: its data, indexes, the virtual-cluster tree and the one fold table (pure)."""

from services.core.state import (
    checks,
    launch_folds,
    node_folds,
    vcluster_folds,
    work_folds,
)  # each registers in `folds`
from services.core.state.model import ActorState, GroupState, NodeState, Resources, fits, give, take
from services.core.state.view import ClusterView, hard_anti_terms, replay

__all__ = [
    "ActorState",
    "ClusterView",
    "GroupState",
    "NodeState",
    "Resources",
    "checks",
    "fits",
    "give",
    "hard_anti_terms",
    "launch_folds",
    "node_folds",
    "replay",
    "take",
    "vcluster_folds",
    "work_folds",
]
