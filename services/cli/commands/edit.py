"""`corral label`, `taint`, `cordon`, `uncordon` and `drain`: change a node as kubectl does.

`label node ID k=v k2-` and `taint node ID k=v:Effect k:Effect- k-` edit single keys; the old spellings
(`label --node-id ID k=v`, which replaces every user label, and `taint --node-id|--node-address ID --append|--delete`)
still work, with a deprecation notice on stderr, and are hidden from --help.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys

import nats.errors
from nats.aio.subscription import Subscription

from schemas import subjects as s
from schemas.queries import NodeInfo
from services.cli import args as types
from services.cli.common import CliError, UsageError, add_connection_arguments, connected, say
from services.cli.edits import label_edit, removals, taint_edit
from services.cli.listing import CORDON, DRAIN
from services.cli.output import deprecated
from services.cli.registry import Subcommands
from services.client import Client
from services.client.deadlines import check, deadline_in

NODE_WORDS = ("node", "nodes", "no")
DRAIN_TIMEOUT = 60.0
DRAIN_RECHECK = 0.5
"""Seconds between two looks at a draining node when no event woke the wait sooner."""


def add_parsers(commands: Subcommands) -> None:
    """Register `label`, `taint`, `cordon`, `uncordon` and `drain`."""
    label = commands.add_parser(
        "label",
        help="add, change or remove a node's labels: label node ID k=v k2-",
        description="Edit a node's user labels: KEY=VALUE adds one (changing an existing value needs --overwrite), "
        "KEY- removes one; --replace makes the given labels the node's only user labels. System labels (under "
        "corral.io/) stay. Your edits lie over the labels the node's agent declared: they hold when the agent "
        "registers the node again (a KEY- of an agent's label included), until you change them or `corral node "
        "remove` the node. `describe node` shows which labels are the agent's and which yours.",
    )
    label.add_argument("words", nargs="*", metavar="node ID KEY=VALUE|KEY-", help="`node`, the node's id, the edits")
    label.add_argument("--overwrite", action="store_true", help="allow changing the value of an existing label")
    label.add_argument("--replace", action="store_true", help="replace every user label with the given ones")
    label.add_argument("--node-id", help=argparse.SUPPRESS)  # retired: `label node ID`
    add_connection_arguments(label, service="labels service")
    label.set_defaults(run=run_label, parser=label, intermixed="words")

    taint = commands.add_parser(
        "taint",
        help="add or remove a node's taints: taint node ID k=v:Effect k:Effect- k-",
        description="Edit a node's taints: KEY=VALUE:EFFECT (or KEY:EFFECT, KEY=VALUE, KEY; EFFECT one of "
        f"{', '.join(types.TAINT_EFFECTS)}, default NoSchedule) adds one, replacing a taint with the same key and "
        "effect; KEY:EFFECT- removes the taint with that key and effect; KEY- removes every taint with that key. "
        "Name the node by id (`taint node ID ...`) or by address (`taint node ADDR ... --by-address`). Your edits "
        "lie over the taints the node's agent declared: they hold when the agent registers the node again (the "
        "removal of an agent's taint included), until you change them or `corral node remove` the node.",
    )
    taint.add_argument(
        "words", nargs="*", metavar="node ID TAINT|KEY:EFFECT-|KEY-", help="`node`, the node's id, the edits"
    )
    taint.add_argument("--by-address", action="store_true", help="ID is the node's address (as registered)")
    taint.add_argument("--node-id", help=argparse.SUPPRESS)  # retired: `taint node ID`
    taint.add_argument("--node-address", help=argparse.SUPPRESS)  # retired: `taint node ADDR --by-address`
    taint.add_argument("--append", type=types.taint, nargs="+", action="extend", help=argparse.SUPPRESS)
    taint.add_argument("--delete", nargs="+", action="extend", help=argparse.SUPPRESS)
    add_connection_arguments(taint, service="taints service")
    taint.set_defaults(run=run_taint, parser=taint, intermixed="words")

    for verb, what in (
        ("cordon", f"mark a node unschedulable (taint {CORDON.key}:{CORDON.effect})"),
        ("uncordon", f"let work onto a node again (removes {CORDON.key} and {DRAIN.key})"),
    ):
        parser = commands.add_parser(verb, help=what, description=what[0].upper() + what[1:] + ".")
        parser.add_argument("node_id", metavar="NODE_ID", help="the node's id")
        add_connection_arguments(parser, service="taints service")
        parser.set_defaults(run=run_cordon, parser=parser)

    drain = commands.add_parser(
        "drain",
        help=f"evict a node's work (taint {DRAIN.key}:{DRAIN.effect}) and wait until it holds none",
        description=f"Taint the node {DRAIN.key}:{DRAIN.effect}: no new work lands there, and its actors and "
        "placement-group bundles are evicted (actors restart elsewhere while they have restarts left). Prints "
        "progress and returns once the node holds no work; exits 1 if it still does after --timeout seconds. "
        "`corral uncordon` takes the taint off.",
    )
    drain.add_argument("node_id", metavar="NODE_ID", help="the node's id")
    add_connection_arguments(
        drain, service="scheduler", timeout=DRAIN_TIMEOUT, timeout_help="how long to wait for the node to empty"
    )
    drain.set_defaults(run=run_drain, parser=drain)


def node_target(words: list[str], verb: str) -> tuple[str, list[str]]:
    """`node ID EDIT...` as the node id (or address) and the edits."""
    if not words or words[0] not in NODE_WORDS:
        raise UsageError(f"expected `corral {verb} node ID ...` (the kind comes first: node)")
    rest = words[1:]
    if not rest:
        raise UsageError(f"expected `corral {verb} node ID ...`: the node's id is missing")
    return rest[0], rest[1:]


async def live_node(client: Client, node_id: str = "", address: str = "") -> NodeInfo:
    """The live node with this id (or address), as the labels service knows it."""
    for node in await client.nodes():
        if (node_id and node.node_id == node_id) or (address and node.address == address):
            return node
    raise CliError(f"node {node_id!r}: no such live node" if node_id else f"no live node has address {address!r}")


def run_label(args: argparse.Namespace) -> int:
    """`corral label node ID k=v k2- [--overwrite|--replace]` (or the retired `label --node-id ID k=v`)."""
    if args.node_id:
        print(deprecated("`corral label --node-id ID K=V`", "`corral label node ID K=V --replace`"), file=sys.stderr)
        node_id, words, replace = args.node_id, args.words, True
    else:
        node_id, words = node_target(args.words, "label")
        replace = args.replace
    if not words:
        raise UsageError("give at least one KEY=VALUE or KEY- edit")
    edit = label_edit(words)

    if replace and edit.remove:
        raise UsageError(f"--replace sets every user label: drop {edit.remove[0]}-")

    async def main() -> None:
        async with connected(args) as client:
            if replace:
                await client.set_labels(node_id, edit.set)
            else:  # one change, checked by the labels service against the labels the node has then
                await client.edit_labels(node_id, edit.set, edit.remove, overwrite=args.overwrite)

    asyncio.run(main())
    if args.node_id:
        say(f"node {node_id} labelled {','.join(f'{key}={value}' for key, value in edit.set.items())}")
    else:
        say(f"node/{node_id} labeled")
    return 0


def retired_taint(args: argparse.Namespace) -> list[str]:
    """`--append`/`--delete` as the edits of the new spelling (with a notice on stderr)."""
    print(deprecated("`corral taint --node-id|--node-address --append|--delete`", "`corral taint node ID EDIT`"),
          file=sys.stderr)  # fmt: skip
    if bool(args.append) == bool(args.delete):
        raise UsageError("give one of --append or --delete")
    if args.append:
        return [types.format_taint(taint) for taint in args.append]
    return [f"{key}-" for key in args.delete]


def run_taint(args: argparse.Namespace) -> int:
    """`corral taint node ID|--address ADDR k=v:Effect k:Effect- k-` (or the retired flags)."""
    retired = bool(args.node_id or args.node_address)
    if retired:
        if args.node_id and args.node_address:
            raise UsageError("name the node once: by id or by address")
        node_id, address, words = args.node_id or "", args.node_address or "", retired_taint(args)
    else:
        node_id, words = node_target(args.words, "taint")
        node_id, address = ("", node_id) if args.by_address else (node_id, "")
    if not words:
        raise UsageError("give at least one taint edit: KEY=VALUE:EFFECT, KEY:EFFECT- or KEY-")
    edit = taint_edit(words)

    async def main() -> str:
        async with connected(args) as client:
            node = await live_node(client, node_id, address)
            keys, effects = removals(node.taints, edit, node.node_id)
            if edit.add:
                await client.add_taints(node.node_id, edit.add)
            if keys or effects:
                await client.remove_taints(node.node_id, keys, effects=effects)
            return node.node_id

    done = asyncio.run(main())
    if retired:
        where = f"node {node_id}" if node_id else f"node at {address}"
        change = "tainted " + ",".join(words) if args.append else "untainted " + ",".join(args.delete)
        say(f"{where} {change}")
    else:
        say(f"node/{done} {'tainted' if edit.add else 'untainted'}")
    return 0


def run_cordon(args: argparse.Namespace) -> int:
    """`corral cordon ID` / `corral uncordon ID`."""

    async def main() -> str:
        async with connected(args) as client:
            node = await live_node(client, args.node_id)
            keys = {taint.key for taint in node.taints}
            if args.command == "cordon":
                if CORDON.key in keys:
                    return "already cordoned"
                await client.add_taints(node.node_id, [CORDON])
                return "cordoned"
            present = [key for key in (CORDON.key, DRAIN.key) if key in keys]
            if not present:
                return "already uncordoned"
            await client.remove_taints(node.node_id, present)
            return "uncordoned"

    say(f"node/{args.node_id} {asyncio.run(main())}")
    return 0


def work_on(status_nodes: list[NodeInfo], placement_groups: dict[str, list[str]], node_id: str) -> list[str]:
    """What still holds the node: its actor count and the groups with a bundle on it."""
    node = next((node for node in status_nodes if node.node_id == node_id), None)
    held = [f"{node.actors} actor(s)"] if node is not None and node.actors else []
    return held + [f"placement group {pg}" for pg, nodes in sorted(placement_groups.items()) if node_id in nodes]


def run_drain(args: argparse.Namespace) -> int:
    """`corral drain ID [--timeout S]`."""

    async def main() -> None:
        async with connected(args) as client:
            await live_node(client, args.node_id)
            work = await client.bus.nc.subscribe(f"{s.PREFIX}.evt.>")
            try:
                await client.add_taints(args.node_id, [DRAIN])
                say(f"node/{args.node_id} tainted {DRAIN.key}:{DRAIN.effect}")
                await wait_empty(client, args.node_id, work, args.timeout)
            finally:
                with contextlib.suppress(nats.errors.Error):
                    await work.unsubscribe()
        say(f"node/{args.node_id} drained")

    asyncio.run(main())
    return 0


async def wait_empty(client: Client, node_id: str, events: Subscription, timeout: float) -> None:
    """Return once the node holds no work (each event in the log wakes a look); `CliError` after `timeout`."""
    shown: list[str] = []
    deadline = deadline_in(timeout)
    try:
        async with asyncio.timeout_at(deadline):
            while True:
                check(deadline)
                status = await client.status()
                held = work_on(status.nodes, status.placement_groups, node_id)
                if not held:
                    return
                if held != shown:
                    say(f"waiting for node/{node_id}: {', '.join(held)} left")
                    shown = held
                with contextlib.suppress(nats.errors.TimeoutError):
                    await events.next_msg(timeout=DRAIN_RECHECK)
                while events.pending_msgs:  # a burst of events: one look for all of them
                    await events.next_msg()
    except TimeoutError:
        raise CliError(f"node {node_id} still holds work after {timeout:g}s: {', '.join(shown)}") from None
