"""What every service does with its view: the snapshot codec, folded views, and state turned into query answers."""

from __future__ import annotations

from schemas import AnyEvent
from schemas.queries import ActorInfo, NodeInfo
from schemas.snapshots import SNAPSHOT_VERSION
from services.core import Cluster
from services.core.state import ActorState, ClusterView, NodeState
from services.core.state.layers import layers_of
from services.core.state.snapshot import decode, digest, dump, encode, restore


class SnapshotVersionError(ValueError):
    """A snapshot written by another version of the records."""


class SnapshotSequenceError(ValueError):
    """A snapshot blob of another sequence than its record says."""


def dump_view(view: ClusterView, sequence: int) -> bytes:
    """The view, as of `sequence`, as snapshot bytes."""
    return encode(dump(view, sequence))


def load_view(blob: bytes, sequence: int) -> ClusterView:
    """The view in a snapshot of the view at `sequence`; raises on corrupt or other-version blobs, and on one
    that reflects another sequence (its record and its content disagree)."""
    snapshot = decode(blob)
    if snapshot.snapshot_version != SNAPSHOT_VERSION:
        raise SnapshotVersionError(
            f"snapshot version {snapshot.snapshot_version}: this build reads version {SNAPSHOT_VERSION}"
        )
    if snapshot.sequence != sequence:
        raise SnapshotSequenceError(f"the blob reflects sequence {snapshot.sequence}, its record says {sequence}")
    return restore(snapshot)


def node_info(node: NodeState, parent_node: str = "") -> NodeInfo:
    """A node as queries return it (a virtual node names the node it was carved from)."""
    return NodeInfo(
        node_id=node.node_id,
        address=node.address,
        resources=dict(node.total),
        available={name: max(0.0, amount) for name, amount in node.free.items()},
        labels=dict(node.labels),
        taints=list(node.taints),
        actors=len(node.actors),
        parent_node=parent_node,
        layers=layers_of(node),
    )


def actor_info(actor: ActorState) -> ActorInfo:
    """An actor as queries return it."""
    request = actor.request
    return ActorInfo(
        actor_id=request.actor_id,
        namespace=request.namespace,
        labels=dict(request.labels),
        status=actor.status,
        node_id=actor.node_id,
        restarts=actor.restarts,
    )


class FoldedView:
    """A service view around one `ClusterView`: fold, snapshot, digest (subclasses choose what to fold)."""

    def __init__(self, seed: int = 0) -> None:
        self.cluster = ClusterView(seed)

    def fold(self, event: AnyEvent, _sequence: int, time_ns: int = 0) -> None:
        """Fold one event, stored in the log at `time_ns` (Unix nanoseconds)."""
        self.cluster.fold(event, time_ns / 1e9)

    def dump(self, sequence: int) -> bytes:
        """Snapshot bytes."""
        return dump_view(self.cluster, sequence)

    def digest(self) -> str:
        """The canonical hash of the view."""
        return digest(self.cluster)

    def load(self, blob: bytes, sequence: int) -> None:
        """Replace the view from snapshot bytes of the view at `sequence`."""
        self.cluster = load_view(blob, sequence)


class FoldedCluster:
    """A service view around a core `Cluster` that follows the whole log: fold, snapshot, digest.

    It folds what every writer appended and never reacts (the vclusters service's view; the scheduler's builds on
    it and reacts while it leads).
    """

    def __init__(self, seed: int = 0, rare_resources: tuple[str, ...] = ()) -> None:
        self.rare_resources = rare_resources
        self.cluster = Cluster(seed, rare_resources, keep_history=False)
        self.sequence = 0

    def fold(self, event: AnyEvent, sequence: int, _time_ns: int = 0) -> None:
        """Fold one event from the log."""
        self.sequence = sequence
        self.cluster.fold(event, react=False)

    def dump(self, sequence: int) -> bytes:
        """Snapshot bytes."""
        return dump_view(self.cluster.view, sequence)

    def digest(self) -> str:
        """The canonical hash of the view."""
        return digest(self.cluster.view)

    def load(self, blob: bytes, sequence: int) -> None:
        """Replace the view from snapshot bytes of the view at `sequence`."""
        self.cluster = Cluster.from_view(load_view(blob, sequence), self.rare_resources, keep_history=False)
        self.sequence = self.cluster.folded = sequence
