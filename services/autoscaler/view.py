"""The autoscaler's view: the whole log folded into one root view (nodes, pending work, virtual clusters, its own
launches, and since when each launched node has held no work, in the log's time), the sequence it reflects, and a
signal when demand may have changed."""

from __future__ import annotations

from collections.abc import Callable

from schemas import (
    ActorFailed,
    ActorPending,
    ActorRemoved,
    AnyEvent,
    NodeDied,
    NodeRegistered,
    PlacementGroupBundlesLost,
    PlacementGroupPending,
    PlacementGroupRemoved,
    TaintsChanged,
    VirtualClusterQueued,
)
from services.runtime.views import FoldedView

DEMAND_EVENTS = (
    ActorPending,
    ActorFailed,
    ActorRemoved,
    PlacementGroupPending,
    PlacementGroupBundlesLost,
    PlacementGroupRemoved,
    NodeRegistered,
    NodeDied,
    TaintsChanged,
    VirtualClusterQueued,
)
"""Events after which a round is decided at once rather than at the next interval."""


class AutoscalerView(FoldedView):
    """The root view of the whole log; `on_demand` is called after each event of `DEMAND_EVENTS`."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        self.sequence = 0
        self.on_demand: Callable[[], None] = lambda: None

    def fold(self, event: AnyEvent, sequence: int, time_ns: int = 0) -> None:
        """Fold one event of the log, stored at `time_ns` (the server's clock: launched nodes' idle times)."""
        self.cluster.fold(event, time_ns / 1e9)
        self.sequence = sequence
        if isinstance(event, DEMAND_EVENTS):
            self.on_demand()

    def load(self, blob: bytes, sequence: int) -> None:
        """Replace the view from a snapshot of the view at `sequence`."""
        super().load(blob, sequence)
        self.sequence = sequence
