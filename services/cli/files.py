"""`-f/--filename FILE`: a request read from a JSON or YAML file (`-`: standard input), as kubectl reads manifests."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TypeVar

import msgspec

from services.cli.common import CliError, read_input
from services.cli.output import deprecated
from services.core.documents import load_document
from services.core.errors import CodecError, RejectedError, TooLargeError
from services.runtime.codec import decode

T = TypeVar("T")


def add_filename_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """`-f/--filename FILE`: the whole `what` as JSON or YAML."""
    parser.add_argument(
        "-f", "--filename", metavar="FILE", help=f"read the whole {what} as JSON or YAML from FILE (`-`: stdin)"
    )


def add_deprecated_json(parser: argparse.ArgumentParser) -> None:
    """The old `--json FILE` (a request file): hidden from --help; `filename_of` warns when it is used."""
    parser.add_argument("--json", dest="json_file", metavar="FILE", help=argparse.SUPPRESS)


def filename_of(args: argparse.Namespace) -> str | None:
    """`-f FILE`, or the retired `--json FILE` with a notice on stderr; both given is bad usage."""
    old = getattr(args, "json_file", None)
    if old is None:
        return args.filename  # type: ignore[no-any-return]
    print(deprecated("--json FILE", "-f/--filename FILE"), file=sys.stderr)
    if args.filename is not None:
        raise CliError("give the request once: -f/--filename (or the retired --json), not both")
    return old  # type: ignore[no-any-return]


def read_file(source: str, kind: type[T], option: str = "-f") -> T:
    """The `kind` the file `source` holds, as JSON (strict) or YAML; a `CliError` naming the file and the field."""
    read: T = _read(source, kind, option, many=False)
    return read


def read_many(source: str, kind: type[T], option: str = "-f") -> T | list[T]:
    """The `kind` the file `source` holds, or the list of them it holds (a JSON array, a YAML sequence), read as
    `read_file` reads one."""
    read: T | list[T] = _read(source, kind, option, many=True)
    return read


def _read(source: str, kind: Any, option: str, *, many: bool) -> Any:
    """What `read_file` and `read_many` read; an error names a list as a list, anything else as one `kind`."""
    data = read_input(source, f"{option} {source}")
    one, listed = kind.__name__, f"list of {kind.__name__}s"
    as_list = many and data.lstrip()[:1] == b"["
    try:
        return decode(data, list[kind] if as_list else kind)
    except CodecError as error:
        if data.lstrip()[:1] in (b"{", b"["):  # JSON: its own error says what is wrong
            raise CliError(f"{option} {source}: not a {listed if as_list else one}: {error.reason}") from None
        json_error = error.reason
    try:
        loaded: Any = load_document(data, f"{option} {source}")
    except TooLargeError as error:  # an alias, too deep: that is what is wrong
        raise CliError(str(error)) from None
    except RejectedError:
        loaded = None
    if many and isinstance(loaded, list):
        kind, one = list[kind], listed
    elif not isinstance(loaded, dict):
        raise CliError(f"{option} {source}: not a {one} in JSON or YAML: {json_error}")
    try:
        return msgspec.convert(loaded, kind)
    except msgspec.ValidationError as error:
        raise CliError(f"{option} {source}: not a {one}: {error}") from None
