"""Queries (`corral.q.<service>.<what>`) and their answers, read from a service's view."""

from __future__ import annotations

from typing import Annotated

import msgspec

from schemas.decisions import Pending
from schemas.events import OperatorLabels, OperatorTaints
from schemas.requests import Taint
from schemas.selectors import SelectorSpec
from schemas.vclusters import Admitted, Queued, VirtualClusterInfo


class PageQuery(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A list query, answered in pages that each fit the bus's payload limit.

    Every page of one listing comes from the same point in the log (its `sequence`): the service keeps the answer
    it computed for the first page while the listing goes on, and a cursor it no longer holds (the listing is too
    old, or another instance answered) is refused as a conflict once the log has moved on: list again.
    """

    cursor: str = ""
    """The previous page's `next` ("" for the first page)."""
    limit: Annotated[int, msgspec.Meta(ge=0)] = 0
    """At most this many items of each list in the whole answer (0: all of them)."""


class PageReply(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One page of a list answer; `next` is the cursor of the page after it ("" on the last page)."""

    next: str = ""


class NodesQuery(PageQuery, frozen=True, forbid_unknown_fields=True):
    """Live nodes whose labels match `selector` (all nodes when empty)."""

    selector: SelectorSpec = {}


class NodeLayers(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Where a node's labels and taints come from: what its agent declared when it registered (replaced when it
    registers again), and an operator's edits on top (kept until an operator changes them or removes the node)."""

    agent_labels: dict[str, str]
    agent_taints: list[Taint]
    operator_labels: OperatorLabels
    operator_taints: OperatorTaints


class NodeInfo(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One node as a view sees it."""

    node_id: str
    address: str
    resources: dict[str, float]
    available: dict[str, float]
    labels: dict[str, str]
    taints: list[Taint]
    actors: int = 0
    parent_node: str = ""
    """A virtual node's parent node ("" for a physical node)."""
    layers: NodeLayers | None = None
    """Where `labels` and `taints` come from (None for a virtual node: they are its parent node's)."""


class NodesReply(PageReply, frozen=True, tag_field="type", tag="nodes", forbid_unknown_fields=True):
    """Nodes, sorted by id."""

    nodes: list[NodeInfo]


class ActorsQuery(PageQuery, frozen=True, forbid_unknown_fields=True):
    """Placed actors of `namespace` whose labels include every `labels` pair (the actor-label index)."""

    namespace: str = "default"
    labels: dict[str, str] = {}


class ActorInfo(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One live actor: where it runs (or that it waits)."""

    actor_id: str
    namespace: str
    labels: dict[str, str]
    status: str
    node_id: str | None = None
    restarts: int = 0


class ActorsReply(PageReply, frozen=True, tag_field="type", tag="actors", forbid_unknown_fields=True):
    """Actors, sorted by id."""

    actors: list[ActorInfo]


class TaintsQuery(PageQuery, frozen=True, forbid_unknown_fields=True):
    """Taints of one node (`node_id`) or of every node."""

    node_id: str = ""


class TaintsReply(PageReply, frozen=True, tag_field="type", tag="taints", forbid_unknown_fields=True):
    """Node id -> its taints (nodes without taints left out)."""

    taints: dict[str, list[Taint]]


class StatusQuery(PageQuery, frozen=True, forbid_unknown_fields=True):
    """The scheduler's whole picture."""


class StatusReply(PageReply, frozen=True, tag_field="type", tag="status", forbid_unknown_fields=True):
    """Nodes, actors, placement groups (bundle nodes) and pending work in queue order."""

    nodes: list[NodeInfo]
    actors: list[ActorInfo]
    placement_groups: dict[str, list[str]]
    pending: list[Pending]
    sequence: int = 0


class DecisionQuery(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The current decision for an actor (or, with `kind="placement_group"`, a placement group)."""

    id: str
    kind: str = "actor"


class HealthQuery(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How a service process stands: the log sequence its view reflects and whether its snapshots are saved."""


class HealthReply(msgspec.Struct, frozen=True, tag_field="type", tag="health", forbid_unknown_fields=True):
    """`snapshots_failing`: why the process's snapshots are not being saved ("" while they are; Redis is optional,
    so this is a warning: the view is whole, only a restart would replay more of the log);
    `snapshot_age_seconds`: since its view was last saved or loaded as a snapshot (None: never)."""

    sequence: int
    snapshots_failing: str = ""
    snapshot_age_seconds: float | None = None


class DigestQuery(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A service's view digest and the log sequence it reflects (to check that replays converge)."""


class DigestReply(msgspec.Struct, frozen=True, tag_field="type", tag="digest", forbid_unknown_fields=True):
    """The canonical hash of a view as of `sequence`; `skipped`: events the answering process did not fold
    (unreadable or unfoldable: see the dead letters), replays included."""

    digest: str
    sequence: int
    skipped: int = 0


# vclusters service: `corral.q.vclusters.<what>`, answered once its view has folded the log up to the question


class VirtualClusterQuery(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One virtual cluster: where it stands and what it holds."""

    vc_id: str


class VirtualClusterReply(msgspec.Struct, frozen=True, tag_field="type", tag="vcluster", forbid_unknown_fields=True):
    """A cluster's info, its admission, whether the scheduler has decided it yet, and its subtree.

    `decided` is false while the scheduler has neither admitted nor queued it (just requested); `subtree` is
    the cluster and every cluster under it, children before their parents (the order they are destroyed in).
    """

    info: VirtualClusterInfo
    admission: Admitted | Queued
    decided: bool
    subtree: list[str]
    sequence: int = 0


class VirtualClustersQuery(PageQuery, frozen=True, forbid_unknown_fields=True):
    """Every virtual cluster."""


class VirtualClustersReply(PageReply, frozen=True, tag_field="type", tag="vclusters", forbid_unknown_fields=True):
    """Every virtual cluster, parents before children."""

    clusters: list[VirtualClusterInfo]
    sequence: int = 0


class ScopedWorkQuery(PageQuery, frozen=True, forbid_unknown_fields=True):
    """The work living in one virtual cluster (not its children)."""

    vc_id: str


class ScopedWorkReply(PageReply, frozen=True, tag_field="type", tag="scoped_work", forbid_unknown_fields=True):
    """A cluster's actors, placements (on its virtual nodes), placement groups and pending work in queue order."""

    vc_id: str
    actors: list[ActorInfo]
    placements: dict[str, str]
    placement_groups: dict[str, list[str]]
    pending: list[Pending]
    sequence: int = 0


class ScopedNodesQuery(PageQuery, frozen=True, forbid_unknown_fields=True):
    """The virtual nodes of one cluster whose labels match `selector` (all when empty); answered as NodesReply."""

    vc_id: str
    selector: SelectorSpec = {}


# dead letters: read from the CORRAL_DEAD_LETTERS stream by the client (no service answers)


class DeadLetter(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A message a service set aside: when, which service, the subject it came on, its sequence in the event log
    (0 for a request), why, and its bytes as text (cut at 1,000 characters)."""

    time: str
    service: str
    subject: str
    sequence: int
    reason: str
    data: str


# autoscaler: `corral.q.autoscaler.<what>`, answered from its view by the instance that holds the lease


class AutoscalerStatusQuery(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What the autoscaler sees and does: demand, node types, recent launches and terminations."""


class DemandGroupInfo(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Pending work of one shape: resources (or bundles and strategy), selector with fallbacks, tolerations.

    `node_types` could serve it; `reasons` says for every other type why not (type -> reason)."""

    shape: str
    count: int
    work: list[str] = []
    node_types: list[str] = []
    reasons: dict[str, str] = {}
    vcluster_id: str = ""


class NodeTypeStatus(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One node type: its bounds, and its nodes by state (idle: launched, registered and holding no work)."""

    name: str
    resources: dict[str, float]
    min_workers: int
    max_workers: int
    running: int
    launching: int
    idle: int
    draining: int = 0
    backed_off_until: float = 0.0
    """Unix seconds until which no node of this type is launched (a launch failed); 0 when none."""


class LaunchInfo(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One launch: its node type, why, for which work, when (Unix seconds), and where it stands."""

    launch_id: str
    node_type: str
    reason: str
    requested_at: float
    state: str
    """launching, registered, draining, failed, terminated, or gone (the node died)."""
    work: list[str] = []
    node_id: str = ""
    note: str = ""
    """Why it failed, is draining or was terminated."""
    changed_at: float = 0.0
    """When its state last changed (Unix seconds; a registration keeps the time before it)."""


class AutoscalerStatusReply(
    msgspec.Struct, frozen=True, tag_field="type", tag="autoscaler", forbid_unknown_fields=True
):
    """Demand groups, node types, and the newest launches and terminations (newest first), as of `sequence`."""

    demand: list[DemandGroupInfo]
    node_types: list[NodeTypeStatus]
    launches: list[LaunchInfo]
    terminations: list[LaunchInfo]
    sequence: int = 0
    now: float = 0.0
    instance: str = ""


class AutoscalerWhyQuery(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What the autoscaler does about one pending actor (or, with `kind="placement_group"`, placement group)."""

    id: str
    kind: str = "actor"


class AutoscalerWhyReply(
    msgspec.Struct, frozen=True, tag_field="type", tag="autoscaler_why", forbid_unknown_fields=True
):
    """One line (`message`) and, when launching for it, the node type, the launch ids and their age in seconds."""

    message: str
    node_type: str = ""
    launch_ids: list[str] = []
    age_s: float = 0.0
