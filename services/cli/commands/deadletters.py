"""`corral dead-letters`: the messages the services set aside (unreadable requests, events they skipped)."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence

from schemas.queries import DeadLetter
from services.cli import args as types
from services.cli.common import add_connection_arguments, connected, json_text, say
from services.cli.registry import Subcommands
from services.cli.table import format_table

REASON_WIDTH = 100
"""Characters of a reason the table shows (`-o json` has them all)."""


def add_parsers(commands: Subcommands) -> None:
    """Register `dead-letters`."""
    letters = commands.add_parser(
        "dead-letters",
        help="list the messages the services set aside (unreadable or unfoldable), newest last",
        description="List what the services kept on the dead-letters stream instead of acting on it: requests "
        "they could not read (answered with an error and never redelivered) and events of the log they skipped "
        "(one per service and sequence). Columns: time, service, subject, sequence in the event log (- for a "
        "request), reason.",
    )
    letters.add_argument(
        "--service", dest="of_service", metavar="NAME", default="", help="only this service's (labels, scheduler...)"
    )
    letters.add_argument(
        "--limit", type=types.positive_int, default=100, metavar="N", help="the newest N (default: %(default)s)"
    )
    letters.add_argument(
        "-o", "--output", choices=("table", "json"), default="table", help="table (default) or json with the bytes"
    )
    add_connection_arguments(letters, service="NATS server")
    letters.set_defaults(run=run_dead_letters, parser=letters)


def render(letters: Sequence[DeadLetter]) -> str:
    """The dead letters as a table, or a line saying there are none."""
    if not letters:
        return "no dead letters"
    rows = [
        (letter.time, letter.service, letter.subject or "-", letter.sequence or "-", _cut(letter.reason))
        for letter in letters
    ]
    return format_table(("TIME", "SERVICE", "SUBJECT", "SEQUENCE", "REASON"), rows)


def _cut(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= REASON_WIDTH else line[: REASON_WIDTH - 3] + "..."


def run_dead_letters(args: argparse.Namespace) -> int:
    """`corral dead-letters`."""

    async def main() -> list[DeadLetter]:
        async with connected(args) as client:
            return await client.dead_letters(args.of_service, args.limit)

    letters = asyncio.run(main())
    say(json_text(letters) if args.output == "json" else render(letters))
    return 0
