"""Entry point of the `corral` command (`python -m services.cli`): parse the command line and dispatch.

Exit status: 0 done, 1 the command was refused or failed (the reason is on stderr), 2 bad usage (a bad `CORRAL_*`
variable too).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from services.cli.commands import autoscaler, bench, deadletters, demo, history, node, ops, schema, sim, status, up, vc
from services.cli.common import CliError, UsageError, not_answering
from services.cli.registry import Registers, register
from services.client import CorralError, RejectedError, ServiceFailedError, TooLargeError, UnavailableError
from services.runtime.settings import SettingsError

COMMANDS: tuple[Registers, ...] = (
    up,
    node,
    sim,
    ops,
    status,
    history,
    autoscaler,
    deadletters,
    vc,
    schema,
    demo,
    bench,
)
"""Every command of `corral`, in the order `corral --help` lists them."""


def build_parser() -> argparse.ArgumentParser:
    """The `corral` parser: every command of COMMANDS (the mesh commands, `schema`, `demo` and `bench`)."""
    parser = argparse.ArgumentParser(
        prog="corral",
        description="Corral: a scheduling control plane for actors, tasks and placement groups. Mesh commands "
        "connect to --nats-url (default: $CORRAL_NATS_URL, else nats://127.0.0.1:4222).",
    )
    register(parser.add_subparsers(dest="command", metavar="COMMAND", required=True), COMMANDS)
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
