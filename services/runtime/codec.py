"""Encode and decode wire messages (JSON, so clients in any language can speak) with clear errors."""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

T = TypeVar("T")

_ENCODER = msgspec.json.Encoder()


class CodecError(ValueError):
    """A message could not be read as the type its subject carries; the text says where and why."""


def encode(value: object) -> bytes:
    """A Struct (or plain value) as JSON bytes."""
    return _ENCODER.encode(value)


def decode(data: bytes, kind: Any, *, max_bytes: int = 1_048_576) -> Any:
    """`data` as `kind`, or a `CodecError` naming the type, the offending path and the rule."""
    name = getattr(kind, "__name__", str(kind))
    if len(data) > max_bytes:
        raise CodecError(f"{name}: message of {len(data)} bytes is over the {max_bytes}-byte limit")
    try:
        return msgspec.json.decode(data, type=kind)
    except msgspec.ValidationError as error:
        raise CodecError(f"{name}: {error}") from None
    except msgspec.DecodeError as error:
        raise CodecError(f"{name}: not valid JSON ({error})") from None
