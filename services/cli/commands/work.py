"""`corral create pg` and `corral delete actor|pg`: reserve a placement group, remove an actor or a group."""

from __future__ import annotations

import argparse
import asyncio
from typing import get_args

import msgspec

from schemas import Pending, Placed, PlacementGroupRequest
from schemas.requests import PlacementStrategy
from services.cli import args as types
from services.cli.common import UsageError, add_connection_arguments, connected, say
from services.cli.files import add_filename_argument, read_file
from services.cli.registry import Subcommands
from services.cli.wait import wait_placed

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
        help="remove an actor or a placement group (pg), freeing what it holds",
        description="Remove an actor (it finished: its resources are freed) or a placement group (its bundles "
        "are released).",
    )
    delete.add_argument("kind", choices=("actor", "actors", *PG_WORDS), metavar="KIND", help="actor or pg")
    delete.add_argument("work_id", metavar="ID", help="the actor's or the group's id")
    add_connection_arguments(delete, service="scheduler")
    delete.set_defaults(run=run_delete, parser=delete)


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


def run_delete(args: argparse.Namespace) -> int:
    """`corral delete actor|pg ID`."""
    is_actor = args.kind.startswith("actor")

    async def main() -> str:
        async with connected(args) as client:
            if is_actor:
                return (await client.remove_actor(args.work_id)).message
            return (await client.remove_placement_group(args.work_id)).message

    message = asyncio.run(main())
    say(f"{'actor' if is_actor else 'pg'}/{args.work_id} deleted" + (f" ({message})" if message else ""))
    return 0
