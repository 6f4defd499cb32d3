"""`-o/--output` (one meaning everywhere: the output format) and the retired flags that still work for a while."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import msgspec
import yaml

from services.cli.common import json_text

FORMATS = ("table", "wide", "json", "yaml")


def deprecated(old: str, new: str) -> str:
    """The notice a retired spelling prints on stderr."""
    return f"corral: warning: {old} is deprecated and will be removed; use {new}"


class DeprecatedJson(argparse.Action):
    """The old `--json` of a listing: `-o json`, with a notice on stderr (hidden from --help)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help=argparse.SUPPRESS, **kwargs)

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: str | None = None
    ) -> None:
        print(deprecated("--json", "-o json"), file=sys.stderr)
        namespace.output = "json"


def add_output_argument(
    parser: argparse.ArgumentParser, formats: Sequence[str] = FORMATS, *, json: bool = False
) -> None:
    """`-o/--output FORMAT` (default table); `json`: also the retired `--json` as a hidden alias of `-o json`."""
    parser.add_argument(
        "-o",
        "--output",
        choices=formats,
        default="table",
        metavar="FORMAT",
        help=f"output format: {', '.join(formats)} (default: %(default)s)",
    )
    if json:
        parser.add_argument("--json", action=DeprecatedJson, dest="output")


def structured(value: Any, output: str) -> str:
    """A msgspec value (or plain data) as indented JSON or YAML."""
    if output == "json":
        return json_text(value)
    return yaml.safe_dump(msgspec.to_builtins(value, order="sorted"), sort_keys=True).rstrip("\n")
