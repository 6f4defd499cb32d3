"""Structured label-match operators (`In`, `NotIn`, `Exists`, `DoesNotExist`) shared by selectors and tolerations."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

MatchOp = Literal["in", "not_in", "exists", "does_not_exist"]


class LabelMatch(msgspec.Struct, frozen=True, tag="match", forbid_unknown_fields=True):
    """One label condition in structured form; the string grammar (`in(a,b)`, `!v`, ...) parses to the same thing."""

    op: Annotated[
        MatchOp,
        Meta(
            description="in: one of values; not_in: missing or none of values; exists: present; does_not_exist: absent."
        ),
    ]
    values: Annotated[
        tuple[str, ...], Meta(description="The values in and not_in compare with (unused otherwise).")
    ] = ()


SelectorValue = str | LabelMatch
"""A selector or toleration value: the string grammar or a structured `LabelMatch`."""

SelectorSpec = dict[str, SelectorValue]
"""A label selector as users write it: label key -> condition."""


def _values(name: str, values: tuple[str, ...]) -> tuple[str, ...]:
    if not values:
        raise ValueError(f"{name}() needs at least one value: an empty set matches nothing")
    for value in values:
        if not isinstance(value, str):
            raise ValueError(f"{name}(): value {value!r} must be a string")
    return values


def In(*values: str) -> LabelMatch:  # noqa: N802 - the proposals' API spells these as constructors
    """The label's value is one of `values`."""
    return LabelMatch("in", _values("In", values))


def NotIn(*values: str) -> LabelMatch:  # noqa: N802 - the proposals' API spells these as constructors
    """The label is missing or its value is none of `values`."""
    return LabelMatch("not_in", _values("NotIn", values))


def Exists() -> LabelMatch:  # noqa: N802 - the proposals' API spells these as constructors
    """The label is present, whatever its value."""
    return LabelMatch("exists")


def DoesNotExist() -> LabelMatch:  # noqa: N802 - the proposals' API spells these as constructors
    """The label is absent."""
    return LabelMatch("does_not_exist")
