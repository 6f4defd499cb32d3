"""`corral taint`, `corral label` and `corral submit`: change a node, or ask the scheduler to place an actor."""

from __future__ import annotations

import argparse
import asyncio

import msgspec

from schemas import Placed, ScheduleRequest
from services.cli import args as types
from services.cli.common import CliError, UsageError, add_connection_arguments, connected, read_input, say
from services.cli.registry import Subcommands
from services.core.errors import CodecError
from services.runtime.codec import decode

STRATEGIES = ("DEFAULT", "SPREAD")


def add_parsers(commands: Subcommands) -> None:
    """Register `taint`, `label` and `submit`."""
    _add_taint(commands)
    _add_label(commands)
    _add_submit(commands)


# taint


def _add_taint(commands: Subcommands) -> None:
    taint = commands.add_parser(
        "taint",
        help="add or delete a node's taints (by node id or address)",
        description="Add taints to a node or delete them by key (proposal 002's `ray taint`). A taint is "
        "KEY=VALUE:EFFECT, KEY:EFFECT, KEY=VALUE or KEY; EFFECT is one of "
        f"{', '.join(types.TAINT_EFFECTS)} (default NoSchedule). A taint with the same key and effect is replaced.",
    )
    target = taint.add_mutually_exclusive_group(required=True)
    target.add_argument("--node-id", metavar="ID", help="the node's id")
    target.add_argument("--node-address", metavar="ADDR", help="the node's address (as registered)")
    change = taint.add_mutually_exclusive_group(required=True)
    change.add_argument(
        "--append",
        type=types.taint,
        nargs="+",
        action="extend",
        metavar="KEY=VALUE[:EFFECT]",
        help="taints to add",
    )
    change.add_argument("--delete", nargs="+", action="extend", metavar="KEY", help="delete every taint with this key")
    add_connection_arguments(taint, service="taints service")
    taint.set_defaults(run=run_taint, parser=taint)


def run_taint(args: argparse.Namespace) -> int:
    """`corral taint`."""
    node_id, address = args.node_id or "", args.node_address or ""
    where = f"node {node_id}" if node_id else f"node at {address}"

    async def main() -> str:
        async with connected(args) as client:
            if args.append:
                accepted = await client.add_taints(node_id, args.append, node_address=address)
                done = "tainted " + ",".join(types.format_taint(taint) for taint in args.append)
            else:
                accepted = await client.remove_taints(node_id, args.delete, node_address=address)
                done = "untainted " + ",".join(args.delete)
        return f"{where} {done}" + ("" if accepted.sequence else " (no change)")

    say(asyncio.run(main()))
    return 0


# label


def _add_label(commands: Subcommands) -> None:
    label = commands.add_parser(
        "label",
        help="replace a node's user labels",
        description="Replace a node's user labels with the given ones (system labels, under corral.io/, stay).",
    )
    label.add_argument("--node-id", metavar="ID", required=True, help="the node's id")
    label.add_argument(
        "labels", metavar="KEY=VALUE", type=types.labels, nargs="+", help="the labels (each may be k=v,k2=v2)"
    )
    add_connection_arguments(label, service="labels service")
    label.set_defaults(run=run_label, parser=label)


def run_label(args: argparse.Namespace) -> int:
    """`corral label`."""
    merged: dict[str, str] = {}
    for given in args.labels:
        for key, value in given.items():
            if key in merged:
                raise UsageError(f"label {key!r} given twice ({merged[key]!r} and {value!r})")
            merged[key] = value

    async def main() -> None:
        async with connected(args) as client:
            await client.set_labels(args.node_id, merged)

    asyncio.run(main())
    text = ",".join(f"{key}={value}" for key, value in merged.items())
    say(f"node {args.node_id} labelled {text}")
    return 0


# submit


def _add_submit(commands: Subcommands) -> None:
    submit = commands.add_parser(
        "submit",
        help="ask the scheduler to place an actor; prints where it runs or why it waits",
        description="Submit an actor and print `ACTOR placed on NODE` or `ACTOR pending: <why>` (exit 0 either "
        "way). With --json, the whole ScheduleRequest is read as JSON from a file or stdin (`-`), and ACTOR_ID, "
        "when given, replaces its actor_id.",
    )
    submit.add_argument("actor_id", metavar="ACTOR_ID", nargs="?", help="the actor's id (required without --json)")
    submit.add_argument("--cpu", type=types.amount, metavar="N", help="CPUs the actor needs (default: 1)")
    submit.add_argument(
        "--resources", type=types.resources, metavar="NAME=N,...", help="other resources, for example GPU=1"
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
    submit.add_argument("--strategy", choices=STRATEGIES, help="scheduling strategy (default: DEFAULT)")
    submit.add_argument("--priority", type=int, metavar="N", help="higher waits less (default: 0)")
    submit.add_argument(
        "--max-restarts", type=types.non_negative_int, metavar="N", help="restarts after a failure (default: 0)"
    )
    submit.add_argument("--vc", metavar="ID", help="run it inside this virtual cluster (default: the root)")
    submit.add_argument(
        "--json", metavar="FILE", help="read the whole ScheduleRequest as JSON from FILE (`-`: standard input)"
    )
    add_connection_arguments(submit, service="scheduler")
    submit.set_defaults(run=run_submit, parser=submit)


_REQUEST_FLAGS = ("cpu", "resources", "labels", "namespace", "selector", "tolerate", "strategy", "priority")
"""Flags that describe the request itself; `--json` replaces them all (`--vc` still applies on top)."""


def read_request(source: str, actor_id: str | None) -> ScheduleRequest:
    """The ScheduleRequest in the JSON file `source` (`-`: stdin); `actor_id` replaces its own when given."""
    data = read_input(source, f"--json {source}")
    try:
        request: ScheduleRequest = decode(data, ScheduleRequest)
    except CodecError as error:
        raise CliError(f"--json {source}: not a ScheduleRequest: {error.reason}") from None
    return msgspec.structs.replace(request, actor_id=actor_id) if actor_id else request


def build_request(args: argparse.Namespace) -> ScheduleRequest:
    """The ScheduleRequest the flags describe (or `--json` reads)."""
    if args.json is not None:
        given = [
            f"--{flag.replace('_', '-')}"
            for flag in (*_REQUEST_FLAGS, "max_restarts")
            if getattr(args, flag) is not None
        ]
        if given:
            raise UsageError(f"--json reads the whole request: drop {', '.join(given)} (or drop --json)")
        request = read_request(args.json, args.actor_id)
        return msgspec.structs.replace(request, vcluster_id=args.vc) if args.vc else request
    if not args.actor_id:
        raise UsageError("ACTOR_ID is required (or give the whole request with --json)")
    resources = dict(args.resources or {})
    if args.cpu is not None and "CPU" in resources:
        raise UsageError(f"--cpu {args.cpu:g} and --resources CPU={resources['CPU']:g}: give CPU once")
    resources.setdefault("CPU", 1.0 if args.cpu is None else args.cpu)
    try:
        selector = types.merge("--selector", args.selector or [])
        tolerations = types.merge("--tolerate", args.tolerate or [])
    except ValueError as error:
        raise UsageError(str(error)) from None
    return ScheduleRequest(
        args.actor_id,
        {name: amount for name, amount in resources.items() if amount > 0},
        namespace=args.namespace or "default",
        labels=args.labels or {},
        label_selector=selector,
        scheduling_strategy=args.strategy if args.strategy not in (None, "DEFAULT") else None,
        tolerations=tolerations,
        max_restarts=args.max_restarts or 0,
        priority=args.priority or 0,
        vcluster_id=args.vc,
    )


def run_submit(args: argparse.Namespace) -> int:
    """`corral submit`."""
    request = build_request(args)

    async def main() -> str:
        async with connected(args) as client:
            decision = await client.submit(request, timeout=args.timeout)
        if isinstance(decision, Placed):
            return f"{request.actor_id} placed on {decision.node_id}"
        return f"{request.actor_id} pending: {decision.message}"

    say(asyncio.run(main()))
    return 0
