"""Entry point of the `corral` command (`python -m services.cli`): parse the command line and dispatch.

Exit status: 0 done, 1 the command was refused or failed (the reason is on stderr), 2 bad usage (a bad `CORRAL_*`
variable too).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from services.cli import bench_core, deadletters, demo, node, ops, schema, sim, status, up, vc
from services.cli.common import CliError, UsageError, not_answering
from services.client import CorralError, RejectedError, ServiceFailedError, TooLargeError, UnavailableError
from services.runtime.settings import SettingsError


def build_parser() -> argparse.ArgumentParser:
    """The `corral` parser: the mesh commands, `schema`, `demo`, and `bench` with its `core` benchmark."""
    parser = argparse.ArgumentParser(
        prog="corral",
        description="Corral: a scheduling control plane for actors, tasks and placement groups. Mesh commands "
        "connect to --nats-url (default: $CORRAL_NATS_URL, else nats://127.0.0.1:4222).",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    up.add_parsers(commands)
    node.add_parsers(commands)
    sim.add_parsers(commands)
    ops.add_parsers(commands)
    status.add_parsers(commands)
    deadletters.add_parsers(commands)
    vc.add_parsers(commands)
    schema.add_parsers(commands)

    demo_parser = commands.add_parser(
        "demo",
        help="run the in-process demo: a small cluster, a workload using every rule, placements and explanations",
        description=demo.__doc__,
    )
    demo_parser.set_defaults(run=lambda _args: demo.run(), parser=demo_parser)

    bench = commands.add_parser("bench", help="run a benchmark and print its figures", description="Benchmarks.")
    benchmarks = bench.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    core = benchmarks.add_parser(
        "core",
        help="decisions per second of the scheduling core (modelled on Kubernetes' scheduler_perf)",
        description=bench_core.__doc__,
    )
    bench_core.add_arguments(core)
    core.set_defaults(run=bench_core.run, parser=core)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run `corral` with `argv` (default: the process arguments); returns the exit status."""
    args = build_parser().parse_args(argv)
    prog = args.parser.prog
    try:
        result: int = args.run(args)
    except UsageError as error:
        args.parser.error(str(error))  # exits with status 2
    except SettingsError as error:  # a bad CORRAL_* variable: bad usage, one line
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2
    except ServiceFailedError as error:  # it answered: the fault is the service's, not the request's
        print(f"{prog}: error: the {getattr(args, 'service', 'mesh')} could not serve it: {error}", file=sys.stderr)
        return 1
    except UnavailableError as error:
        print(f"{prog}: error: {not_answering(args, str(error))}", file=sys.stderr)
        return 1
    except TooLargeError as error:  # never sent, so nobody refused it
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 1
    except RejectedError as error:
        print(f"{prog}: error: the {getattr(args, 'service', 'mesh')} refused it: {error}", file=sys.stderr)
        return 1
    except (CliError, CorralError) as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`corral demo | head`): stop quietly, as CLI tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return result


if __name__ == "__main__":
    raise SystemExit(main())
