"""`corral version` and `corral completion bash|zsh` (shell completion scripts, made by shtab from the parser)."""

from __future__ import annotations

import argparse
from importlib.metadata import PackageNotFoundError, version

import shtab

from services.cli.common import say
from services.cli.registry import Subcommands

SHELLS = ("bash", "zsh")


def corral_version() -> str:
    """The installed package's version (`unknown` when run from a tree that is not installed)."""
    try:
        return version("corral")
    except PackageNotFoundError:
        return "unknown"


def add_parsers(commands: Subcommands) -> None:
    """Register `version` and `completion`."""
    shown = commands.add_parser("version", help="print Corral's version", description="Print Corral's version.")
    shown.set_defaults(run=run_version, parser=shown)

    completion = commands.add_parser(
        "completion",
        help="print a shell completion script (bash or zsh)",
        description="Print a completion script for bash or zsh. Load it in the current shell with "
        "`source <(corral completion bash)`, or write it where your shell reads completions: "
        "`corral completion zsh > ~/.zfunc/_corral` (with ~/.zfunc in $fpath).",
    )
    completion.add_argument("shell", choices=SHELLS, help="the shell")
    completion.set_defaults(run=run_completion, parser=completion)


def run_version(_args: argparse.Namespace) -> int:
    """`corral version`."""
    say(f"corral {corral_version()}")
    return 0


def run_completion(args: argparse.Namespace) -> int:
    """`corral completion SHELL`: the script for the whole `corral` parser (`root`, set by `build_parser`)."""
    say(shtab.complete(args.root, shell=args.shell))
    return 0
