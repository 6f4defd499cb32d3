"""Entry point of the `corral` command (`python -m services.cli`): parse the command line and dispatch.

Exit status: 0 done, 1 the command was refused or failed (the reason is on stderr), 2 bad usage (a bad `CORRAL_*`
variable too).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Sequence

from services.cli.commands import (
    autoscaler,
    bench,
    config,
    deadletters,
    demo,
    describe,
    edit,
    get,
    history,
    loadtest,
    meta,
    node,
    ops,
    schema,
    sim,
    status,
    up,
    vc,
    work,
)
from services.cli.commands.meta import corral_version
from services.cli.common import CliError, ConfigFileError, UsageError, not_answering
from services.cli.parser import CorralParser, parse
from services.cli.registry import Registers, Subcommands, register
from services.client import (
    CorralError,
    NotFoundError,
    RejectedError,
    ServiceFailedError,
    StorageFullError,
    TooLargeError,
    UnavailableError,
)
from services.runtime.settings import SettingsError

COMMANDS: tuple[Registers, ...] = (
    get,
    describe,
    ops,
    work,
    edit,
    up,
    config,
    node,
    sim,
    status,
    history,
    autoscaler,
    deadletters,
    vc,
    schema,
    demo,
    bench,
    loadtest,
    meta,
)
"""Every command module of `corral`."""

GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Basic commands", ("get", "describe", "submit", "create", "delete")),
    ("Cluster management", ("label", "taint", "cordon", "uncordon", "drain")),
    ("Mesh", ("up", "config", "node", "sim")),
    ("Troubleshooting", ("why", "why-placed", "events", "status", "dead-letters")),  # a name not registered is skipped
    ("Other", ("vc", "autoscaler", "schema", "demo", "bench", "loadtest", "version", "completion")),
)
"""How `corral --help` groups the commands, as kubectl's help does."""


def command_groups(commands: Subcommands) -> str:
    """The grouped command list of `corral --help`: each command with its one-line help (a command GROUPS does not
    name is listed under the last group)."""
    helps = {action.dest: action.help or "" for action in commands._choices_actions}
    grouped = [(title, [name for name in names if name in helps]) for title, names in GROUPS]
    ungrouped = [name for name in helps if all(name not in names for _, names in GROUPS)]
    grouped[-1][1].extend(ungrouped)
    width = max(map(len, helps)) + 2
    blocks = [
        f"{title}:\n" + "\n".join(f"  {name:<{width}}{helps[name]}" for name in names) for title, names in grouped
    ]
    return "\n\n".join(blocks)


class GroupedHelp(argparse.RawDescriptionHelpFormatter):
    """`corral --help`: the commands appear once, in the grouped list of the epilog, not as a positional."""

    def add_arguments(self, actions: Iterable[argparse.Action]) -> None:
        super().add_arguments([action for action in actions if not isinstance(action, argparse._SubParsersAction)])


def build_parser() -> CorralParser:
    """The `corral` parser: every command of COMMANDS, listed in GROUPS by `--help`."""
    parser = CorralParser(
        prog="corral",
        usage="corral [-h] [--version] COMMAND ...",
        formatter_class=GroupedHelp,
        description="Corral: a scheduling control plane for actors, tasks and placement groups.",
    )
    parser.add_argument("--version", action="version", version=f"corral {corral_version()}")
    commands: Subcommands = parser.add_subparsers(  # type: ignore[assignment]  # its parsers are CorralParsers
        prog="corral", dest="command", metavar="COMMAND", required=True
    )
    register(commands, COMMANDS)
    parser.epilog = (
        f"{command_groups(commands)}\n\nMesh commands connect to --nats-url (default: $CORRAL_NATS_URL, else the "
        "endpoints file of the `corral up` in --data-dir or $CORRAL_DATA_DIR, default .corral/, else "
        "nats://127.0.0.1:4222;\n`corral config view` shows which).\nUse `corral COMMAND --help` for a command's "
        "options."
    )
    parser.set_defaults(root=parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run `corral` with `argv` (default: the process arguments); returns the exit status."""
    args = parse(build_parser(), argv)
    prog = args.parser.prog
    try:
        result: int = args.run(args)
    except UsageError as error:
        args.parser.error(str(error))  # exits with status 2
    except (SettingsError, ConfigFileError) as error:  # a bad CORRAL_* variable or configuration file: one line
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2
    except StorageFullError as error:  # the mesh runs: JetStream has no room (the message says what to do)
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 1
    except ServiceFailedError as error:  # it answered: the fault is the service's, not the request's
        print(f"{prog}: error: the {getattr(args, 'service', 'mesh')} could not serve it: {error}", file=sys.stderr)
        return 1
    except UnavailableError as error:
        print(f"{prog}: error: {not_answering(args, str(error))}", file=sys.stderr)
        return 1
    except TooLargeError as error:  # never sent, so nobody refused it
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 1
    except NotFoundError as error:  # kubectl's words for it
        print(f"Error from server (NotFound): {error}", file=sys.stderr)
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
