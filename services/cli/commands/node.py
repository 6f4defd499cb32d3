"""`corral node start|list|remove`: run a node agent in the foreground, list live nodes, take a node out."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from nats.aio.msg import Msg

from schemas import ActorFailed, ActorPlaced, ActorRemoved, AnyEvent
from schemas import subjects as s
from schemas.queries import NodeInfo
from services.cli import args as types
from services.cli.commands.status import cpu_usage, label_list, other_resources, taint_list
from services.cli.common import (
    CliError,
    UsageError,
    add_connection_arguments,
    connected,
    read_input,
    say,
    stop_signals,
)
from services.cli.output import add_output_argument, structured
from services.cli.registry import Subcommands
from services.cli.table import format_table
from services.core.errors import CodecError, LabelError
from services.core.labels import ZONE, merge_labels, parse_labels_document
from services.runtime.codec import decode

ACTOR_EVENTS = f"{s.PREFIX}.evt.{s.ACTOR}.>"


def add_parsers(commands: Subcommands) -> None:
    """Register `node` with `start`, `list` and `remove`."""
    node = commands.add_parser("node", help="run a node agent, list nodes, remove a node", description="Nodes.")
    verbs = node.add_subparsers(dest="verb", metavar="VERB", required=True)

    start = verbs.add_parser(
        "start",
        help="register a node and keep it alive (heartbeats) until Ctrl-C",
        description="Register a node, print a line when it is registered, then stay in the foreground: heartbeats "
        "keep it alive, and each actor placed on it prints `started ACTOR`, each of those that fails or is removed "
        "`stopped ACTOR (reason)`. On SIGINT or SIGTERM the agent stops without removing the node: the labels "
        "service declares it dead after the heartbeat timeout, as it would a crashed node.",
    )
    start.add_argument("node_id", metavar="NODE_ID", help="the node's id")
    start.add_argument(
        "--resources", type=types.resources, required=True, metavar="NAME=N,...", help="for example CPU=8,GPU=1"
    )
    start.add_argument("--labels", type=types.labels, default={}, metavar="K=V,...", help="user labels")
    start.add_argument(
        "--labels-file",
        metavar="FILE",
        help="a YAML map of user labels, at most 1 MiB, no anchors (--labels wins where both set a key)",
    )
    start.add_argument(
        "--taints", type=types.taints, default=[], metavar="K=V:EFFECT,...", help="taints the node starts with"
    )
    start.add_argument("--zone", help="availability zone (label corral.io/availability-zone)")
    start.add_argument("--region", help="region (label corral.io/availability-region)")
    start.add_argument("--hostname", help="host name (label corral.io/hostname)")
    start.add_argument("--address", default="", metavar="ADDR", help="the node's address (`corral taint` can use it)")
    start.add_argument(
        "--node-type",
        default=os.environ.get("CORRAL_NODE_TYPE") or None,
        metavar="TYPE",
        help="the autoscaler's node type (label corral.io/node-type; default: $CORRAL_NODE_TYPE, which the "
        "autoscaler's command provider sets)",
    )
    start.add_argument(
        "--launch-id",
        default=os.environ.get("CORRAL_LAUNCH_ID") or None,
        metavar="ID",
        help="the autoscaler's launch (label corral.io/launch-id; default: $CORRAL_LAUNCH_ID)",
    )
    add_connection_arguments(start, service="labels service")
    start.set_defaults(run=run_start, parser=start)

    listing = verbs.add_parser(
        "list", help="list live nodes", description="List live nodes, optionally only those matching a selector."
    )
    listing.add_argument(
        "--selector",
        type=types.selector,
        action="append",
        metavar="KEY=COND",
        help="only nodes whose labels match, repeatable: zone=z1, zone=in(z1,z2), gpu=exists()",
    )
    add_output_argument(listing, ("table", "json", "yaml"), json=True)
    add_connection_arguments(listing, service="labels service")
    listing.set_defaults(run=run_list, parser=listing)

    remove = verbs.add_parser(
        "remove",
        help="take a node out now (its actors fail and restart elsewhere when they may)",
        description=(
            "Take a node out of the cluster now, as if it died, and forget the labels and taints operators set or "
            "removed on it (a node that only missed its heartbeats keeps them). A node whose agent still runs "
            "registers again: the answer says so when the agent was heard from lately. To take a node out for good, "
            "cordon and drain it and stop its agent."
        ),
    )
    remove.add_argument("node_id", metavar="NODE_ID", help="the node's id")
    add_connection_arguments(remove, service="labels service")
    remove.set_defaults(run=run_remove, parser=remove)


def node_labels(args: argparse.Namespace) -> dict[str, str]:
    """`--labels-file` merged with `--labels` (the flag wins)."""
    from_file: dict[str, str] = {}
    if args.labels_file:
        source = f"--labels-file {args.labels_file}"
        try:
            from_file = parse_labels_document(read_input(args.labels_file, source), source)
        except LabelError as error:
            raise CliError(str(error)) from None
    return merge_labels(from_file, args.labels)


class ActorWatch:
    """Turns actor events into `started` / `stopped` lines for the actors on one node."""

    def __init__(self, node_id: str) -> None:
        self.node_id = node_id
        self.running: set[str] = set()

    def line(self, event: AnyEvent) -> str | None:
        """The line to print for `event`, if it concerns this node."""
        if isinstance(event, ActorPlaced) and event.node_id == self.node_id:
            self.running.add(event.actor_id)
            where = f" (placement group {event.placement_group_id})" if event.placement_group_id else ""
            return f"started {event.actor_id}{where}"
        if isinstance(event, ActorFailed) and event.actor_id in self.running:
            self.running.discard(event.actor_id)
            restart = ", will restart" if event.will_restart else ""
            return f"stopped {event.actor_id} ({event.reason}{restart})"
        if isinstance(event, ActorRemoved) and event.actor_id in self.running:
            self.running.discard(event.actor_id)
            return f"stopped {event.actor_id} (removed)"
        return None


def run_start(args: argparse.Namespace) -> int:
    """`corral node start`."""
    labels = node_labels(args)
    watch = ActorWatch(args.node_id)

    async def on_event(msg: Msg) -> None:
        try:
            event: AnyEvent = decode(msg.data, AnyEvent)
        except CodecError:
            return
        line = watch.line(event)
        if line is not None:
            say(line)

    async def main() -> None:
        with stop_signals() as stop:
            async with connected(args, name=f"corral-node-{args.node_id}", quiet=False) as client:
                events = await client.bus.nc.subscribe(ACTOR_EVENTS, cb=on_event)
                await client.register_node(
                    args.node_id,
                    args.resources,
                    labels,
                    args.taints,
                    address=args.address,
                    zone=args.zone,
                    region=args.region,
                    hostname=args.hostname,
                    node_type=args.node_type,
                    launch_id=args.launch_id,
                )
                zone = f" in zone {args.zone}" if args.zone else ""
                say(f"node {args.node_id} registered ({types.format_resources(args.resources)}){zone}; Ctrl-C stops it")
                await stop.wait()
                await events.unsubscribe()
        print(
            f"node {args.node_id} stopped: heartbeats end, and the labels service declares it dead after the "
            "heartbeat timeout",
            file=sys.stderr,
        )

    asyncio.run(main())
    return 0


def nodes_table(nodes: list[NodeInfo]) -> str:
    """One row per node: address, zone, CPU used/total, other resources, user labels, taints, actors."""
    rows = [
        (
            node.node_id,
            node.address or "-",
            node.labels.get(ZONE, "-"),
            cpu_usage(node),
            other_resources(node),
            label_list(node),
            taint_list(node),
            node.actors,
        )
        for node in nodes
    ]
    return format_table(("NODE", "ADDRESS", "ZONE", "CPU", "RESOURCES", "LABELS", "TAINTS", "ACTORS"), rows)


def run_list(args: argparse.Namespace) -> int:
    """`corral node list`."""
    try:
        selector = types.merge("--selector", args.selector or [])
    except ValueError as error:
        raise UsageError(str(error)) from None

    async def main() -> list[NodeInfo]:
        async with connected(args) as client:
            return await client.nodes(selector)

    nodes = asyncio.run(main())
    if args.output != "table":
        say(structured(nodes, args.output))
    elif nodes:
        say(nodes_table(nodes))
    else:
        print("No nodes found." if not selector else "No nodes match the selector.", file=sys.stderr)
    return 0


def run_remove(args: argparse.Namespace) -> int:
    """`corral node remove`."""

    async def main() -> str:
        async with connected(args) as client:
            return (await client.remove_node(args.node_id)).message

    say(asyncio.run(main()) or f"node {args.node_id} removed")
    return 0
