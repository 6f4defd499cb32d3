"""The one fold table: each event type of the log and the function that folds it into a view (pure)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from schemas import (
    ActorFailed,
    ActorPending,
    ActorPlaced,
    ActorRemoved,
    ActorSubmitted,
    NodeDied,
    NodeLabelsChanged,
    NodeRegistered,
    PlacementGroupBundlesLost,
    PlacementGroupPending,
    PlacementGroupPlaced,
    PlacementGroupRemoved,
    PlacementGroupSubmitted,
    SchedulerElected,
    TaintsChanged,
    VirtualClusterDestroyed,
    VirtualClusterDestroyRequested,
    VirtualClusterQueued,
    VirtualClusterRequested,
    VirtualNodeResized,
    VirtualNodesReserved,
)
from services.core.state.node_folds import (
    on_node_died,
    on_node_labels_changed,
    on_node_registered,
    on_scheduler_elected,
    on_taints_changed,
)
from services.core.state.vcluster_folds import (
    on_destroy_requested,
    on_destroyed,
    on_queued,
    on_requested,
    on_reserved,
    on_resized,
)
from services.core.state.work_folds import (
    on_actor_failed,
    on_actor_pending,
    on_actor_placed,
    on_actor_removed,
    on_actor_submitted,
    on_bundles_lost,
    on_group_pending,
    on_group_placed,
    on_group_removed,
    on_group_submitted,
)

if TYPE_CHECKING:  # folds change a view; the view module imports this table
    from services.core.state.view import ClusterView

Fold = Callable[["ClusterView", Any], None]

FOLDS: dict[type, Fold] = {
    NodeRegistered: on_node_registered,
    NodeDied: on_node_died,
    NodeLabelsChanged: on_node_labels_changed,
    TaintsChanged: on_taints_changed,
    SchedulerElected: on_scheduler_elected,
    ActorSubmitted: on_actor_submitted,
    ActorPlaced: on_actor_placed,
    ActorPending: on_actor_pending,
    ActorFailed: on_actor_failed,
    ActorRemoved: on_actor_removed,
    PlacementGroupSubmitted: on_group_submitted,
    PlacementGroupPlaced: on_group_placed,
    PlacementGroupPending: on_group_pending,
    PlacementGroupBundlesLost: on_bundles_lost,
    PlacementGroupRemoved: on_group_removed,
    VirtualClusterRequested: on_requested,
    VirtualClusterQueued: on_queued,
    VirtualNodesReserved: on_reserved,
    VirtualNodeResized: on_resized,
    VirtualClusterDestroyRequested: on_destroy_requested,
    VirtualClusterDestroyed: on_destroyed,
}
"""Event type -> the function folding it into the view it applies to (the scope the work runs in, for work)."""
