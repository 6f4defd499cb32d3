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
import inspect
import json
from pathlib import Path
from typing import Any

import msgspec

import schemas
from schemas import AnyEvent, Pending, Placed, proposals
from schemas import commands as cmd
from schemas import queries as q
from schemas import replies as rp
from schemas import subjects as s
from schemas.routes import OTHER_CONSTANTS, ROUTES, Route
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
            ("RequestBatch", cmd.RequestBatch),
            ("DurableRequest", cmd.DurableRequest),
            ("Proposals", proposals.Proposals),
        ],
    ),
    "events": ("Events: the facts the log records on corral.evt.>", [("AnyEvent", AnyEvent)]),
    "replies": (
        "Replies to commands (CommandReply), durable scheduler requests (RequestReply) and their batches (BatchReply)",
        [
            ("CommandReply", rp.CommandReply),
            ("RequestReply", rp.RequestReply),
            ("BatchReply", rp.BatchReply),
            ("DurableReply", rp.DurableReply),
            ("Verdicts", proposals.Verdicts),
        ],
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
    defs: dict[str, Any] = {name: _described(schema) for name, schema in components.items()}
    refs = []
    for (name, _), root in zip(named, roots, strict=True):
        ref = f"#/$defs/{name}"
        if root != {"$ref": ref}:  # a union (or a renamed type): keep it under its own name
            defs[name] = root
        refs.append({"$ref": ref})
    return {"$schema": DRAFT, "title": f"Corral {title}", "anyOf": refs, "$defs": defs}


def _described(schema: dict[str, Any]) -> dict[str, Any]:
    """A type's schema with its docstring dedented (msgspec 0.23 does, 0.22 did not: the export must not depend on
    which) and its tag property (msgspec writes `{"enum": [tag]}`, bare) described."""
    if isinstance(schema.get("description"), str):
        schema["description"] = inspect.cleandoc(schema["description"])
    properties = schema.get("properties", {})
    for name, field in properties.items():
        if set(field) == {"enum"} and len(field["enum"]) == 1:
            properties[name] = {
                **field,
                "description": f"Which kind of {schema['title']} this is: always {json.dumps(field['enum'][0])}.",
            }
    return schema


def route_entry(route: Route) -> dict[str, Any]:
    """A route's entry in `subjects.json`: its messages with the schema file and `$defs` entry describing each."""
    entry: dict[str, Any] = {
        "name": route.name,
        "subject": route.subject,
        "kind": route.kind,
        "carries": [{"type": kind, "schema": _where(kind)} for kind in route.carries],
    }
    if route.replies:
        entry["replies"] = [{"type": kind, "schema": _where(kind)} for kind in route.replies]
    if route.note:
        entry["note"] = route.note
    return entry


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
            f"schemas/subjects.py constant(s) {', '.join(missing)} not described in schemas/routes.py "
            "(add them to ROUTES or OTHER_CONSTANTS)"
        )
    for route in ROUTES:
        if route.name in constants and constants[route.name] != route.subject:
            raise CliError(f"route {route.name}: subject {route.subject!r} is not {constants[route.name]!r}")
    return {
        "title": "Corral subjects: what each NATS subject carries and what answers it",
        "subjects": [route_entry(route) for route in ROUTES],
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
