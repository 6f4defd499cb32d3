"""`corral bench`: the benchmarks (services.cli.bench), each registered like a command."""

from __future__ import annotations

from services.cli.bench import autoscaler, core, gateway, pending
from services.cli.registry import Registers, Subcommands, register

BENCHMARKS: tuple[Registers, ...] = (core, autoscaler, gateway, pending)
"""Every benchmark, in the order `corral bench --help` lists them."""


def add_parsers(commands: Subcommands) -> None:
    """`corral bench` and a verb per benchmark."""
    bench = commands.add_parser("bench", help="run a benchmark and print its figures", description="Benchmarks.")
    register(bench.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True), BENCHMARKS)
