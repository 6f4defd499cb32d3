"""`corral events` (what happened to an actor, node or virtual cluster, from the log) and `corral why-placed`
(how a placement was decided: the filters' counts and the top scored nodes, re-run from the log)."""

from __future__ import annotations

import argparse
import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from services.cli.common import UsageError, add_connection_arguments, connected, say, stop_signals, stop_tasks
from services.cli.history import clock
from services.cli.registry import Subcommands
from services.cli.table import format_table
from services.client.history import LoggedEvent
from services.client.times import parse_since
from services.core.errors import RejectedError
from services.core.explain_placed import OptionTrace, PlacementTrace

EVERYTHING = datetime.min.replace(tzinfo=UTC)
"""`--follow` without `--since` starts from the beginning of the log."""


def flag_value(parse: Any, flag: str, text: str) -> Any:
    """`parse(text, flag)`, a bad value reported as bad usage naming the flag, the value and the rule."""
    try:
        return parse(text, flag)
    except RejectedError as error:
        raise UsageError(str(error)) from None


def add_parsers(commands: Subcommands) -> None:
    """Register `events` and `why-placed`."""
    events = commands.add_parser(
        "events",
        help="list the events that touched an actor, a placement group, a node or a virtual cluster, oldest first",
        description="List the events of the log that touched the actor (or placement group), node and virtual "
        "cluster given (all of "
        "them; none given: every event), oldest first, with the sequence, the time (UTC), the event type and a "
        "one-line meaning. With -f, keep printing new ones as they are appended until interrupted.",
    )
    events.add_argument("--actor", metavar="ID", help="events of this actor or task")
    events.add_argument("--pg", metavar="ID", help="events of this placement group")
    events.add_argument("--node", metavar="ID", help="events on this node (placements and failures on it too)")
    events.add_argument("--vc", metavar="ID", help="events of this virtual cluster and the work inside it")
    events.add_argument("--since", metavar="SPAN", help="only events of the last SPAN: 30s, 10m, 2h, 1d, 1h30m")
    events.add_argument("-f", "--follow", action="store_true", help="keep printing new events (Ctrl-C stops)")
    events.add_argument("-o", "--output", choices=("table", "json"), default="table", help="table, or JSON lines")
    add_connection_arguments(events, service="event log")
    events.set_defaults(run=run_events, parser=events)

    placed = commands.add_parser(
        "why-placed",
        help="explain how an actor's placement was decided: filters, candidates, top scored nodes",
        description="Re-run the decision that placed the actor (its latest placement) on the view the scheduler had "
        "then, folded from the log: which rule narrowed the candidates, how many nodes reached and passed each "
        "filter, and the top scored nodes with each scorer's weight and the policy rank (lower wins).",
    )
    placed.add_argument("actor_id", metavar="ACTOR_ID", help="the actor or task")
    placed.add_argument("--top", type=int, default=5, metavar="N", help="scored nodes to show (default: 5)")
    placed.add_argument("-o", "--output", choices=("text", "json"), default="text", help="text, or JSON")
    add_connection_arguments(placed, service="event log")
    placed.set_defaults(run=run_why_placed, parser=placed)


def event_row(logged: LoggedEvent, now: datetime) -> tuple[object, ...]:
    """One line of `corral events`."""
    after = f", after {logged.cause}" if logged.cause else ""
    return logged.sequence, clock(logged.time, now), logged.type, logged.meaning + after


def event_json(logged: LoggedEvent) -> str:
    """One JSON line of `corral events -o json`."""
    record = {
        "sequence": logged.sequence,
        "time": logged.time.isoformat(),
        "type": logged.type,
        "meaning": logged.meaning,
        "event": logged.event,
    }
    return msgspec.json.encode(record).decode()


HEADERS = ("SEQ", "TIME", "TYPE", "MEANING")


def run_events(args: argparse.Namespace) -> int:
    """`corral events`."""
    since: datetime | timedelta | None = flag_value(parse_since, "--since", args.since) if args.since else None
    if args.actor is not None and args.pg is not None:
        raise UsageError("--actor and --pg: give one of them")
    work = args.pg if args.pg is not None else args.actor  # the log names both by their work id
    ids = {"actor_id": work, "node_id": args.node, "vcluster_id": args.vc}
    for flag, value in (("--actor", args.actor), ("--pg", args.pg), ("--node", args.node), ("--vc", args.vc)):
        if value is not None and not value.strip():
            raise UsageError(f"{flag} {value!r}: must not be empty")

    async def main() -> int:
        async with connected(args) as client:
            if not args.follow:
                found = await client.history(**ids, since=since)
                now = datetime.now(UTC)
                if args.output == "json":
                    for logged in found:
                        say(event_json(logged))
                else:
                    say(format_table(HEADERS, [event_row(logged, now) for logged in found]) if found else "no events")
                return 0
            with stop_signals() as stop:
                follow = asyncio.create_task(_follow(client.watch(**ids, since=since or EVERYTHING), args.output))
                stopping = asyncio.create_task(stop.wait())
                await asyncio.wait([follow, stopping], return_when=asyncio.FIRST_COMPLETED)
                await stop_tasks(follow, stopping)
            return 0

    return asyncio.run(main())


async def _follow(events: Any, output: str) -> None:
    widths = (6, 8, 22)
    if output == "table":
        say("  ".join(h.ljust(w) for h, w in zip(HEADERS, widths, strict=False)) + HEADERS[-1])
    async for logged in events:
        if output == "json":
            say(event_json(logged))
        else:
            row = [str(cell) for cell in event_row(logged, datetime.now(UTC))]
            say("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + row[-1])


def run_why_placed(args: argparse.Namespace) -> int:
    """`corral why-placed ACTOR_ID`."""
    if args.top < 1:
        raise UsageError(f"--top {args.top}: must be at least 1")

    async def main() -> PlacementTrace:
        async with connected(args) as client:
            return await client.why_placed(args.actor_id, top=args.top)

    trace = asyncio.run(main())
    if args.output == "json":
        say(msgspec.json.format(msgspec.json.encode(trace)).decode())
    else:
        say(render_trace(trace))
    return 0


def render_trace(trace: PlacementTrace) -> str:
    """The framework's view of a placement: per option, candidates, filters, scores, then the verdict."""
    lines = [f"Actor {trace.actor_id} was placed on {trace.node_id}."]
    for option in trace.options:
        lines += _option_lines(option)
    if trace.reproduced:
        last = trace.options[-1]
        tie = f"; {last.ties} nodes tied on score, a seeded choice took it" if last.ties > 1 else ""
        lines.append(f"Chosen: {trace.node_id}, the top-scored feasible node{tie}.")
    else:
        lines.append(f"Not reproduced: {trace.note}.")
    return "\n".join(lines)


def _option_lines(option: OptionTrace) -> list[str]:
    name = "primary" if option.option == 0 else f"fallback {option.option}"
    narrowed = f"narrowed to {option.candidates} by {option.narrowed_by}" if option.narrowed_by else "every node"
    lines = [f"Option {option.option} ({name}): {option.nodes} node(s); candidates: {narrowed}."]
    steps = [(step.plugin, step.reached, step.passed, step.reached - step.passed) for step in option.filters]
    lines += ["Filters:", format_table(("PLUGIN", "REACHED", "PASSED", "REJECTED"), steps, indent="  ")]
    if not option.scored:
        lines.append("Scored: no node could take it now.")
        return lines
    plugins = sorted({name for entry in option.scored for name in entry.weights})
    headers = ("NODE", "SCORE", *plugins, "POLICY RANK (lower wins)", "")
    rows = [
        (
            entry.node_id,
            entry.weight,
            *(entry.weights.get(plugin, 0) for plugin in plugins),
            f"{entry.policy_rank:.3f}",
            "<- chosen" if entry.node_id == option.chosen else "",
        )
        for entry in option.scored
    ]
    lines += [f"Scored {option.sampled} node(s); the top {len(rows)}:", format_table(headers, rows, indent="  ")]
    return lines
