"""`corral submit`: ask the scheduler to place an actor (and, with --wait, wait until it is placed)."""

from __future__ import annotations

import argparse
import asyncio
import sys

import msgspec

from schemas import Exists, Pending, Placed, ScheduleRequest
from schemas.replies import Rejected
from services.cli import args as types
from services.cli.common import CliError, UsageError, add_connection_arguments, connected, say
from services.cli.files import add_deprecated_json, add_filename_argument, filename_of, read_many
from services.cli.registry import Subcommands
from services.cli.wait import wait_placed

STRATEGIES = ("DEFAULT", "SPREAD")


def add_parsers(commands: Subcommands) -> None:
    """Register `submit`."""
    _add_submit(commands)


# submit


def _add_submit(commands: Subcommands) -> None:
    submit = commands.add_parser(
        "submit",
        help="ask the scheduler to place an actor; prints where it runs or why it waits",
        description="Submit an actor and print `ACTOR placed on NODE` or `ACTOR pending: <why>` (exit 0 either "
        "way; with --wait, a line each time the reason changes until it is placed, and exit 1 if it still waits "
        "after --timeout). With -f, the whole ScheduleRequest is read as JSON or YAML from a file or stdin (`-`), "
        "and ACTOR_ID, when given, replaces its actor_id; a list of them (a JSON array, a YAML sequence) goes as one "
        "batch, a line for each in order (exit 1 if any is refused). Amounts take Kubernetes suffixes: 500m, 4Gi, 2k.",
    )
    submit.add_argument("actor_id", metavar="ACTOR_ID", nargs="?", help="the actor's id (required without -f)")
    submit.add_argument("--cpu", type=types.amount, metavar="N", help="CPUs the actor needs: 2, 500m (default: 1)")
    submit.add_argument(
        "--resources", type=types.resources, metavar="NAME=N,...", help="other resources: GPU=1,memory=4Gi"
    )
    submit.add_argument("--labels", type=types.labels, metavar="K=V,...", help="the actor's own labels")
    submit.add_argument(
        "--namespace", metavar="NS", help="the actor's namespace, for actor affinity (default: default)"
    )
    submit.add_argument(
        "--selector",
        type=types.selector,
        action="append",
        metavar="KEY=COND",
        help="a node label selector entry, repeatable: zone=z1, zone=!z1, zone=in(z1,z2), gpu=exists()",
    )
    submit.add_argument(
        "--tolerate",
        type=types.toleration,
        action="append",
        metavar="KEY[=VALUE]",
        help="tolerate a taint, repeatable: KEY=VALUE, or KEY for any value",
    )
    submit.add_argument(
        "--toleration-seconds",
        type=types.toleration_seconds,
        action="append",
        metavar="KEY=SECONDS",
        help="stay that long on a node declared dead (KEY: corral.io/unreachable; 30, 30s, 2m); implies --tolerate "
        "KEY. Without it, tolerating corral.io/unreachable stays for ever, not tolerating it fails at once",
    )
    submit.add_argument("--strategy", choices=STRATEGIES, help="scheduling strategy (default: DEFAULT)")
    submit.add_argument("--priority", type=int, metavar="N", help="higher waits less (default: 0)")
    submit.add_argument(
        "--max-restarts", type=types.non_negative_int, metavar="N", help="restarts after a failure (default: 0)"
    )
    submit.add_argument("--vc", metavar="ID", help="run it inside this virtual cluster (default: the root)")
    add_filename_argument(submit, "ScheduleRequest (or a list of them)")
    add_deprecated_json(submit)
    submit.add_argument("--wait", action="store_true", help="wait until it is placed (at most --timeout seconds)")
    add_connection_arguments(
        submit, service="scheduler", timeout_help="how long to wait to connect, for the decision and with --wait"
    )
    submit.set_defaults(run=run_submit, parser=submit)


_REQUEST_FLAGS = (
    "cpu",
    "resources",
    "labels",
    "namespace",
    "selector",
    "tolerate",
    "toleration_seconds",
    "strategy",
    "priority",
)
"""Flags that describe the request itself; `-f` replaces them all (`--vc` still applies on top)."""


def build_requests(args: argparse.Namespace) -> list[ScheduleRequest]:
    """The ScheduleRequest the flags describe, or those `-f` reads (one, or a list of them)."""
    filename = filename_of(args)
    if filename is None:
        return [build_request(args)]
    given = [
        f"--{flag.replace('_', '-')}" for flag in (*_REQUEST_FLAGS, "max_restarts") if getattr(args, flag) is not None
    ]
    if given:
        raise UsageError(f"-f reads the whole request: drop {', '.join(given)} (or drop -f)")
    read = read_many(filename, ScheduleRequest)
    if isinstance(read, list):
        if not read:
            raise CliError(f"-f {filename}: holds an empty list: nothing to submit")
        if args.actor_id:
            raise CliError(f"-f {filename}: holds a list of {len(read)} requests, and ACTOR_ID names one: drop it")
        requests = read
    else:
        requests = [msgspec.structs.replace(read, actor_id=args.actor_id) if args.actor_id else read]
    return [msgspec.structs.replace(request, vcluster_id=args.vc) if args.vc else request for request in requests]


def build_request(args: argparse.Namespace) -> ScheduleRequest:
    """The ScheduleRequest the flags describe."""
    if not args.actor_id:
        raise UsageError("ACTOR_ID is required (or give the whole request with -f)")
    resources = dict(args.resources or {})
    if args.cpu is not None and "CPU" in resources:
        raise UsageError(f"--cpu {args.cpu:g} and --resources CPU={resources['CPU']:g}: give CPU once")
    resources.setdefault("CPU", 1.0 if args.cpu is None else args.cpu)
    try:
        selector = types.merge("--selector", args.selector or [])
        tolerations = types.merge("--tolerate", args.tolerate or [])
        seconds = types.merge("--toleration-seconds", args.toleration_seconds or [])
    except ValueError as error:
        raise UsageError(str(error)) from None
    tolerations |= {key: Exists() for key in seconds if key not in tolerations}
    return ScheduleRequest(
        args.actor_id,
        {name: amount for name, amount in resources.items() if amount > 0},
        namespace=args.namespace or "default",
        labels=args.labels or {},
        label_selector=selector,
        scheduling_strategy=args.strategy if args.strategy not in (None, "DEFAULT") else None,
        tolerations=tolerations,
        toleration_seconds=seconds,
        max_restarts=args.max_restarts or 0,
        priority=args.priority or 0,
        vcluster_id=args.vc,
    )


def run_submit(args: argparse.Namespace) -> int:
    """`corral submit`: one request, or with `-f` a list of them sent as one batch (exit 1 when any is refused)."""
    requests = build_requests(args)

    async def main() -> list[tuple[str, Placed | Pending | Rejected]]:
        async with connected(args) as client:
            if len(requests) == 1:
                answers: list[Placed | Pending | Rejected] = [await client.submit(requests[0], timeout=args.timeout)]
            else:
                answers = await client.submit_many(requests, timeout=args.timeout)
            if args.wait:
                answers = [
                    await wait_placed(client, request.actor_id, "actor", args.timeout)
                    if isinstance(answer, Pending)
                    else answer
                    for request, answer in zip(requests, answers, strict=True)
                ]
        return [(request.actor_id, answer) for request, answer in zip(requests, answers, strict=True)]

    refused = 0
    for actor_id, answer in asyncio.run(main()):
        if isinstance(answer, Placed):
            say(f"{actor_id} placed on {answer.node_id}")
        elif isinstance(answer, Pending):
            say(f"{actor_id} pending: {answer.message}")
        else:
            refused += 1
            print(f"corral: {actor_id} refused: {answer.error}", file=sys.stderr)
    return 1 if refused else 0
