"""NATS subject names, stream names and buckets: the addresses of the wire contract."""

from __future__ import annotations

import re

from schemas.events import (
    ActorFailed,
    ActorPending,
    ActorPlaced,
    ActorRemoved,
    ActorSubmitted,
    AnyEvent,
    AutoscalerElected,
    LaunchesNominated,
    NodeDeclaredDead,
    NodeDied,
    NodeDrainCancelled,
    NodeDrainStarted,
    NodeLabelsChanged,
    NodeLaunchFailed,
    NodeReachable,
    NodeRegistered,
    NodesLaunchRequested,
    NodeTerminationRequested,
    NodeUnreachable,
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

PREFIX = "corral"

EVENTS_STREAM = "CORRAL_EVENTS"
"""The event log of record (file storage): every `corral.evt.>` subject."""
EVENTS_SUBJECTS = f"{PREFIX}.evt.>"

REQUESTS_STREAM = "CORRAL_REQUESTS"
"""The scheduler's durable work queue: every `corral.req.>` subject."""
REQUESTS_SUBJECTS = f"{PREFIX}.req.>"
REQUESTS_CONSUMER = "scheduler"

PROPOSALS = f"{PREFIX}.plan.scheduler"
"""Core NATS request subject of the leading scheduler's applier: a decision worker's `Proposals` for a batch of
requests, answered with `Verdicts` once the accepted decisions are stored."""

DEAD_LETTERS_STREAM = "CORRAL_DEAD_LETTERS"
"""Events and requests no service could decode or apply, kept for inspection."""
DEAD_LETTERS_SUBJECTS = f"{PREFIX}.dlq.>"

LEASE_BUCKET = "corral_leases"
"""NATS KV bucket holding the scheduler lease (a key with a TTL)."""
SCHEDULER_LEASE_KEY = "scheduler"

AUTOSCALER_LEASE_BUCKET = "corral_autoscaler_leases"
"""NATS KV bucket holding the autoscaler lease (a key with a TTL; a bucket of its own, so that only the autoscaler
may write it)."""
AUTOSCALER_LEASE_KEY = "autoscaler"

REFUSALS_BUCKET = "corral_refusals"
"""NATS KV bucket keeping, for the duplicate window, what a resend of a durable request sent with an idempotency key
is answered from: the request each keyed sending stored (key: `request.<its sequence in CORRAL_REQUESTS>`), kept
before it is acked, and its refusal, if refused (key: the sequence), whoever resends it."""

ELECTIONS_BUCKET = "corral_elections"
"""NATS KV bucket without a TTL: one record per real election (key: the epoch), written before its event."""

REPLY_HEADER = "Corral-Reply-To"
"""Header on a durable request naming the inbox the decision is sent to."""

KEY_HEADER = "Corral-Idempotency-Key"
"""Header on a durable request sent with an idempotency key (its `command_id`, also its `Nats-Msg-Id`): the
request is kept in `REFUSALS_BUCKET` before it is acked, for the resends to compare theirs with."""

# aggregates: the token after `corral.evt.`
NODE = "node"
TAINT = "taint"
ACTOR = "actor"
PLACEMENT_GROUP = "pg"
SCHEDULER = "scheduler"
VCLUSTER = "vc"
"""Virtual-cluster intents (requested, destroy requested), written by the vclusters service."""
VNODE = "vnode"
"""The scheduler's virtual-cluster facts (queued, virtual nodes reserved or resized, destroyed), by cluster id."""
AUTOSCALER = "autoscaler"
"""The autoscaler's decisions (one subject, see `AUTOSCALER_DECISIONS`); also its service token."""

_SAFE_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,200}")


def token(identifier: str) -> str:
    """An id as one subject token: itself when it is safe, else `~` and its UTF-8 bytes in hex."""
    if _SAFE_TOKEN.fullmatch(identifier):
        return identifier
    return "~" + identifier.encode().hex()


def event_subject(aggregate: str, identifier: str) -> str:
    """`corral.evt.<aggregate>.<id>`: where the events of one aggregate are appended."""
    return f"{PREFIX}.evt.{aggregate}.{token(identifier)}"


ELECTIONS = event_subject(SCHEDULER, "lease")
"""Where every `SchedulerElected` is appended: its newest message names the scheduler whose events count."""

AUTOSCALER_DECISIONS = event_subject(AUTOSCALER, "decisions")
"""Where every autoscaler event is appended, each expecting the subject's last sequence (one writer at a time)."""

AUTOSCALER_EVENTS = (
    AutoscalerElected,
    NodesLaunchRequested,
    LaunchesNominated,
    NodeLaunchFailed,
    NodeDrainStarted,
    NodeDrainCancelled,
    NodeTerminationRequested,
)
"""The events only the autoscaler writes, all on `AUTOSCALER_DECISIONS`."""


BATCH_TOKEN = "~batch"
"""The last token of a batch's subject: no id's token (`token`) is this, as `batch` is not hex."""

BATCHED = (ACTOR,)
"""The aggregates whose events the scheduler appends in batches: consecutive events of one of them in a flush go
as one message on `batch_subject(aggregate)` (a JSON array of the events, in order)."""


def batch_aggregate(event: AnyEvent) -> str | None:
    """The aggregate whose batch messages carry `event` (None: it is appended alone). A virtual node's resize rides
    in the actor batches: a flexible node grows for the placement after it and shrinks after the removal before it,
    so inside virtual clusters resizes and actor events alternate, and apart every resize would end a batch."""
    kind = type(event)
    rides = _RIDES.get(kind)
    if rides is None:  # asked once per type: isinstance against a Struct class is slow when it fails
        rides = _RIDES[kind] = issubclass(kind, _ACTOR_BATCHED)
    return ACTOR if rides else None


_ACTOR_BATCHED = (ActorPlaced, ActorPending, ActorFailed, ActorRemoved, ActorSubmitted, VirtualNodeResized)
_RIDES: dict[type, bool] = {}
"""Event type -> whether it rides in the actor batches (`batch_aggregate`)."""


def batch_subject(aggregate: str) -> str:
    """`corral.evt.<aggregate>.~batch`: where a batch of that aggregate's events is appended (read by aggregate
    filters, `corral.evt.<aggregate>.*`, like any of its events)."""
    return f"{PREFIX}.evt.{aggregate}.{BATCH_TOKEN}"


def is_batch(subject: str) -> bool:
    """Whether a message of the log on `subject` is a batch of events."""
    return subject.endswith("." + BATCH_TOKEN)


def batch_msg_id(first_event_id: str, count: int) -> str:
    """A batch's `Nats-Msg-Id`: its first event's id and how many events it holds (an append repeated publishes the
    same batches, so the stream drops the repeat)."""
    return f"{first_event_id}+{count}"


def aggregate_subjects(*aggregates: str) -> tuple[str, ...]:
    """`corral.evt.<aggregate>.*` for each aggregate: what a view that folds only those events reads."""
    return tuple(f"{PREFIX}.evt.{aggregate}.*" for aggregate in aggregates)


def subject_of(event: AnyEvent) -> str:
    """The subject an event is appended to: `corral.evt.<aggregate>.<id>`, one aggregate token per writer."""
    if isinstance(event, ActorPlaced | ActorPending | ActorFailed | ActorRemoved):  # most events: asked first
        return event_subject(ACTOR, event.actor_id)
    if isinstance(
        event, NodeRegistered | NodeDied | NodeLabelsChanged | NodeUnreachable | NodeReachable | NodeDeclaredDead
    ):
        return event_subject(NODE, event.node_id)
    if isinstance(event, TaintsChanged):
        return event_subject(TAINT, event.node_id)
    if isinstance(event, ActorSubmitted):
        return event_subject(ACTOR, event.request.actor_id)
    if isinstance(event, PlacementGroupSubmitted):
        return event_subject(PLACEMENT_GROUP, event.request.pg_id)
    if isinstance(
        event, PlacementGroupPlaced | PlacementGroupPending | PlacementGroupBundlesLost | PlacementGroupRemoved
    ):
        return event_subject(PLACEMENT_GROUP, event.pg_id)
    if isinstance(event, VirtualClusterRequested | VirtualClusterDestroyRequested):
        return event_subject(VCLUSTER, event.vc_id)
    if isinstance(event, VirtualClusterQueued | VirtualNodesReserved | VirtualNodeResized | VirtualClusterDestroyed):
        return event_subject(VNODE, event.vc_id)
    if isinstance(event, AUTOSCALER_EVENTS):
        return AUTOSCALER_DECISIONS
    assert isinstance(event, SchedulerElected)
    return ELECTIONS


def command_subject(service: str, verb: str) -> str:
    """`corral.cmd.<service>.<verb>`: request/reply commands, one queue group per service."""
    return f"{PREFIX}.cmd.{service}.{verb}"


def query_subject(service: str, what: str) -> str:
    """`corral.q.<service>.<what>`: request/reply queries answered from a view."""
    return f"{PREFIX}.q.{service}.{what}"


def request_subject(kind: str) -> str:
    """`corral.req.<kind>`: durable scheduler requests captured by `CORRAL_REQUESTS`."""
    return f"{PREFIX}.req.{kind}"


def heartbeat_subject(node_id: str) -> str:
    """`corral.hb.<node>`: a node agent's heartbeat (plain publish)."""
    return f"{PREFIX}.hb.{token(node_id)}"


def dead_letter_subject(service: str) -> str:
    """`corral.dlq.<service>`: where a service puts a message it could not decode or apply."""
    return f"{PREFIX}.dlq.{service}"


def event_dead_letter_subject(service: str) -> str:
    """`corral.dlq.<service>.events`: where a service puts an event of the log it skipped."""
    return f"{dead_letter_subject(service)}.events"


DEAD_LETTER_REASON = "Corral-Reason"
"""Header of a dead letter: why it was set aside."""
DEAD_LETTER_SUBJECT = "Corral-Subject"
"""Header of a dead letter: the subject the message came on."""
DEAD_LETTER_SEQUENCE = "Corral-Sequence"
"""Header of an event's dead letter: its sequence in the event log."""
DEAD_LETTER_INDEX = "Corral-Index"
"""Header of an event's dead letter when it came in a batch: its index in the batch (from 0)."""

HEARTBEATS = f"{PREFIX}.hb.*"

# commands
LABELS = "labels"
TAINTS = "taints"
VCLUSTERS = "vclusters"
REGISTER_NODE = command_subject(LABELS, "register")
SET_LABELS = command_subject(LABELS, "set_labels")
REMOVE_NODE = command_subject(LABELS, "remove")
ADD_TAINTS = command_subject(TAINTS, "add")
REMOVE_TAINTS = command_subject(TAINTS, "remove")
CREATE_VCLUSTER = command_subject(VCLUSTERS, "create")
DESTROY_VCLUSTER = command_subject(VCLUSTERS, "destroy")

# durable scheduler requests
SCHEDULE = request_subject("schedule")
CREATE_PLACEMENT_GROUP = request_subject("placement_group")
REMOVE_ACTOR = request_subject("remove_actor")
REPORT_ACTOR_FAILED = request_subject("fail_actor")
REMOVE_PLACEMENT_GROUP = request_subject("remove_placement_group")
BATCH = request_subject("batch")

# queries
NODES_QUERY = query_subject(LABELS, "nodes")
ACTORS_QUERY = query_subject(LABELS, "actors")
TAINTS_QUERY = query_subject(TAINTS, "taints")
STATUS_QUERY = query_subject(SCHEDULER, "status")
DECISION_QUERY = query_subject(SCHEDULER, "decision")
VCLUSTER_QUERY = query_subject(VCLUSTERS, "info")
VCLUSTERS_QUERY = query_subject(VCLUSTERS, "list")
VCLUSTER_WORK_QUERY = query_subject(VCLUSTERS, "work")
VCLUSTER_NODES_QUERY = query_subject(VCLUSTERS, "nodes")
AUTOSCALER_STATUS_QUERY = query_subject(AUTOSCALER, "status")
AUTOSCALER_WHY_QUERY = query_subject(AUTOSCALER, "why")


def health_subject(service: str) -> str:
    """`corral.q.<service>.health`: how a service process stands (its snapshots saved or failing)."""
    return query_subject(service, "health")


def digest_subject(service: str) -> str:
    """`corral.q.<service>.digest`: the digest of a service's view."""
    return query_subject(service, "digest")
