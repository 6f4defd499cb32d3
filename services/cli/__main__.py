"""Entry point of the `corral` command (`python -m services.cli`): parse the command line and dispatch."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from services.cli import bench_core, demo


def build_parser() -> argparse.ArgumentParser:
    """The `corral` parser: `demo`, and `bench` with its `core` benchmark."""
    parser = argparse.ArgumentParser(
        prog="corral",
        description="Corral: a scheduling control plane for actors, tasks and placement groups.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo_parser = commands.add_parser(
        "demo",
        help="run the in-process demo: a small cluster, a workload using every rule, placements and explanations",
        description=demo.__doc__,
    )
    demo_parser.set_defaults(run=lambda _args: demo.run())

    bench = commands.add_parser("bench", help="run a benchmark and print its figures", description="Benchmarks.")
    benchmarks = bench.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    core = benchmarks.add_parser(
        "core",
        help="decisions per second of the scheduling core (modelled on Kubernetes' scheduler_perf)",
        description=bench_core.__doc__,
    )
    bench_core.add_arguments(core)
    core.set_defaults(run=bench_core.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run `corral` with `argv` (default: the process arguments); returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        status: int = args.run(args)
    except BrokenPipeError:  # the reader went away (`corral demo | head`): stop quietly, as CLI tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return status


if __name__ == "__main__":
    raise SystemExit(main())
