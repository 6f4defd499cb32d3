"""`corral create pg` and `corral delete KIND NAME...|-l SELECTOR`: reserve a placement group; remove nodes, actors,
placement groups or virtual clusters."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import get_args

import msgspec

from schemas import Pending, Placed, PlacementGroupRequest
from schemas.requests import PlacementStrategy
from services.cli import args as types
from services.cli.commands.get import label_selector
from services.cli.common import UsageError, add_connection_arguments, connected, not_found, say
from services.cli.files import add_filename_argument, read_file
from services.cli.listing import KINDS, read_snapshot, select
from services.cli.registry import Subcommands
from services.cli.wait import wait_placed
from services.client import Client
from services.core.errors import NotFoundError
from services.core.selectors import LabelSelector

STRATEGIES: tuple[str, ...] = get_args(PlacementStrategy)
PG_WORDS = ("pg", "pgs", "placementgroup", "placementgroups")


def add_parsers(commands: Subcommands) -> None:
    """Register `create` (pg) and `delete` (actor, pg)."""
    create = commands.add_parser(
        "create",
        help="create a placement group (pg) from flags or a file",
        description="Reserve a placement group: all bundles or none. Give its id and one --bundle per bundle, or "
        "the whole PlacementGroupRequest with -f (JSON or YAML). Prints `PG placed: bundle 0 on NODE, ...` or "
        "`PG pending: <why>`; with --wait, waits until it is placed (exit 1 after --timeout).",
    )
    create.add_argument("kind", choices=PG_WORDS, metavar="pg", help="what to create: pg (a placement group)")
    create.add_argument("pg_id", nargs="?", metavar="ID", help="the group's id (required without -f)")
    create.add_argument(
        "--bundle",
        type=types.resources,
        action="append",
        metavar="NAME=N,...",
        help="one bundle's resources, repeatable: --bundle CPU=1 --bundle CPU=1,memory=2Gi",
    )
    create.add_argument("--strategy", choices=STRATEGIES, help="how bundles spread over nodes (default: PACK)")
    create.add_argument("--priority", type=int, metavar="N", help="higher waits less (default: 0)")
    create.add_argument("--vc", metavar="ID", help="reserve it inside this virtual cluster (default: the root)")
    add_filename_argument(create, "PlacementGroupRequest")
    create.add_argument("--wait", action="store_true", help="wait until it is placed (at most --timeout seconds)")
    add_connection_arguments(create, service="scheduler")
    create.set_defaults(run=run_create, parser=create)

    delete = commands.add_parser(
        "delete",
        help="remove nodes, actors, placement groups (pgs) or virtual clusters (vcs), by name or -l selector",
        description="Remove objects by name, or every node or actor whose labels match -l: a node is taken out "
        "now (as `corral node remove`), an actor finishes (its resources are freed), a placement group's bundles "
        "are released, a virtual cluster is destroyed with its children (refused while work lives in it, unless "
        "--force). A name that is not there is said on stderr and makes the exit status 1; the others are "
        "removed still.",
    )
    delete.add_argument("kind", type=deletable, metavar="KIND", help="nodes, actors, pgs or vcs (or a singular)")
    delete.add_argument("names", nargs="*", metavar="NAME", help="the objects' ids")
    delete.add_argument(
        "-l",
        "--selector",
        type=types.selector_list,
        action="extend",
        default=[],
        metavar="SELECTOR",
        help="every node or actor whose labels match: app=web,tier=in(a,b)",
    )
    delete.add_argument("--force", action="store_true", help="vcs: stop the live work inside them")
    add_connection_arguments(delete, service="scheduler", timeout=10.0)
    delete.set_defaults(run=run_delete, parser=delete, intermixed="names")


def deletable(text: str) -> str:
    """An argparse type: a kind `delete` removes (nodes, actors, pgs, vcs), as its plural."""
    found = KINDS.get(text.lower(), "")
    if found not in DELETERS:
        raise argparse.ArgumentTypeError(f"{text!r}: not a kind to delete; use nodes, actors, pgs or vcs")
    return found


def pg_request(args: argparse.Namespace) -> PlacementGroupRequest:
    """The request `-f` reads (ID and --vc replace its own when given) or the flags describe."""
    if args.filename is not None:
        given = [f"--{flag}" for flag in ("bundle", "strategy", "priority") if getattr(args, flag) is not None]
        if given:
            raise UsageError(f"-f reads the whole request: drop {', '.join(given)} (or drop -f)")
        request = read_file(args.filename, PlacementGroupRequest)
        changes = {"pg_id": args.pg_id, "vcluster_id": args.vc}
        return msgspec.structs.replace(request, **{name: value for name, value in changes.items() if value})
    if not args.pg_id or not args.bundle:
        raise UsageError("give the group's ID and at least one --bundle (or the whole request with -f)")
    return PlacementGroupRequest(
        args.pg_id,
        args.bundle,
        strategy=args.strategy or "PACK",
        priority=args.priority or 0,
        vcluster_id=args.vc,
    )


def run_create(args: argparse.Namespace) -> int:
    """`corral create pg ...`."""
    request = pg_request(args)

    async def main() -> Placed | Pending:
        async with connected(args) as client:
            decision = await client.create_placement_group(request, timeout=args.timeout)
            if isinstance(decision, Pending) and args.wait:
                return await wait_placed(client, request.pg_id, "placement_group", args.timeout)
            return decision

    decision = asyncio.run(main())
    if isinstance(decision, Placed):
        bundles = ", ".join(f"bundle {index} on {node}" for index, node in enumerate(decision.bundle_nodes))
        say(f"{request.pg_id} placed: {bundles}")
    else:
        say(f"{request.pg_id} pending: {decision.message}")
    return 0


async def _delete_node(client: Client, name: str, _args: argparse.Namespace) -> str:
    return (await client.remove_node(name)).message


async def _delete_actor(client: Client, name: str, _args: argparse.Namespace) -> str:
    return (await client.remove_actor(name)).message


async def _delete_pg(client: Client, name: str, _args: argparse.Namespace) -> str:
    return (await client.remove_placement_group(name)).message


async def _delete_vc(client: Client, name: str, args: argparse.Namespace) -> str:
    stopped = (await client.destroy_virtual_cluster(name, force=args.force, timeout=args.timeout)).stopped
    return f"stopped {', '.join(stopped)}" if stopped else ""


DELETERS: dict[str, tuple[str, Callable[[Client, str, argparse.Namespace], Awaitable[str]]]] = {
    "nodes": ("node", _delete_node),
    "actors": ("actor", _delete_actor),
    "pgs": ("pg", _delete_pg),
    "vcs": ("vc", _delete_vc),
}
"""A kind -> the singular `delete` prints and how one object of it is removed."""


async def selected(client: Client, kind: str, selector: LabelSelector) -> list[str]:
    """The ids of the nodes or actors whose labels match `selector`."""
    snapshot = select(await read_snapshot(client, kind, None), selector, kind)
    return [node.node_id for node in snapshot.nodes] if kind == "nodes" else [a.actor_id for a in snapshot.actors]


def run_delete(args: argparse.Namespace) -> int:
    """`corral delete KIND NAME... | -l SELECTOR`."""
    if bool(args.names) == bool(args.selector):
        raise UsageError("give the objects' names or -l SELECTOR (one of them)")
    selector = label_selector(args)
    singular, remove = DELETERS[args.kind]

    async def main() -> int:
        async with connected(args) as client:
            names = args.names or await selected(client, args.kind, selector)
            if not names:
                print("No resources found.", file=sys.stderr)
            status = 0
            for name in dict.fromkeys(names):
                try:
                    message = await remove(client, name, args)
                except NotFoundError:
                    print(not_found(args.kind, name), file=sys.stderr)
                    status = 1
                    continue
                say(f"{singular}/{name} deleted" + (f" ({message})" if message else ""))
            return status

    return asyncio.run(main())
