"""`corral schema export`: the wire contract as JSON Schema, one file per group, plus a map of the subjects.

Each group file is a JSON Schema (draft 2020-12) whose root accepts any message of the group and whose `$defs`
name every type, unions included (`#/$defs/AnyEvent`, `#/$defs/SchedulerRequest`, ...). `subjects.json` lists
every subject constant and pattern of `schemas/subjects.py` with the message it carries and what answers it.
Output is deterministic (sorted keys, two-space indent, a trailing newline), so the checked-in copy under
`schemas/jsonschema/` can be compared with a fresh export.
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

import schemas
from schemas import AnyEvent, Pending, Placed, proposals
from schemas import commands as cmd
from schemas import events as ev
from schemas import queries as q
from schemas import replies as rp
from schemas import subjects as s
from services.cli.common import CliError, say
from services.cli.registry import Subcommands

DRAFT = "https://json-schema.org/draft/2020-12/schema"
DEFAULT_OUT = Path(schemas.__file__).resolve().parent / "jsonschema"

Named = tuple[str, Any]
"""A type and the name it gets in `$defs` (Structs keep their class name; unions need one)."""

GROUPS: dict[str, tuple[str, list[Named]]] = {
    "commands": (
        "Commands to the labels, taints and vclusters services (request/reply), heartbeats, and the scheduler's "
        "durable requests",
        [
            ("RegisterNode", cmd.RegisterNode),
            ("SetLabels", cmd.SetLabels),
            ("RemoveNode", cmd.RemoveNode),
            ("Heartbeat", cmd.Heartbeat),
            ("AddTaints", cmd.AddTaints),
            ("RemoveTaints", cmd.RemoveTaints),
            ("CreateVirtualCluster", cmd.CreateVirtualCluster),
            ("DestroyVirtualCluster", cmd.DestroyVirtualCluster),
            ("SchedulerRequest", cmd.SchedulerRequest),
            ("Proposals", proposals.Proposals),
        ],
    ),
    "events": ("Events: the facts the log records on corral.evt.>", [("AnyEvent", AnyEvent)]),
    "replies": (
        "Replies to commands (CommandReply) and to durable scheduler requests (RequestReply)",
        [("CommandReply", rp.CommandReply), ("RequestReply", rp.RequestReply), ("Verdicts", proposals.Verdicts)],
    ),
    "queries": (
        "Queries answered from a service's view, and their replies (a query may also answer Rejected)",
        [
            ("NodesQuery", q.NodesQuery),
            ("NodesReply", q.NodesReply),
            ("ActorsQuery", q.ActorsQuery),
            ("ActorsReply", q.ActorsReply),
            ("TaintsQuery", q.TaintsQuery),
            ("TaintsReply", q.TaintsReply),
            ("StatusQuery", q.StatusQuery),
            ("StatusReply", q.StatusReply),
            ("DecisionQuery", q.DecisionQuery),
            ("Decision", Placed | Pending),
            ("VirtualClusterQuery", q.VirtualClusterQuery),
            ("VirtualClusterReply", q.VirtualClusterReply),
            ("VirtualClustersQuery", q.VirtualClustersQuery),
            ("VirtualClustersReply", q.VirtualClustersReply),
            ("ScopedWorkQuery", q.ScopedWorkQuery),
            ("ScopedWorkReply", q.ScopedWorkReply),
            ("ScopedNodesQuery", q.ScopedNodesQuery),
            ("AutoscalerStatusQuery", q.AutoscalerStatusQuery),
            ("AutoscalerStatusReply", q.AutoscalerStatusReply),
            ("AutoscalerWhyQuery", q.AutoscalerWhyQuery),
            ("AutoscalerWhyReply", q.AutoscalerWhyReply),
            ("HealthQuery", q.HealthQuery),
            ("HealthReply", q.HealthReply),
        ],
    ),
}


def group_schema(title: str, named: list[Named]) -> dict[str, Any]:
    """One group as a JSON Schema: the root accepts any of its messages; `$defs` holds every type by name."""
    roots, components = msgspec.json.schema_components([kind for _, kind in named])
    defs: dict[str, Any] = dict(components)
    refs = []
    for (name, _), root in zip(named, roots, strict=True):
        ref = f"#/$defs/{name}"
        if root != {"$ref": ref}:  # a union (or a renamed type): keep it under its own name
            defs[name] = root
        refs.append({"$ref": ref})
    return {"$schema": DRAFT, "title": f"Corral {title}", "anyOf": refs, "$defs": defs}


@functools.cache
def _defined_in(group: str) -> frozenset[str]:
    """The `$defs` names of one group file."""
    return frozenset(group_schema("", GROUPS[group][1])["$defs"])


def _where(kind: str) -> str:
    """The file and `$defs` entry describing a type name: the group that names it, else the first that holds it."""
    for group, (_, named) in GROUPS.items():
        if any(name == kind for name, _ in named):
            return f"{group}.json#/$defs/{kind}"
    for group in GROUPS:
        if kind in _defined_in(group):
            return f"{group}.json#/$defs/{kind}"
    raise LookupError(f"type {kind!r} is in no exported group")


@dataclass(frozen=True)
class Route:
    """A subject (or pattern), what it is for, the message it carries and what answers it."""

    name: str
    subject: str
    kind: str
    carries: list[str]
    replies: list[str] = field(default_factory=list)
    note: str = ""

    def as_json(self) -> dict[str, Any]:
        """The entry in `subjects.json`."""
        entry: dict[str, Any] = {
            "name": self.name,
            "subject": self.subject,
            "kind": self.kind,
            "carries": [{"type": kind, "schema": _where(kind)} for kind in self.carries],
        }
        if self.replies:
            entry["replies"] = [{"type": kind, "schema": _where(kind)} for kind in self.replies]
        if self.note:
            entry["note"] = self.note
        return entry


_MARK = "PLACEHOLDER0TOKEN"


def pattern(build: Callable[..., str], *args: str, token: str) -> str:
    """A subject builder's output with `{token}` where the id goes (`subjects.token` would escape braces)."""
    return build(*args, _MARK).replace(_MARK, "{" + token + "}")


def _event_names(*kinds: type) -> list[str]:
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
    Route("REQUESTS_SUBJECTS", s.REQUESTS_SUBJECTS, "stream subjects", ["SchedulerRequest"], ["RequestReply"]),
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
}
"""The constants of `schemas/subjects.py` that are not subjects: names of streams, buckets, headers, tokens."""


def subject_constants() -> dict[str, str]:
    """Every upper-case string constant of `schemas/subjects.py`."""
    return {name: value for name, value in vars(s).items() if name.isupper() and isinstance(value, str)}


def subjects_document() -> dict[str, Any]:
    """`subjects.json`: routes and the other constants; fails when `schemas/subjects.py` has an undescribed one."""
    constants = subject_constants()
    described = {route.name for route in ROUTES} | set(OTHER_CONSTANTS)
    missing = sorted(set(constants) - described)
    if missing:
        raise CliError(
            f"schemas/subjects.py constant(s) {', '.join(missing)} not described in services/cli/schema.py "
            "(add them to ROUTES or OTHER_CONSTANTS)"
        )
    for route in ROUTES:
        if route.name in constants and constants[route.name] != route.subject:
            raise CliError(f"route {route.name}: subject {route.subject!r} is not {constants[route.name]!r}")
    return {
        "title": "Corral subjects: what each NATS subject carries and what answers it",
        "subjects": [route.as_json() for route in ROUTES],
        "constants": {
            name: {"value": constants[name], "meaning": meaning} for name, meaning in OTHER_CONSTANTS.items()
        },
    }


def documents() -> dict[str, dict[str, Any]]:
    """File name -> document, for every file the export writes."""
    docs = {f"{group}.json": group_schema(title, named) for group, (title, named) in GROUPS.items()}
    docs["subjects.json"] = subjects_document()
    return docs


def render(document: dict[str, Any]) -> str:
    """Deterministic JSON text: sorted keys, two-space indent, a trailing newline."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def export(out: Path) -> list[Path]:
    """Write every file into `out` (created if missing); returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, document in documents().items():
        path = out / name
        path.write_text(render(document), encoding="utf-8")
        written.append(path)
    return written


def stale(out: Path) -> list[str]:
    """The file names under `out` that differ from a fresh export (or are missing)."""
    differing = []
    for name, document in documents().items():
        path = out / name
        if not path.is_file() or path.read_bytes() != render(document).encode():
            differing.append(name)
    return differing


def add_parsers(commands: Subcommands) -> None:
    """Register `schema export`."""
    schema = commands.add_parser("schema", help="the wire contract as JSON Schema", description=__doc__)
    verbs = schema.add_subparsers(dest="verb", metavar="VERB", required=True)
    export_parser = verbs.add_parser(
        "export",
        help="write commands.json, events.json, replies.json, queries.json and subjects.json",
        description="Write the JSON Schema of the wire contract, one file per group, and subjects.json.",
    )
    export_parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, metavar="DIR", help="folder to write into (default: %(default)s)"
    )
    export_parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if the files in DIR differ from a fresh export"
    )
    export_parser.set_defaults(run=run_export, parser=export_parser)


def run_export(args: argparse.Namespace) -> int:
    """`corral schema export`."""
    if args.check:
        differing = stale(args.out)
        if differing:
            raise CliError(f"{', '.join(differing)} in {args.out} differ from the schemas: run `corral schema export`")
        say(f"{args.out}: up to date")
        return 0
    try:
        written = export(args.out)
    except OSError as error:  # a file where the folder should be, no permission, ...
        raise CliError(f"--out {args.out}: cannot write there ({error.strerror or error})") from None
    for path in written:
        say(f"wrote {path}")
    return 0
