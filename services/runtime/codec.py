"""Encode and decode wire messages (JSON, so clients in any language can speak) with clear errors."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, TypeVar

import msgspec

T = TypeVar("T")

_ENCODER = msgspec.json.Encoder()


class CodecError(ValueError):
    """A message could not be read as the type its subject carries; the text says where and why."""


def encode(value: object) -> bytes:
    """A Struct (or plain value) as JSON bytes."""
    return _ENCODER.encode(value)


@lru_cache(maxsize=256)
def _cached_decoder(kind: Any) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(kind)


def _decoder(kind: Any) -> msgspec.json.Decoder[Any]:
    """A decoder for `kind`, built once per type: `msgspec.json.decode(type=...)` rebuilds a union's on every call."""
    try:
        return _cached_decoder(kind)
    except TypeError:  # an unhashable type: build it each time
        return msgspec.json.Decoder(kind)


def _name(kind: Any) -> str:
    name = getattr(kind, "__name__", None)
    return str(kind) if name is None else str(name)


def decode(data: bytes, kind: Any, *, max_bytes: int = 1_048_576) -> Any:
    """`data` as `kind`, or a `CodecError` naming the type, the offending path and the rule."""
    if len(data) > max_bytes:
        raise CodecError(f"{_name(kind)}: message of {len(data)} bytes is over the {max_bytes}-byte limit")
    decoder = _decoder(kind)
    try:
        return decoder.decode(data)
    except msgspec.ValidationError as error:
        raise CodecError(f"{_name(kind)}: {error}") from None
    except msgspec.DecodeError as error:
        raise CodecError(f"{_name(kind)}: not valid JSON ({error})") from None
