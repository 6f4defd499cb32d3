"""`corral status` (nodes, actors, pending work as tables) and `corral why` (why an actor waits, or where it runs)."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence

from schemas import Pending, Placed
from schemas.queries import ActorInfo, NodeInfo, StatusReply
from services.cli.args import format_taint, positive_int
from services.cli.commands.history import flag_value
from services.cli.common import CliError, UsageError, add_connection_arguments, connected, say
from services.cli.output import add_output_argument, structured
from services.cli.registry import Subcommands
from services.cli.table import format_table
from services.client import CorralError, RejectedError
from services.client.client import WorkKind
from services.client.times import parse_at
from services.core.amounts import format_amount
from services.core.labels import ZONE, user_labels

MAX_NODE_IDS = 10
"""`corral why` lists at most this many node ids per reason, then `and N more`."""

NONE = "<none>"


def cpu_usage(node: NodeInfo) -> str:
    """`used/total` CPU of a node."""
    total = node.resources.get("CPU", 0.0)
    return f"{format_amount('CPU', total - node.available.get('CPU', 0.0))}/{format_amount('CPU', total)}"


def other_resources(node: NodeInfo) -> str:
    """`GPU 1/4, memory 0/16`: used/total of every resource but CPU."""
    parts = []
    for name in sorted(node.resources):
        if name == "CPU":
            continue
        total = node.resources[name]
        parts.append(
            f"{name} {format_amount(name, total - node.available.get(name, 0.0))}/{format_amount(name, total)}"
        )
    return ", ".join(parts) or NONE


def taint_list(node: NodeInfo) -> str:
    """The node's taints as `key=value:Effect`, comma-separated."""
    return ",".join(format_taint(taint) for taint in node.taints) or NONE


def label_list(node: NodeInfo) -> str:
    """The node's user labels as `k=v`, comma-separated."""
    return ",".join(f"{key}={value}" for key, value in sorted(user_labels(node.labels).items())) or NONE


def nodes_table(nodes: Sequence[NodeInfo]) -> str:
    """One row per node: zone, CPU used/total, other resources, taints, number of actors."""
    rows = [
        (
            node.node_id,
            node.labels.get(ZONE, "-"),
            cpu_usage(node),
            other_resources(node),
            taint_list(node),
            node.actors,
        )
        for node in nodes
    ]
    return format_table(("NODE", "ZONE", "CPU", "RESOURCES", "TAINTS", "ACTORS"), rows)


def actors_table(actors: Sequence[ActorInfo]) -> str:
    """One row per actor: status, node, restarts."""
    rows = [(actor.actor_id, actor.status, actor.node_id or "-", actor.restarts) for actor in actors]
    return format_table(("ACTOR", "STATUS", "NODE", "RESTARTS"), rows)


def pending_table(pending: Sequence[Pending]) -> str:
    """One row per waiting actor or placement group, in queue order, with its message."""
    rows = [(item.id if item.kind == "actor" else f"{item.id} ({item.kind})", item.message) for item in pending]
    return format_table(("ID", "MESSAGE"), rows)


def section(title: str, count: int, table: str, empty: str) -> str:
    """A titled table, or a one-line note when there is nothing to show."""
    return f"{title} ({count}):\n{table}" if count else f"{title}: {empty}"


def render_status(status: StatusReply) -> str:
    """The three tables (placement groups too, when there are any)."""
    parts = [
        section("NODES", len(status.nodes), nodes_table(status.nodes), "none registered"),
        section("ACTORS", len(status.actors), actors_table(status.actors), "none"),
        section("PENDING", len(status.pending), pending_table(status.pending), "nothing waits"),
    ]
    if status.placement_groups:
        rows = [(pg_id, ",".join(nodes) or "-") for pg_id, nodes in sorted(status.placement_groups.items())]
        parts.append(section("PLACEMENT GROUPS", len(rows), format_table(("GROUP", "BUNDLE NODES"), rows), ""))
    return "\n\n".join(parts)


def node_ids(ids: Sequence[str], limit: int = MAX_NODE_IDS) -> str:
    """`a, b, c`, or the first `limit` ids and `and N more`."""
    shown = ", ".join(ids[:limit])
    return f"{shown} and {len(ids) - limit} more" if len(ids) > limit else shown


def render_why(decision: Placed | Pending, work_id: str, kind: str) -> str:
    """Where the work runs, or its message and one line per reason with the count and the nodes behind it."""
    noun = "Actor" if kind == "actor" else "Placement group"
    if isinstance(decision, Placed):
        if kind != "actor":
            bundles = ", ".join(f"bundle {i} on {node}" for i, node in enumerate(decision.bundle_nodes))
            return f"{noun} {work_id} is placed: {bundles or 'no bundles'}."
        where = f"{noun} {work_id} runs on node {decision.node_id}"
        if decision.bundle_index >= 0:
            where += f" (placement group bundle {decision.bundle_index})"
        return where + "."
    lines = [f"{noun} {work_id} is pending.", f"Message: {decision.message}"]
    if decision.group_reason:
        lines.append(f"Blocked by: {decision.group_reason}")
    if decision.reasons:
        ordered = sorted(decision.reasons.items(), key=lambda item: (-item[1], item[0]))
        rows = [(count, reason, node_ids(decision.nodes_by_reason.get(reason, []))) for reason, count in ordered]
        lines += ["Reasons:", format_table(("COUNT", "REASON", "NODES"), rows, indent="  ")]
    return "\n".join(lines)


def add_parsers(commands: Subcommands) -> None:
    """Register `status` and `why`."""
    status = commands.add_parser(
        "status",
        help="show nodes, actors and pending work as the scheduler sees them",
        description="Show three tables: nodes (zone, CPU used/total, other resources, taints, actors), actors "
        "(status, node, restarts) and pending work (with the reason it waits), as the scheduler sees them.",
    )
    add_output_argument(status, ("table", "json", "yaml"), json=True)
    status.add_argument(
        "--vc", metavar="ID", help="only this virtual cluster: its virtual nodes, its actors and its pending work"
    )
    status.add_argument(
        "--limit",
        type=positive_int,
        metavar="N",
        help="at most N of each: nodes, actors, placement groups, pending work (default: all, read page by page)",
    )
    add_connection_arguments(status, service="scheduler")
    status.set_defaults(run=run_status, parser=status)

    why = commands.add_parser(
        "why",
        help="explain why an actor is pending, or say where it runs",
        description="Explain a decision: for a pending actor, the message and one line per reason with the number "
        f"of nodes and their ids (at most {MAX_NODE_IDS}, then 'and N more'), and, when an autoscaler runs, what it "
        "does about it (launching nodes for it, or why no node type can host it); for a placed one, where it runs. "
        "Exits 1 when the scheduler does not know the actor.",
    )
    why.add_argument("actor_id", metavar="ACTOR_ID", help="the actor (or, with --placement-group, the group)")
    why.add_argument("--placement-group", action="store_true", help="ACTOR_ID names a placement group")
    why.add_argument(
        "--at",
        metavar="TIME|SEQ",
        help="explain it as the scheduler did at that point: a log sequence, or a UTC time (HH:MM[:SS] today, or "
        "ISO 8601), folded from the log (from the scheduler's snapshot in $CORRAL_REDIS_URL when one is early enough)",
    )
    add_connection_arguments(why, service="scheduler")
    why.set_defaults(run=run_why, parser=why)


def run_status(args: argparse.Namespace) -> int:
    """`corral status`."""

    async def main() -> StatusReply:
        async with connected(args) as client:
            if not args.vc:
                return await client.status(args.limit)
            nodes = await client.nodes(vcluster_id=args.vc, limit=args.limit)
            work = await client.virtual_cluster_work(args.vc, args.limit)
            return StatusReply(nodes, work.actors, work.placement_groups, work.pending, work.sequence)

    status = asyncio.run(main())
    say(render_status(status) if args.output == "table" else structured(status, args.output))
    return 0


def run_why(args: argparse.Namespace) -> int:
    """`corral why ACTOR_ID`."""
    kind: WorkKind = "placement_group" if args.placement_group else "actor"
    at = flag_value(parse_at, "--at", args.at) if args.at is not None else None
    if at is not None and kind != "actor":
        raise UsageError("--at: explains actors only, not placement groups")

    async def main() -> tuple[Placed | Pending, str]:
        async with connected(args) as client:
            if at is not None:
                try:
                    sequence = await client.sequence_at(at)
                    return await client.why(args.actor_id, at=sequence), f"(as of log sequence {sequence})"
                except RejectedError as error:  # read from the log: no service refused it
                    raise CliError(str(error)) from None
            try:
                decision = await client.decision(args.actor_id, kind)
            except RejectedError as error:
                noun = "actor" if kind == "actor" else "placement group"
                raise CliError(f"unknown {noun} {args.actor_id!r}: the scheduler says {error}") from None
            if isinstance(decision, Placed):
                return decision, ""
            try:
                return decision, (await client.autoscaler_why(args.actor_id, kind)).message
            except CorralError:  # no autoscaler runs (or it cannot say): the scheduler's answer alone
                return decision, ""

    decision, footnote = asyncio.run(main())
    say(render_why(decision, args.actor_id, kind) + (f"\n{footnote}" if footnote else ""))
    return 0
