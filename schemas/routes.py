"""The wire's subjects: each subject constant and pattern of `schemas/subjects.py` with what it is for, the
message it carries and what answers it (`ROUTES`), and the constants that are not subjects (`OTHER_CONSTANTS`).
`corral schema export` writes them to `schemas/jsonschema/subjects.json`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from schemas import events as ev
from schemas import subjects as s


@dataclass(frozen=True)
class Route:
    """A subject (or pattern), what it is for, the message it carries and what answers it."""

    name: str
    subject: str
    kind: str
    carries: list[str]
    replies: list[str] = field(default_factory=list)
    note: str = ""


_MARK = "PLACEHOLDER0TOKEN"


def pattern(build: Callable[..., str], *args: str, token: str) -> str:
    """A subject builder's output with `{token}` where the id goes (`subjects.token` would escape braces)."""
    return build(*args, _MARK).replace(_MARK, "{" + token + "}")


def _event_names(*kinds: type) -> list[str]:
    """The class names of event types."""
    return [kind.__name__ for kind in kinds]


ROUTES = [
    Route("REGISTER_NODE", s.REGISTER_NODE, "command", ["RegisterNode"], ["CommandReply"]),
    Route("SET_LABELS", s.SET_LABELS, "command", ["SetLabels"], ["CommandReply"]),
    Route("REMOVE_NODE", s.REMOVE_NODE, "command", ["RemoveNode"], ["CommandReply"]),
    Route("ADD_TAINTS", s.ADD_TAINTS, "command", ["AddTaints"], ["CommandReply"]),
    Route("REMOVE_TAINTS", s.REMOVE_TAINTS, "command", ["RemoveTaints"], ["CommandReply"]),
    Route("CREATE_VCLUSTER", s.CREATE_VCLUSTER, "command", ["CreateVirtualCluster"], ["CommandReply"]),
    Route("DESTROY_VCLUSTER", s.DESTROY_VCLUSTER, "command", ["DestroyVirtualCluster"], ["CommandReply"]),
    Route(
        "SCHEDULE",
        s.SCHEDULE,
        "durable request",
        ["SubmitActor"],
        ["RequestReply"],
        f"the reply goes to the inbox in the {s.REPLY_HEADER} header; Nats-Msg-Id deduplicates",
    ),
    Route(
        "CREATE_PLACEMENT_GROUP",
        s.CREATE_PLACEMENT_GROUP,
        "durable request",
        ["CreatePlacementGroup"],
        ["RequestReply"],
    ),
    Route("REMOVE_ACTOR", s.REMOVE_ACTOR, "durable request", ["RemoveActor"], ["RequestReply"]),
    Route("REPORT_ACTOR_FAILED", s.REPORT_ACTOR_FAILED, "durable request", ["ReportActorFailed"], ["RequestReply"]),
    Route(
        "REMOVE_PLACEMENT_GROUP",
        s.REMOVE_PLACEMENT_GROUP,
        "durable request",
        ["RemovePlacementGroup"],
        ["RequestReply"],
    ),
    Route(
        "BATCH",
        s.BATCH,
        "durable request",
        ["RequestBatch"],
        ["BatchReply", "Rejected"],
        "up to 1,000 requests, decided in order and answered together once all are durable",
    ),
    Route("REQUESTS_SUBJECTS", s.REQUESTS_SUBJECTS, "stream subjects", ["DurableRequest"], ["DurableReply"]),
    Route(
        "PROPOSALS",
        s.PROPOSALS,
        "request",
        ["Proposals"],
        ["Verdicts"],
        "decision workers to the leading scheduler's applier (CORRAL_DECISION_WORKERS > 0); answered once stored",
    ),
    Route("NODES_QUERY", s.NODES_QUERY, "query", ["NodesQuery"], ["NodesReply", "Rejected"]),
    Route("ACTORS_QUERY", s.ACTORS_QUERY, "query", ["ActorsQuery"], ["ActorsReply", "Rejected"]),
    Route("TAINTS_QUERY", s.TAINTS_QUERY, "query", ["TaintsQuery"], ["TaintsReply", "Rejected"]),
    Route("STATUS_QUERY", s.STATUS_QUERY, "query", ["StatusQuery"], ["StatusReply", "Rejected"]),
    Route("DECISION_QUERY", s.DECISION_QUERY, "query", ["DecisionQuery"], ["Decision", "Rejected"]),
    Route("VCLUSTER_QUERY", s.VCLUSTER_QUERY, "query", ["VirtualClusterQuery"], ["VirtualClusterReply", "Rejected"]),
    Route(
        "VCLUSTERS_QUERY", s.VCLUSTERS_QUERY, "query", ["VirtualClustersQuery"], ["VirtualClustersReply", "Rejected"]
    ),
    Route("VCLUSTER_WORK_QUERY", s.VCLUSTER_WORK_QUERY, "query", ["ScopedWorkQuery"], ["ScopedWorkReply", "Rejected"]),
    Route("VCLUSTER_NODES_QUERY", s.VCLUSTER_NODES_QUERY, "query", ["ScopedNodesQuery"], ["NodesReply", "Rejected"]),
    Route(
        "AUTOSCALER_STATUS_QUERY",
        s.AUTOSCALER_STATUS_QUERY,
        "query",
        ["AutoscalerStatusQuery"],
        ["AutoscalerStatusReply", "Rejected"],
    ),
    Route(
        "AUTOSCALER_WHY_QUERY",
        s.AUTOSCALER_WHY_QUERY,
        "query",
        ["AutoscalerWhyQuery"],
        ["AutoscalerWhyReply", "Rejected"],
    ),
    Route("EVENTS_SUBJECTS", s.EVENTS_SUBJECTS, "stream subjects", ["AnyEvent"]),
    Route(
        "event_subject(NODE, node_id)",
        pattern(s.event_subject, s.NODE, token="node_id"),
        "event",
        _event_names(
            ev.NodeRegistered,
            ev.NodeDied,
            ev.NodeLabelsChanged,
            ev.NodeUnreachable,
            ev.NodeReachable,
            ev.NodeDeclaredDead,
        ),
    ),
    Route(
        "event_subject(TAINT, node_id)", pattern(s.event_subject, s.TAINT, token="node_id"), "event", ["TaintsChanged"]
    ),
    Route(
        "event_subject(ACTOR, actor_id)",
        pattern(s.event_subject, s.ACTOR, token="actor_id"),
        "event",
        _event_names(ev.ActorSubmitted, ev.ActorPlaced, ev.ActorPending, ev.ActorFailed, ev.ActorRemoved),
    ),
    Route(
        "batch_subject(ACTOR)",
        s.batch_subject(s.ACTOR),
        "event batch",
        _event_names(ev.ActorSubmitted, ev.ActorPlaced, ev.ActorPending, ev.ActorFailed, ev.ActorRemoved),
        note="consecutive actor events a scheduler flush appends: a JSON array of them, in order; Nats-Msg-Id "
        "`<first event id>+<count>`; each event is addressed by the message's sequence and its index",
    ),
    Route(
        "event_subject(PLACEMENT_GROUP, pg_id)",
        pattern(s.event_subject, s.PLACEMENT_GROUP, token="pg_id"),
        "event",
        _event_names(
            ev.PlacementGroupSubmitted,
            ev.PlacementGroupPlaced,
            ev.PlacementGroupPending,
            ev.PlacementGroupBundlesLost,
            ev.PlacementGroupRemoved,
        ),
    ),
    Route(
        "ELECTIONS",
        s.ELECTIONS,
        "event",
        ["SchedulerElected"],
        note="its newest message names the scheduler whose events count",
    ),
    Route(
        "event_subject(VCLUSTER, vc_id)",
        pattern(s.event_subject, s.VCLUSTER, token="vc_id"),
        "event",
        _event_names(ev.VirtualClusterRequested, ev.VirtualClusterDestroyRequested),
        note="intents, written by the vclusters service",
    ),
    Route(
        "event_subject(VNODE, vc_id)",
        pattern(s.event_subject, s.VNODE, token="vc_id"),
        "event",
        _event_names(
            ev.VirtualClusterQueued, ev.VirtualNodesReserved, ev.VirtualNodeResized, ev.VirtualClusterDestroyed
        ),
        note="the scheduler's facts: admission queue, virtual nodes reserved or resized, destroyed",
    ),
    Route(
        "AUTOSCALER_DECISIONS",
        s.AUTOSCALER_DECISIONS,
        "event",
        _event_names(*s.AUTOSCALER_EVENTS),
        note="every autoscaler decision, each appended expecting the subject's last sequence (one writer at a time)",
    ),
    Route("HEARTBEATS", s.HEARTBEATS, "heartbeat", ["Heartbeat"], note="plain publish, no reply"),
    Route("heartbeat_subject(node_id)", pattern(s.heartbeat_subject, token="node_id"), "heartbeat", ["Heartbeat"]),
    Route(
        "health_subject(service)",
        pattern(s.health_subject, token="service"),
        "query",
        ["HealthQuery"],
        ["HealthReply"],
        note="answered by every service: its view's sequence and whether its snapshots are saved",
    ),
    Route(
        "DEAD_LETTERS_SUBJECTS",
        s.DEAD_LETTERS_SUBJECTS,
        "dead letters",
        [],
        note="the raw bytes a service could not decode or apply; headers Corral-Reason, Corral-Subject and (for "
        "an event of the log) Corral-Sequence say why and where from",
    ),
    Route(
        "dead_letter_subject(service)",
        pattern(s.dead_letter_subject, token="service"),
        "dead letters",
        [],
        note="one subject per service: requests it refused as unreadable",
    ),
    Route(
        "event_dead_letter_subject(service)",
        pattern(s.event_dead_letter_subject, token="service"),
        "dead letters",
        [],
        note="events of the log a service skipped (unreadable or unfoldable), one per service and sequence",
    ),
]
"""Every subject constant and pattern; `{name}` marks a token (an id, made safe by `subjects.token`)."""

OTHER_CONSTANTS = {
    "PREFIX": "the first token of every subject",
    "EVENTS_STREAM": "stream holding EVENTS_SUBJECTS: the event log of record (file storage)",
    "REQUESTS_STREAM": "work-queue stream holding REQUESTS_SUBJECTS",
    "REQUESTS_CONSUMER": "the scheduler's durable consumer of REQUESTS_STREAM",
    "DEAD_LETTERS_STREAM": "stream holding DEAD_LETTERS_SUBJECTS",
    "LEASE_BUCKET": "NATS KV bucket holding the scheduler lease",
    "SCHEDULER_LEASE_KEY": "the lease's key in LEASE_BUCKET",
    "REFUSALS_BUCKET": "NATS KV bucket keeping each keyed durable request (key: request.<its request sequence>) and "
    "its refusal (key: its request sequence)",
    "ELECTIONS_BUCKET": "NATS KV bucket recording each real election (key: epoch), checked by every reader",
    "REPLY_HEADER": "header of a durable request naming the inbox its RequestReply goes to",
    "KEY_HEADER": "header of a durable request sent with an idempotency key (its command_id): the request is kept",
    "DEAD_LETTER_REASON": "header of a dead letter: why it was set aside",
    "DEAD_LETTER_SUBJECT": "header of a dead letter: the subject it came on",
    "DEAD_LETTER_SEQUENCE": "header of an event's dead letter: its sequence in the event log",
    "NODE": "event aggregate token",
    "TAINT": "event aggregate token",
    "ACTOR": "event aggregate token",
    "PLACEMENT_GROUP": "event aggregate token",
    "SCHEDULER": "event aggregate token",
    "VCLUSTER": "event aggregate token",
    "VNODE": "event aggregate token",
    "AUTOSCALER": "event aggregate token of the autoscaler's decisions, and its service token",
    "AUTOSCALER_LEASE_BUCKET": "NATS KV bucket holding the autoscaler lease",
    "AUTOSCALER_LEASE_KEY": "the autoscaler lease's key in AUTOSCALER_LEASE_BUCKET",
    "LABELS": "service token of the labels service's commands and queries",
    "TAINTS": "service token of the taints service's commands and queries",
    "VCLUSTERS": "service token of the vclusters service's commands and queries",
    "BATCH_TOKEN": "the last token of a batch subject (batch_subject): no id's token is this",
    "DEAD_LETTER_INDEX": "header of an event's dead letter when the event came in a batch: its index in the batch",
}
"""The constants of `schemas/subjects.py` that are not subjects: names of streams, buckets, headers, tokens."""
