"""`corral demo`: the in-process demo (services.cli.demo.inprocess)."""

from __future__ import annotations

import argparse

from services.cli.demo import inprocess
from services.cli.registry import Subcommands


def add_parsers(commands: Subcommands) -> None:
    """`corral demo`."""
    demo = commands.add_parser(
        "demo",
        help="run the in-process demo: a small cluster, a workload using every rule, placements and explanations",
        description=inprocess.__doc__,
    )
    demo.set_defaults(run=run_demo, parser=demo)


def run_demo(_args: argparse.Namespace) -> int:
    """Run the in-process demo; 0 when done."""
    return inprocess.run()
