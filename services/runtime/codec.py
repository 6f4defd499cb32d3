"""Encode and decode wire messages (JSON, so clients in any language can speak) with clear errors.

`decode` is the one place a message from the bus is read: it bounds the size and the nesting depth before
decoding, and turns any failure of decoding or validating it into a `CodecError`, so one malformed message
is refused (or set aside) and never stops the process that read it.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from types import UnionType
from typing import Any, TypeVar, Union, get_args, get_origin

import msgspec

from services.core.amounts import check_amounts
from services.core.errors import CodecError, RejectedError

T = TypeVar("T")

_ENCODER = msgspec.json.Encoder()

MAX_BYTES = 1_048_576
"""The largest message `decode` reads unless told otherwise (NATS's default payload limit)."""

MAX_DEPTH = 48
"""How deeply arrays and objects may nest in a message; the deepest the wire contract builds is about 8."""

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in b"[]{}")
_NOT_MARKS = bytes(byte for byte in range(256) if byte not in b'[]{}"')
_INNERMOST = re.compile(rb"\[\]|\{\}")


def _refused(kind: Any, reason: str) -> CodecError:
    """The error for a message that cannot be read as `kind`: the type's name and the reason, on one line."""
    return CodecError(_name(kind), _one_line(reason))


def _one_line(text: str) -> str:
    """`text` with line breaks and other control or invisible characters escaped (`\\n`, `\\u2028`): a reason quotes
    the message (an unknown field's name, say), and must stay one line in a log or on a terminal."""
    return "".join(
        char.encode("unicode_escape", "backslashreplace").decode("ascii")
        if unicodedata.category(char)[0] == "C" or unicodedata.category(char) in ("Zl", "Zp")
        else char
        for char in text
    )


def encode(value: object) -> bytes:
    """A Struct (or plain value) as JSON bytes."""
    return _ENCODER.encode(value)


@lru_cache(maxsize=256)
def _cached_decoder(kind: Any) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(kind)


def prepare_decoder(kind: Any) -> None:
    """Build `kind`'s decoder now, before the first message needs it (a fork server builds it once for its children)."""
    _decoder(kind)


def _decoder(kind: Any) -> msgspec.json.Decoder[Any]:
    """A decoder for `kind`, built once per type: `msgspec.json.decode(type=...)` rebuilds a union's on every call."""
    try:
        return _cached_decoder(kind)
    except TypeError:  # an unhashable type: build it each time
        return msgspec.json.Decoder(kind)


def _name(kind: Any) -> str:
    """A type's name; a union of many is named by its count, not a line of every member."""
    members = get_args(kind) if get_origin(kind) in (Union, UnionType) else ()
    if len(members) > 3:
        return f"one of {len(members)} message types"
    if members:
        return " | ".join(_name(member) for member in members)
    name = getattr(kind, "__name__", None)
    return str(kind) if name is None else str(name)


def _marks(data: bytes) -> bytes:
    """The brackets and quotes of `data`, in order (all that the quick depth check reads)."""
    return data.translate(None, _NOT_MARKS)


def _nests_too_deep(data: bytes, marks: bytes, max_depth: int) -> bool:
    """Whether the arrays and objects of `data` (whose brackets and quotes are `marks`) nest deeper than `max_depth`
    (or their brackets do not pair up).

    `decode` asks only when the message holds more brackets in all than the limit (every batch does): without a
    backslash and with quotes paired, the strings are every other piece between quotes. Kept to its brackets and
    quotes, the message loses its strings without brackets as `""` pairs (two quotes in a row leave every bracket
    as far inside or outside a string as it was), and only what is left is split at quotes. A pass of two plain
    replaces then peels one or two levels of brackets, so `max_depth // 2` passes that leave none prove the depth
    within the limit; anything else is settled by `_nests_deeper_exactly`, which gives the same answer for any bytes.
    """
    if b"\\" in data or marks.count(b'"') % 2:
        return _nests_deeper_exactly(data, max_depth)
    brackets = marks.replace(b'""', b"")
    if b'"' in brackets:
        brackets = b"".join(brackets.split(b'"')[::2])
    for _ in range(max_depth // 2):
        if not brackets:
            return False
        brackets = brackets.replace(b"[]", b"").replace(b"{}", b"")
    return bool(brackets) and _nests_deeper_exactly(data, max_depth)


def _nests_deeper_exactly(data: bytes, max_depth: int) -> bool:
    """`_nests_too_deep` for any bytes: strings removed by a regular expression that knows escapes, then the
    innermost pairs removed one level per pass, all in C."""
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    for _ in range(max_depth):
        if not brackets:
            return False
        brackets = _INNERMOST.sub(b"", brackets)
    return bool(brackets)


def decode(data: bytes, kind: Any, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """`data` as `kind`, or a `CodecError` naming the type, the offending path and the rule.

    Whatever goes wrong reading one message (invalid UTF-8, a recursion, a bug in a type's hook) is a
    `CodecError`: the same verdict for the same bytes in every process.
    """
    if len(data) > max_bytes:
        raise _refused(kind, f"message of {len(data)} bytes is over the {max_bytes}-byte limit")
    marks = _marks(data)
    if marks.count(b"{") + marks.count(b"[") > max_depth and _nests_too_deep(data, marks, max_depth):
        raise _refused(kind, f"arrays and objects nest deeper than the {max_depth}-level limit")
    decoder = _decoder(kind)
    try:
        return decoder.decode(data)
    except msgspec.ValidationError as error:
        raise _refused(kind, _located(data, kind) or str(error)) from None
    except msgspec.DecodeError as error:  # msgspec 0.23 says "Invalid UTF-8" here; 0.22 raised UnicodeDecodeError
        rule = "not valid UTF-8" if "UTF-8" in str(error) else "not valid JSON"
        raise _refused(kind, f"{rule} ({error})") from None
    except UnicodeDecodeError as error:
        raise _refused(kind, f"not valid UTF-8 ({error.reason} at byte {error.start})") from None
    except Exception as error:  # one message must never stop its reader
        raise _refused(kind, f"unreadable ({type(error).__name__}: {error})") from None


def _located(data: bytes, kind: Any) -> str:
    """The number out of bounds in `data`, named by its path with keys (msgspec's own path hides a map's keys)."""
    try:
        check_amounts(msgspec.json.decode(data), kind)
    except RejectedError as error:
        return str(error)
    except Exception:  # unreadable as plain JSON too (invalid UTF-8 in a key, say): msgspec's message will do
        return ""
    return ""
