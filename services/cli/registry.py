"""How a command joins `corral`: each command module (and each benchmark) has `add_parsers(commands)`, which adds
its parsers with `run` (what to call) and `parser` (whose usage to print on an error) as defaults; `register`
walks a tuple of such modules in the order `--help` lists them."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Protocol, TypeAlias

Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""What `add_subparsers()` returns: where a command adds its parser."""


class Registers(Protocol):
    """A command module: it adds its parsers (one command, or a group and its verbs) to `commands`."""

    def add_parsers(self, commands: Subcommands) -> None:
        """Add the parsers, each with `run=` and `parser=` set as defaults."""


def register(commands: Subcommands, modules: Iterable[Registers]) -> None:
    """Let each of `modules` add its parsers, in order."""
    for module in modules:
        module.add_parsers(commands)
