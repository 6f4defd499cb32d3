"""`corral describe node|actor|pg|vc ID`: everything known about one object, laid out as `kubectl describe` does.

`describe actor` ends with the explanation of the actor's decision and its history from the log (ACTOR_SECTIONS, in
order).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from schemas import ActorPlaced, ActorSubmitted, Pending, PlacementGroupSubmitted, ScheduleRequest
from schemas.queries import NodeInfo
from services.cli.args import format_resources
from services.cli.commands.status import render_why
from services.cli.commands.vc import render_show
from services.cli.common import CliError, add_connection_arguments, connected, say
from services.cli.history import history_lines
from services.cli.listing import NONE, Snapshot, node_status, read_snapshot, taints_text
from services.cli.records import Record, age, first_record
from services.cli.registry import Subcommands
from services.cli.table import format_table
from services.client import Client, RejectedError
from services.core.amounts import format_amount
from services.core.labels import UNREACHABLE_TAINT

KINDS = {"node": "node", "no": "node", "actor": "actor", "pg": "pg", "placementgroup": "pg", "vc": "vc"}
KINDS |= {"nodes": "node", "actors": "actor", "pgs": "pg", "vcs": "vc", "virtualcluster": "vc"}


def field(name: str, value: object) -> str:
    """`Name:        value`, aligned as kubectl aligns its top-level fields."""
    return f"{name + ':':<22}{value}"


def aligned(name: str, entries: list[str]) -> list[str]:
    """`Labels:  first` then one entry per line under it (`<none>` when there is none)."""
    entries = entries or [NONE]
    return [field(name, entries[0]), *(" " * 22 + entry for entry in entries[1:])]


def mapping_lines(name: str, values: dict[str, str]) -> list[str]:
    """`Labels:  k=v` then one `k2=v2` per line under it (`<none>` when empty)."""
    return aligned(name, [f"{key}={value}" for key, value in sorted(values.items())])


def label_sources(node: NodeInfo) -> list[str]:
    """Each label and where it comes from (the agent, or an operator), then the agent's labels an operator removed."""
    if node.layers is None:
        return [f"{key}={value}" for key, value in sorted(node.labels.items())]
    agent, edits = node.layers.agent_labels, node.layers.operator_labels
    shown = [
        f"{key}={value} ({'operator' if key in edits.labels else 'agent'})"
        for key, value in sorted(node.labels.items())
    ]
    return shown + [
        f"{key}- (operator removed the agent's {key}={agent[key]})" for key in edits.removed if key in agent
    ]


def taint_sources(node: NodeInfo) -> list[str]:
    """Each taint and where it comes from (the agent, or an operator), then the agent's taints an operator removed."""
    if node.layers is None:
        return [taints_text([taint]) for taint in node.taints]
    edits = node.layers.operator_taints
    shown = [f"{taints_text([taint])} ({'operator' if taint in edits.taints else 'agent'})" for taint in node.taints]
    return shown + [
        f"{taint.key}:{taint.effect}- (operator removed the agent's {taints_text([taint])})"
        for taint in edits.removed
        if taint in node.layers.agent_taints
    ]


def created(record: Record | None, now: datetime) -> str:
    """`2026-11-26T10:01:03Z (4m ago)`, from the object's first event."""
    if record is None:
        return "<unknown>"
    return f"{record.time.astimezone(UTC).isoformat(timespec='seconds')} ({age(record.time, now)} ago)"


def describe_node(node: NodeInfo, snapshot: Snapshot, record: Record | None, now: datetime) -> list[str]:
    """Name, status, labels, taints, capacity, allocated resources, the actors and bundles on it."""
    lines = [field("Name", node.node_id), field("Status", node_status(node)), field("Address", node.address or NONE)]
    silent = [taint for taint in node.taints if taint.key == UNREACHABLE_TAINT]
    if silent:
        dead = "; declared dead: work not tolerating it failed" if silent[0].effect == "NoExecute" else ""
        lines.append(field("Last heard", f"{silent[0].value} (missed heartbeats{dead})"))
    lines += aligned("Labels", label_sources(node)) + aligned("Taints", taint_sources(node))
    lines += [field("Unschedulable", str(node_status(node) != "Ready").lower()), field("Created", created(record, now))]
    if node.parent_node:
        lines.append(field("Carved from", node.parent_node))
    lines.append(field("Capacity", format_resources(node.resources) or NONE))
    rows = []
    for name in sorted(node.resources, key=lambda name: (name != "CPU", name)):
        total, used = node.resources[name], node.resources[name] - node.available.get(name, 0.0)
        share = f"({used / total:.0%})" if total else ""
        rows.append([name, f"{format_amount(name, used)} {share}".strip(), format_amount(name, total)])
    lines += ["Allocated resources:", format_table(["Resource", "Requests", "Total"], rows, indent="  ")]
    actors = [actor for actor in snapshot.actors if actor.node_id == node.node_id]
    lines.append(f"Actors ({len(actors)}):" if actors else f"Actors: {NONE}")
    if actors:
        cells = [[actor.actor_id, actor.namespace, str(actor.restarts)] for actor in actors]
        lines.append(format_table(["Name", "Namespace", "Restarts"], cells, indent="  "))
    bundles = [
        f"{pg_id} bundle {index}"
        for pg_id, nodes in sorted(snapshot.placement_groups.items())
        for index, bundle_node in enumerate(nodes)
        if bundle_node == node.node_id
    ]
    lines.append(field("Placement bundles", ", ".join(bundles) or NONE))
    return lines


def request_lines(request: ScheduleRequest) -> list[str]:
    """What the actor asked for, as submitted."""
    selector = {key: str(value) for key, value in request.label_selector.items()}
    tolerations = {key: str(value) for key, value in request.tolerations.items()}
    return [
        field("Requests", format_resources(request.resources) or NONE),
        *mapping_lines("Node-Selectors", selector),
        *mapping_lines("Tolerations", tolerations),
        field("Strategy", request.scheduling_strategy or "DEFAULT"),
        field("Priority", request.priority),
        field("Max restarts", request.max_restarts),
        field("Virtual cluster", request.vcluster_id or "<root>"),
    ]


def submitted(record: Record | None) -> ScheduleRequest | None:
    """The request an actor's first event carries (an `ActorPlaced` placed as submitted stands for both)."""
    event = None if record is None else record.event
    if isinstance(event, ActorSubmitted | ActorPlaced):
        return event.request
    return None


async def describe_actor(client: Client, actor_id: str) -> list[str]:
    """Name, namespace, labels, status, node, restarts, what it asked for, then the explanation of its decision."""
    snapshot = await read_snapshot(client, "actors", None)
    actor = next((actor for actor in snapshot.actors if actor.actor_id == actor_id), None)
    if actor is None:
        raise CliError(f"actor {actor_id!r}: no such actor (the scheduler holds none by that id)")
    record = await first_record(client, "actor", actor_id)
    lines = [field("Name", actor.actor_id), field("Namespace", actor.namespace)]
    lines += mapping_lines("Labels", actor.labels)
    lines += [field("Status", actor.status), field("Node", actor.node_id or NONE), field("Restarts", actor.restarts)]
    lines.append(field("Created", created(record, datetime.now(UTC))))
    request = submitted(record)
    if request is not None:
        lines += request_lines(request)
    decision = await client.decision(actor_id)
    lines += ["Explanation:", *("  " + line for line in render_why(decision, actor_id, "actor").splitlines())]
    return lines


async def actor_history(client: Client, actor_id: str) -> list[str]:
    """Its history from the log, as a story: submitted, pending and why, placed after what, failed, restarted."""
    return ["History:", *("  " + line for line in history_lines(await client.history(actor_id=actor_id)))]


ACTOR_SECTIONS: list[Callable[[Client, str], Awaitable[list[str]]]] = [describe_actor, actor_history]
"""What `describe actor` prints, in order (each section's lines follow the previous one's)."""


async def describe_pg(client: Client, pg_id: str) -> list[str]:
    """Name, status, bundles as asked and where each one is, and for a waiting group the explanation."""
    try:
        decision = await client.decision(pg_id, "placement_group")
    except RejectedError as error:
        raise CliError(f"placement group {pg_id!r}: {error}") from None
    record = await first_record(client, "pg", pg_id)
    status = "pending" if isinstance(decision, Pending) else "placed"
    lines = [field("Name", pg_id), field("Status", status), field("Created", created(record, datetime.now(UTC)))]
    nodes = [] if isinstance(decision, Pending) else list(decision.bundle_nodes)
    if record is not None and isinstance(record.event, PlacementGroupSubmitted):
        request = record.event.request
        lines += [field("Strategy", request.strategy), field("Priority", request.priority)]
        lines.append(field("Virtual cluster", request.vcluster_id or "<root>"))
        rows = [
            [str(index), format_resources(bundle), nodes[index] if index < len(nodes) else "-"]
            for index, bundle in enumerate(request.bundles)
        ]
        lines += ["Bundles:", format_table(["Index", "Resources", "Node"], rows, indent="  ")]
    lines += ["Explanation:", *("  " + line for line in render_why(decision, pg_id, "pg").splitlines())]
    return lines


async def describe(client: Client, kind: str, object_id: str) -> list[str]:
    """The lines of `describe KIND ID`."""
    now = datetime.now(UTC)
    if kind == "node":
        snapshot = await read_snapshot(client, "nodes", None)
        node = next((node for node in snapshot.nodes if node.node_id == object_id), None)
        if node is None:
            raise CliError(f"node {object_id!r}: no such live node")
        return describe_node(node, snapshot, await first_record(client, "node", object_id), now)
    if kind == "actor":
        return [line for section in ACTOR_SECTIONS for line in await section(client, object_id)]
    if kind == "pg":
        return await describe_pg(client, object_id)
    info = await client.virtual_cluster(object_id)
    record = await first_record(client, "vc", object_id)
    return [*render_show(info).splitlines(), f"Created:    {created(record, now)}"]


def describe_kind(text: str) -> str:
    """An argparse type: node, actor, pg or vc (or a plural or alias)."""
    if text.lower() not in KINDS:
        raise argparse.ArgumentTypeError(f"{text!r}: not a kind; use node, actor, pg or vc")
    return KINDS[text.lower()]


def add_parsers(commands: Subcommands) -> None:
    """Register `describe`."""
    parser = commands.add_parser(
        "describe",
        help="show everything known about one node, actor, placement group (pg) or virtual cluster (vc)",
        description="Show one object as `kubectl describe` does: its labels, taints, resources and what runs on it "
        "(node); what it asked for, where it runs and why it waits (actor, pg); its state and virtual nodes (vc).",
    )
    parser.add_argument("kind", type=describe_kind, metavar="KIND", help="node, actor, pg or vc")
    parser.add_argument("object_id", metavar="ID", help="the object's id")
    add_connection_arguments(parser, service="scheduler")
    parser.set_defaults(run=run_describe, parser=parser)


def run_describe(args: argparse.Namespace) -> int:
    """`corral describe KIND ID`."""

    async def main() -> list[str]:
        async with connected(args) as client:
            return await describe(client, args.kind, args.object_id)

    say("\n".join(asyncio.run(main())))
    return 0
