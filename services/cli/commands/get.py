"""`corral get KIND`: nodes, actors, placement groups, virtual clusters or pending work, as kubectl lists them."""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC, datetime

from schemas import subjects as s
from services.cli import args as types
from services.cli.common import (
    UsageError,
    add_connection_arguments,
    connected,
    not_found,
    say,
    stop_signals,
    stop_tasks,
)
from services.cli.listing import (
    KINDS,
    RECORD_KIND,
    Snapshot,
    Table,
    read_snapshot,
    select,
    table_of,
    totals,
)
from services.cli.output import add_output_argument, structured
from services.cli.records import first_times
from services.cli.registry import Subcommands
from services.cli.table import format_table
from services.client import Client
from services.core.errors import LabelError
from services.core.labels import VCLUSTER_ID
from services.core.selectors import LabelSelector

WATCHED: dict[str, tuple[str, ...]] = {
    "nodes": s.aggregate_subjects(s.NODE, s.TAINT, s.ACTOR, s.PLACEMENT_GROUP, s.VNODE),
    "actors": s.aggregate_subjects(s.ACTOR),
    "pgs": s.aggregate_subjects(s.PLACEMENT_GROUP),
    "vcs": s.aggregate_subjects(s.VCLUSTER, s.VNODE, s.ACTOR, s.PLACEMENT_GROUP),
    "pending": s.aggregate_subjects(s.ACTOR, s.PLACEMENT_GROUP, s.NODE, s.TAINT, s.VNODE),
}
"""The log subjects whose events can change a kind's rows: `--watch` reads only those."""

CATCH_UP_SECONDS = 2.0
"""How long `--watch` waits for the view to reflect an event it read in the log before showing the rows anyway."""
CATCH_UP_STEP = 0.02
DELETED = "<deleted>"


def kind(text: str) -> str:
    """An argparse type: one of KINDS' spellings, as its kind."""
    if text.lower() not in KINDS:
        raise argparse.ArgumentTypeError(
            f"{text!r}: not a kind; use nodes (node, no), actors (actor), pgs (pg, placementgroups), "
            "vcs (vc, virtualclusters) or pending"
        )
    return KINDS[text.lower()]


def add_parsers(commands: Subcommands) -> None:
    """Register `get`."""
    get = commands.add_parser(
        "get",
        help="list nodes, actors, placement groups (pgs), virtual clusters (vcs) or pending work",
        description="List one kind of object as a table (with -o wide: more columns), or as JSON or YAML. AGE is "
        "the time since the object's first event in the log. Under a table, totals as `ray status` shows them: "
        "resources used/total per kind over the listed nodes, and pending work by the first reason it waits. "
        "With -w, rows are printed again each time an event in the log changes them, until Ctrl-C.",
    )
    get.add_argument(
        "kind",
        type=kind,
        metavar="KIND",
        help="nodes (node, no), actors (actor), pgs (pg, placementgroups), vcs (vc, virtualclusters) or pending",
    )
    get.add_argument("names", nargs="*", metavar="NAME", help="only these objects (an unknown name: exit status 1)")
    add_output_argument(get)
    get.add_argument(
        "-l",
        "--selector",
        type=types.selector_list,
        action="extend",
        default=[],
        metavar="SELECTOR",
        help="only nodes, actors or pending actors whose labels match: zone=z1,tier=in(a,b),gpu!=true,ssd=exists()",
    )
    get.add_argument("--vc", metavar="ID", help="only inside this virtual cluster (its virtual nodes, its work)")
    get.add_argument(
        "-w", "--watch", action="store_true", help="then print rows again as events in the log change them"
    )
    add_connection_arguments(get, service="scheduler")
    get.set_defaults(run=run_get, parser=get, intermixed="names")


def label_selector(args: argparse.Namespace) -> LabelSelector:
    """`-l` as a compiled selector; refused for kinds that carry no labels."""
    if args.selector and args.kind in ("pgs", "vcs"):
        raise UsageError("-l/--selector: placement groups and virtual clusters carry no labels")
    try:
        return LabelSelector.parse(types.merge("-l/--selector", args.selector))
    except (ValueError, LabelError) as error:
        raise UsageError(str(error)) from None


class Listing:
    """Reads and prints one kind for `get`; with `--watch`, prints the rows that change after each event."""

    def __init__(self, client: Client, args: argparse.Namespace, selector: LabelSelector) -> None:
        self.client, self.args, self.selector = client, args, selector
        self.times: dict[str, datetime] = {}
        self.shown: dict[str, tuple[list[str], object]] = {}
        self.headers: list[str] = []
        self.widths: list[int] = []

    async def read(self, after: int = 0) -> tuple[Snapshot, Table]:
        """The rows now (once the view reflects log sequence `after`, or after CATCH_UP_SECONDS)."""
        deadline = asyncio.get_running_loop().time() + CATCH_UP_SECONDS
        snapshot = await read_snapshot(self.client, self.args.kind, self.args.vc)
        while snapshot.sequence is not None and snapshot.sequence < after:
            if asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(CATCH_UP_STEP)
            snapshot = await read_snapshot(self.client, self.args.kind, self.args.vc)
        snapshot = select(snapshot, self.selector, self.args.kind)
        wide = self.args.output == "wide"
        table = table_of(self.args.kind, snapshot, wide=wide, times={}, now=datetime.now(UTC))
        if self.args.kind == "nodes":  # a virtual node's age is its cluster's
            await self.learn_times("node", [n.node_id for n in snapshot.nodes if not n.parent_node])
            clusters = {n.node_id: n.labels.get(VCLUSTER_ID, "") for n in snapshot.nodes if n.parent_node}
            await self.learn_times("vc", sorted(set(clusters.values())))
            self.times |= {node: self.times[vc] for node, vc in clusters.items() if vc in self.times}
        elif self.args.kind in RECORD_KIND:
            await self.learn_times(RECORD_KIND[self.args.kind], [row[0] for row in table.rows])
        else:  # pending work: an actor's or a group's first event
            await self.learn_times("actor", [item.id for item in snapshot.pending if item.kind == "actor"])
            await self.learn_times("pg", [item.id for item in snapshot.pending if item.kind != "actor"])
        table = table_of(self.args.kind, snapshot, wide=wide, times=self.times, now=datetime.now(UTC))
        return snapshot, table.only(self.args.names)

    async def learn_times(self, kind: str, ids: list[str]) -> None:
        """The first-event times of those of `ids` (objects of log aggregate `kind`) not known yet."""
        self.times.update(await first_times(self.client, kind, [i for i in ids if i not in self.times]))

    def print_all(self, snapshot: Snapshot, table: Table) -> None:
        """The whole list, and (for a table) the totals under it."""
        self.shown = {row[0]: (row, item) for row, item in zip(table.rows, table.items, strict=True)}
        self.headers = table.headers
        if self.args.output in ("json", "yaml"):
            say(structured(table.items, self.args.output))
            return
        if not table.rows:
            if not self.args.names:
                print("No resources found.", file=sys.stderr)
            return
        cells = [table.headers, *table.rows]
        self.widths = [max(len(row[column]) for row in cells) for column in range(len(table.headers))]
        say(format_table(table.headers, table.rows))
        if self.args.kind != "vcs" and not self.args.watch and not self.args.names:
            say("\n" + "\n".join(totals(snapshot)))

    def print_changes(self, table: Table) -> None:
        """The rows that are new or changed (AGE aside) since they were last printed, and those that are gone."""
        now = {row[0]: (row, item) for row, item in zip(table.rows, table.items, strict=True)}
        ageless = [column for column, header in enumerate(table.headers) if header != "AGE"]
        for name, (row, item) in now.items():
            if name not in self.shown or [self.shown[name][0][c] for c in ageless] != [row[c] for c in ageless]:
                self.print_row(row, item)
        for name, (row, item) in self.shown.items():
            if name not in now:
                self.print_row([row[0], DELETED, *row[2:]], item)
        self.shown = now

    def print_row(self, row: list[str], item: object) -> None:
        if self.args.output in ("json", "yaml"):
            say(structured(item, self.args.output))
            return
        if not self.widths:  # the first row of a list that was empty: its header first
            self.widths = [max(len(header), len(cell)) for header, cell in zip(self.headers, row, strict=True)]
            say("  ".join(h.ljust(width) for h, width in zip(self.headers, self.widths, strict=True)).rstrip())
        say("  ".join(cell.ljust(width) for cell, width in zip(row, self.widths, strict=True)).rstrip())

    async def follow(self, start: int) -> None:
        """Print changes after each batch of events from `start` on, forever."""
        async for entry in self.client.bus.read_log(start, subjects=WATCHED[self.args.kind]):
            if entry.pending:  # more already waiting: show the rows once the batch is read
                continue
            _, table = await self.read(after=entry.sequence)
            self.print_changes(table)


def run_get(args: argparse.Namespace) -> int:
    """`corral get KIND`."""
    selector = label_selector(args)

    async def main() -> int:
        async with connected(args) as client:
            listing = Listing(client, args, selector)
            start = (await client.bus.js.stream_info(s.EVENTS_STREAM)).state.last_seq + 1
            listing.print_all(*await listing.read())
            missing = [name for name in dict.fromkeys(args.names) if name not in listing.shown]
            for name in missing:
                print(not_found(args.kind, name), file=sys.stderr)
            if not args.watch:
                return 1 if missing else 0
            with stop_signals() as stop:
                following = asyncio.create_task(listing.follow(start))
                stopping = asyncio.create_task(stop.wait())
                done, _ = await asyncio.wait((following, stopping), return_when=asyncio.FIRST_COMPLETED)
                await stop_tasks(following, stopping)
                if following in done:
                    following.result()  # the log reader failed: its error is the command's
            return 1 if missing else 0

    return asyncio.run(main())
