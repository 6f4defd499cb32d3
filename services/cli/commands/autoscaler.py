"""`corral autoscaler status`: the autoscaler's demand, node types, recent launches and terminations (like
`ray status`)."""

from __future__ import annotations

import argparse
import asyncio

from schemas.queries import AutoscalerStatusReply, LaunchInfo
from services.cli.args import format_resources
from services.cli.commands.status import section
from services.cli.common import add_connection_arguments, connected, say
from services.cli.output import add_output_argument, structured
from services.cli.registry import Subcommands
from services.cli.table import format_table


def add_parsers(commands: Subcommands) -> None:
    """Register `autoscaler status`."""
    autoscaler = commands.add_parser(
        "autoscaler", help="what the autoscaler sees and does", description="The autoscaler."
    )
    verbs = autoscaler.add_subparsers(dest="verb", metavar="VERB", required=True)
    status = verbs.add_parser(
        "status",
        help="demand, node types, recent launches and terminations",
        description="Show the pending demand grouped by shape, selector, tolerations and strategy (with the node "
        "types that could serve each group, or why none can), each node type's min / max / running / launching / "
        "idle / draining counts and back-off, and the newest launches and terminations. Exits 1 when no autoscaler "
        "runs.",
    )
    add_output_argument(status, ("table", "json", "yaml"), json=True)
    add_connection_arguments(status, service="autoscaler")
    status.set_defaults(run=run_status, parser=status)


def age(now: float, then: float) -> str:
    """`12s` ago (or `-` when unknown)."""
    return f"{max(0.0, now - then):.0f}s" if then else "-"


def render(status: AutoscalerStatusReply) -> str:
    """Demand, node types, launches and terminations as tables."""
    now = status.now
    demand = [(group.count, group.shape, ",".join(group.node_types) or "none: see reasons") for group in status.demand]
    types = [
        (
            t.name,
            format_resources(t.resources),
            t.min_workers,
            t.max_workers,
            t.running,
            t.launching,
            t.idle,
            t.draining,
            f"{t.backed_off_until - now:.0f}s more" if t.backed_off_until > now else "-",
        )
        for t in status.node_types
    ]
    parts = [
        f"Autoscaler {status.instance} (log sequence {status.sequence})",
        section("DEMAND", len(demand), format_table(("COUNT", "DEMAND", "NODE TYPES"), demand), "nothing pending"),
        section(
            "NODE TYPES",
            len(types),
            format_table(
                ("TYPE", "RESOURCES", "MIN", "MAX", "RUNNING", "LAUNCHING", "IDLE", "DRAINING", "BACKED OFF"), types
            ),
            "none",
        ),
        section("RECENT LAUNCHES", len(status.launches), launches_table(status.launches, now), "none"),
        section("RECENT TERMINATIONS", len(status.terminations), terminations_table(status.terminations, now), "none"),
    ]
    return "\n\n".join(parts)


def launches_table(launches: list[LaunchInfo], now: float) -> str:
    """One row per launch: id, type, state, node, age, reason (and note)."""
    rows = [
        (
            launch.launch_id,
            launch.node_type,
            launch.state,
            launch.node_id or "-",
            age(now, launch.requested_at),
            launch.reason + (f" ({launch.note})" if launch.note else ""),
        )
        for launch in launches
    ]
    return format_table(("LAUNCH", "TYPE", "STATE", "NODE", "AGE", "REASON"), rows)


def terminations_table(terminations: list[LaunchInfo], now: float) -> str:
    """One row per terminated node: node, type, launch, how long ago, why."""
    rows = [
        (launch.node_id, launch.node_type, launch.launch_id, age(now, launch.changed_at), launch.note)
        for launch in terminations
    ]
    return format_table(("NODE", "TYPE", "LAUNCH", "AGE", "REASON"), rows)


def run_status(args: argparse.Namespace) -> int:
    """`corral autoscaler status`."""

    async def main() -> AutoscalerStatusReply:
        async with connected(args) as client:
            return await client.autoscaler_status()

    status = asyncio.run(main())
    say(render(status) if args.output == "table" else structured(status, args.output))
    return 0
