"""Events: the past-tense facts the log records; folding them in order rebuilds every view."""

from __future__ import annotations

import msgspec

from schemas.requests import Amounts, PlacementGroupRequest, ScheduleRequest, Taint
from schemas.vclusters import VirtualCluster, VirtualNodeGrant

SCHEMA_VERSION = 1


class Explanation(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Why work is pending: node counts per reason (summing to `total`), the nodes behind each, a group reason."""

    total: int
    message: str
    reasons: dict[str, int] = {}
    nodes_by_reason: dict[str, list[str]] = {}
    group_reason: str = ""


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", forbid_unknown_fields=True):
    """Envelope fields every event carries."""

    event_id: str = ""
    correlation_id: str = ""
    causation_id: str = ""
    schema_version: int = SCHEMA_VERSION
    epoch: int = 0
    """The scheduler lease epoch that wrote it (scheduler events); a fold skips events of an older epoch."""


class NodeRegistered(Event, frozen=True, tag=True):
    """A node joined with its resources, full labels (defaults included) and static taints: its agent's declaration,
    under the edits an operator made to the same node id before (see `OperatorLabels`)."""

    node_id: str
    resources: Amounts
    labels: dict[str, str]
    taints: list[Taint] = []
    address: str = ""
    removed_before: float | None = None
    """Seconds since an operator removed this node id, when this registration brings a removed node back."""


class NodeDied(Event, frozen=True, tag=True):
    """A node is gone; its actors and bundles are lost. `reason`: why (empty in events written before it had one)."""

    node_id: str
    reason: str = ""
    removed: bool = False
    """An operator (or the autoscaler) removed it: the operator's edits of its labels and taints are forgotten.
    A node that missed its heartbeats keeps them for when it registers again."""


class NodeUnreachable(Event, frozen=True, tag=True):
    """A node missed its heartbeats: it is tainted `corral.io/unreachable:NoSchedule` (no new work; its work keeps
    running). `last_heard` is when it was last heard from (the labels service's clock, Unix seconds)."""

    node_id: str
    last_heard: float


class NodeReachable(Event, frozen=True, tag=True):
    """An unreachable (or declared dead) node's heartbeats returned: its `corral.io/unreachable` taint is gone and it
    keeps what still runs on it. `unreachable_for`: how long it was unreachable (seconds)."""

    node_id: str
    unreachable_for: float = 0.0


class NodeDeclaredDead(Event, frozen=True, tag=True):
    """A node unreachable for the grace (CORRAL_NODE_GRACE) is dead: its taint becomes
    `corral.io/unreachable:NoExecute`, so the work that does not tolerate it fails (and restarts elsewhere when it
    may), and the work tolerating it for at most `dead_for` seconds (`toleration_seconds`) too. It is written again
    each time such a toleration lapses; once nothing on the node tolerates it, a `NodeDied` follows."""

    node_id: str
    unreachable_for: float
    dead_for: float = 0.0


class OperatorLabels(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """An operator's edits of a node's labels, over its agent's: keys set (or changed), and agent keys removed."""

    labels: dict[str, str] = {}
    removed: list[str] = []


class OperatorTaints(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """An operator's edits of a node's taints, over its agent's: taints added (or changed), and agent taints
    removed (matched by key and effect)."""

    taints: list[Taint] = []
    removed: list[Taint] = []


class NodeLabelsChanged(Event, frozen=True, tag=True):
    """A node's labels were replaced (system labels kept)."""

    node_id: str
    labels: dict[str, str]
    operator: OperatorLabels | None = None
    """The operator's edits after the change (`labels` is what they give over the agent's labels); None in events
    written before edits were kept apart: the fold derives them from `labels`."""


class TaintsChanged(Event, frozen=True, tag=True):
    """A node's taints are now exactly `taints`."""

    node_id: str
    taints: list[Taint]
    operator: OperatorTaints | None = None
    """The operator's edits after the change (`taints` is what they give over the agent's taints); None in events
    written before edits were kept apart: the fold derives them from `taints`."""


class ActorSubmitted(Event, frozen=True, tag=True):
    """An actor or task was accepted for scheduling."""

    request: ScheduleRequest


class VirtualNodeSize(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A flexible virtual node's new size (what a `VirtualNodeResized` says), carried by the actor event whose
    placement made the node grow or whose removal made it shrink."""

    vc_id: str
    vnode_id: str
    parent_node: str
    resources: Amounts


class ActorPlaced(Event, frozen=True, tag=True):
    """An actor was bound to a node (inside a bundle when `placement_group_id` is set).

    `request` is set when the actor was placed as it was submitted: this one event then stands for its
    `ActorSubmitted` too (the log holds one event instead of two for the commonest decision). `resized` lists
    the flexible virtual nodes that grew to make room (ancestors first), applied before the placement.
    """

    actor_id: str
    node_id: str
    placement_group_id: str = ""
    bundle_index: int = -1
    request: ScheduleRequest | None = None
    resized: list[VirtualNodeSize] = []
    prng: int = -1
    """The scheduler's PRNG state just before it decided (-1: not recorded): with `folded`, what re-running the
    decision needs (`corral why-placed`)."""
    folded: int = 0
    """The log sequence the deciding scheduler had folded (0: not recorded); its own later events come on top."""


class ActorPending(Event, frozen=True, tag=True):
    """An actor waits; the explanation says why."""

    actor_id: str
    explanation: Explanation


class ActorFailed(Event, frozen=True, tag=True):
    """A placed actor stopped unexpectedly; it is scheduled again when `will_restart`."""

    actor_id: str
    node_id: str
    reason: str
    will_restart: bool


class ActorRemoved(Event, frozen=True, tag=True):
    """An actor or task finished or was removed; its resources are free. `resized` lists the flexible virtual
    nodes that shrank as it left, applied after the removal."""

    actor_id: str
    resized: list[VirtualNodeSize] = []


class PlacementGroupSubmitted(Event, frozen=True, tag=True):
    """A placement group was accepted for scheduling."""

    request: PlacementGroupRequest


class PlacementGroupPlaced(Event, frozen=True, tag=True):
    """All bundles of option `option` (0 = primary, then fallbacks) are reserved, one node per bundle."""

    pg_id: str
    bundle_nodes: list[str]
    option: int = 0


class PlacementGroupPending(Event, frozen=True, tag=True):
    """A placement group waits; the explanation says why."""

    pg_id: str
    explanation: Explanation


class PlacementGroupBundlesLost(Event, frozen=True, tag=True):
    """Some reserved bundles are gone (node death or an untolerated NoExecute taint); they are reserved again."""

    pg_id: str
    bundle_indices: list[int]
    reason: str


class PlacementGroupRemoved(Event, frozen=True, tag=True):
    """A placement group was removed; its reservations are free."""

    pg_id: str


class SchedulerElected(Event, frozen=True, tag=True):
    """A scheduler instance took the lease for `epoch`; scheduler events of older epochs are ignored from here."""

    instance: str


class VirtualClusterRequested(Event, frozen=True, tag=True):
    """A virtual cluster was asked for under `parent` ("" is the root); the scheduler admits or queues it."""

    vc_id: str
    spec: VirtualCluster
    parent: str = ""
    priority: int = 0


class VirtualClusterQueued(Event, frozen=True, tag=True):
    """A virtual cluster waits in its parent's admission queue; `reason` says what it waits for."""

    vc_id: str
    reason: str


class VirtualNodesReserved(Event, frozen=True, tag=True):
    """Virtual nodes were carved out of parent nodes: the whole minimum on admission, or repairs later."""

    vc_id: str
    vnodes: list[VirtualNodeGrant]


class VirtualNodeResized(Event, frozen=True, tag=True):
    """The flexible virtual node of `vc_id` on `parent_node` now holds `resources` (empty: it is gone)."""

    vc_id: str
    vnode_id: str
    parent_node: str
    resources: Amounts


class VirtualClusterDestroyRequested(Event, frozen=True, tag=True):
    """Destroying a virtual cluster (and its children) was asked for; `force` stops their live work."""

    vc_id: str
    force: bool = False


class VirtualClusterDestroyed(Event, frozen=True, tag=True):
    """A virtual cluster is gone and its resources are back with its parent; `stopped` lists stopped work."""

    vc_id: str
    stopped: list[str] = []


class AutoscalerElected(Event, frozen=True, tag=True):
    """An autoscaler instance took the autoscaler lease for `epoch`; every autoscaler decision is appended on the
    same subject, each expecting the subject's last sequence, so an instance that has not folded this cannot
    append."""

    instance: str
    node_type_labels: dict[str, dict[str, str]] = {}
    """The labels each node type of its configuration gives the nodes it launches, by type name: work selecting a
    key only a node type has waits for a launch, and is not told that no node has the key."""


class NodesLaunchRequested(Event, frozen=True, tag=True):
    """The autoscaler decided to launch `len(launch_ids)` nodes of `node_type` for `work` (actor and placement
    group ids), for `reason`; `requested_at` is the decider's clock (Unix seconds), the start of the launch timeout.
    A launched node registers with the system labels `corral.io/node-type` and `corral.io/launch-id`."""

    node_type: str
    launch_ids: list[str]
    reason: str
    work: list[str] = []
    requested_at: float = 0.0
    nominated: dict[str, dict[str, dict[str, float]]] = {}
    """Launch id -> the pending work (actor and placement group ids) the plan put on that node, with the resources
    it put there: once the node registers, the scheduler tries that work there first and holds that room for it
    (a nominated node, as kube-scheduler's NominatedNodeName)."""


class LaunchesNominated(Event, frozen=True, tag=True):
    """A later round counted pending work on nodes already launching (or the nominations of one launch were too
    many for its `NodesLaunchRequested`): launch id -> work id -> the resources put there, added to what those
    launches are nominated for (as `NodesLaunchRequested.nominated`). A launch the log does not know makes it
    unfoldable; one ended meanwhile is skipped; one registered meanwhile holds the room at once. `existing`: launch
    id -> existing node id -> work id -> the resources the plan put on that existing node for work it also put on
    the launch's node (a placement group mixing existing free room and new nodes): that node holds the room for it
    at once, until the work is placed or gone or the launch ends."""

    nominated: dict[str, dict[str, dict[str, float]]]
    existing: dict[str, dict[str, dict[str, dict[str, float]]]] = {}


class NodeLaunchFailed(Event, frozen=True, tag=True):
    """A launch did not register in time (or its provider failed); its node type backs off."""

    launch_id: str
    reason: str
    failed_at: float = 0.0


class NodeDrainStarted(Event, frozen=True, tag=True):
    """A launched node held no work for the idle timeout: it is tainted `corral.io/scale-down=true:NoSchedule`
    (through the taints service) before it is terminated."""

    node_id: str
    launch_id: str
    reason: str
    at: float = 0.0


class NodeDrainCancelled(Event, frozen=True, tag=True):
    """Work landed on a draining node (or it is needed again): its scale-down taint is removed and it stays."""

    node_id: str
    launch_id: str
    reason: str
    at: float = 0.0


class NodeTerminationRequested(Event, frozen=True, tag=True):
    """A drained, idle launched node is terminated (through its provider) and removed from the cluster."""

    node_id: str
    launch_id: str
    reason: str
    requested_at: float = 0.0


AnyEvent = (
    NodeRegistered
    | NodeDied
    | NodeUnreachable
    | NodeReachable
    | NodeDeclaredDead
    | NodeLabelsChanged
    | TaintsChanged
    | ActorSubmitted
    | ActorPlaced
    | ActorPending
    | ActorFailed
    | ActorRemoved
    | PlacementGroupSubmitted
    | PlacementGroupPlaced
    | PlacementGroupPending
    | PlacementGroupBundlesLost
    | PlacementGroupRemoved
    | SchedulerElected
    | VirtualClusterRequested
    | VirtualClusterQueued
    | VirtualNodesReserved
    | VirtualNodeResized
    | VirtualClusterDestroyRequested
    | VirtualClusterDestroyed
    | AutoscalerElected
    | NodesLaunchRequested
    | LaunchesNominated
    | NodeLaunchFailed
    | NodeDrainStarted
    | NodeDrainCancelled
    | NodeTerminationRequested
)
