"""The snapshot of a folded view that services keep in Redis: plain records that rebuild it exactly."""

from __future__ import annotations

import msgspec

from schemas.events import Explanation
from schemas.queries import NodeLayers
from schemas.requests import PlacementGroupRequest, ScheduleRequest, Taint
from schemas.vclusters import VirtualCluster

SNAPSHOT_VERSION = 9
"""Bumped whenever the records change shape; a snapshot of another version is refused (the log is replayed)."""


class NodeRecord(msgspec.Struct, frozen=True):
    """A node: capacity, what is free, labels, taints; `dead` for a tombstone (kept until its id registers again);
    `layers` for a node an agent registered (None for a virtual node); `removed_at`: the log time an operator
    removed it."""

    node_id: str
    address: str
    total: dict[str, float]
    free: dict[str, float]
    labels: dict[str, str]
    taints: list[Taint]
    dead: bool = False
    unreachable_since: float | None = None
    """While it misses heartbeats: when it was last heard from (its taints above are the declared ones)."""
    dead_for: float | None = None
    """Once declared dead: seconds since, as of the last `NodeDeclaredDead`."""
    layers: NodeLayers | None = None
    removed_at: float | None = None


class ActorRecord(msgspec.Struct, frozen=True):
    """An actor: its request, queue arrival, status, node and bundle, restarts and last explanation."""

    request: ScheduleRequest
    arrival: int
    status: str
    node_id: str | None
    bundle: tuple[str, int] | None
    restarts: int
    explanation: Explanation | None


class GroupRecord(msgspec.Struct, frozen=True):
    """A placement group: its request, arrival, status, chosen option, node and free room per bundle."""

    request: PlacementGroupRequest
    arrival: int
    status: str
    option: int
    bundle_nodes: list[str | None]
    bundle_free: list[dict[str, float]]
    explanation: Explanation | None


class VNodeRecord(msgspec.Struct, frozen=True):
    """What a virtual cluster knows of one of its live virtual nodes (the node itself is in its scope)."""

    vnode_id: str
    parent_node: str
    own_labels: dict[str, str]
    slot: int
    base: dict[str, float]


class VClusterRecord(msgspec.Struct, frozen=True):
    """A virtual cluster: spec, place in the tree, admission state, virtual nodes, and its scope's view."""

    vc_id: str
    spec: VirtualCluster
    parent: str
    priority: int
    arrival: int
    status: str
    reason: str
    overtaken: int
    destroying: bool
    vnodes: list[VNodeRecord]
    children: list[str]
    scope: ViewSnapshot


class LaunchRecord(msgspec.Struct, frozen=True):
    """An autoscaler launch: type, when and why, for which work, its state, node and note, last change, and since
    when (the log's time) its node has held no work (None: it holds some, or has no node)."""

    launch_id: str
    node_type: str
    requested_at: float
    reason: str
    work: list[str]
    state: str
    node_id: str
    note: str
    changed_at: float
    idle_since: float | None
    nominated: dict[str, dict[str, float]] = {}
    """The pending work the launch's node is nominated for, with the room held for each (see `Launch.nominated`)."""
    existing: dict[str, dict[str, dict[str, float]]] = {}
    """Existing node id -> the pending work the launch holds room for there (see `Launch.existing`)."""


class ViewSnapshot(msgspec.Struct, frozen=True):
    """A whole view and the stream sequence it reflects."""

    snapshot_version: int
    sequence: int
    seed: int
    version: int
    epoch: int
    arrivals: int
    nodes: list[NodeRecord]
    actors: list[ActorRecord]
    groups: list[GroupRecord]
    records: dict[str, dict[str, str]]
    ended: list[str]
    """Ended actors whose record is kept, oldest first (the next to drop)."""
    pending: list[str]
    vclusters: list[VClusterRecord] = []
    vcluster_arrivals: int = 0
    launches: list[LaunchRecord] = []
    """The autoscaler's launches (live ones, then ended ones oldest first)."""
    launch_count: int = 0
    autoscaler_epoch: int = 0
    node_type_labels: dict[str, dict[str, str]] = {}
