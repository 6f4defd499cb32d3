"""`corral`'s argparse parser: errors printed with the usage of the (sub)command they concern and a "did you mean"
for a mistyped flag or subcommand (Python 3.12's `suggest_on_error`, which 3.11 lacks)."""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Sequence
from typing import NoReturn

INVALID_CHOICE = re.compile(r"invalid choice: '(?P<given>[^']*)' \(choose from (?P<choices>.*)\)$")
UNRECOGNIZED = "unrecognized arguments: "


def closest(given: str, known: Sequence[str]) -> list[str]:
    """The spellings of `known` close to `given`, best first (at most two)."""
    return difflib.get_close_matches(given, known, n=2, cutoff=0.6)


class CorralParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors suggest the closest flag or choice; its subparsers are of this class too."""

    def flags(self) -> list[str]:
        """Every long and short option of this parser."""
        return [option for action in self._actions for option in action.option_strings]

    def suggestion(self, message: str) -> str:
        """`; did you mean ...?` for the first unknown flag or choice `message` names, else ""."""
        choice = INVALID_CHOICE.search(message)
        if choice:
            known = re.findall(r"'([^']*)'", choice["choices"])
            matches = closest(choice["given"], known)
        elif message.startswith(UNRECOGNIZED):
            unknown = [word.partition("=")[0] for word in message[len(UNRECOGNIZED) :].split() if word[:1] == "-"]
            matches = next((found for word in unknown if (found := closest(word, self.flags()))), [])
        else:
            matches = []
        return f"; did you mean {' or '.join(matches)}?" if matches else ""

    def error(self, message: str) -> NoReturn:
        """Print this parser's usage and `message` (with a suggestion), exit 2."""
        super().error(message + self.suggestion(message))


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """`argv` parsed; words past the positionals (`label node n1 --overwrite k-`) join the command's list of words
    when it takes one (its `intermixed` default names it), every leftover joins it when the command hands its
    words to another program (its `passthrough` default names the list), and any other leftover is an error of the
    subcommand's own parser, with its usage."""
    args, extras = parser.parse_known_args(argv)
    intermixed = getattr(args, "intermixed", "")
    passthrough = getattr(args, "passthrough", "")
    if passthrough:
        setattr(args, passthrough, extras)
    elif intermixed and extras and all(word[:1] != "-" for word in extras):
        getattr(args, intermixed).extend(extras)
    elif extras:
        getattr(args, "parser", parser).error(UNRECOGNIZED + " ".join(extras))
    return args
