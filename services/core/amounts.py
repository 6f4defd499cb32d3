"""Check every number of a wire message against its type before it is sent: finite, and within its bounds (pure).

Building a Struct in Python checks none of its `msgspec.Meta` constraints, and JSON has no NaN or infinity
(msgspec writes them as `null`), so a message is checked here, where the error can still name the field, the
value and the rule.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import msgspec.inspect as mi

from services.core.errors import rule_error


@lru_cache(maxsize=128)
def _info(kind: Any) -> mi.Type:
    return mi.type_info(kind)


def check_amounts(message: object, kind: Any = None) -> None:
    """Raise `RejectedError` naming the first number of `message` that is not finite or breaks its bound.

    `message` is a Struct, or the plain JSON values of a message of type `kind`.
    """
    if kind is None:
        kind = type(message)
    _check(message, _info(kind), "")


def _check(value: Any, info: mi.Type, path: str) -> None:
    if isinstance(info, mi.FloatType | mi.IntType):
        _check_number(value, info, path)
        return
    for item, item_info, item_path in _parts(value, info, path):
        _check(item, item_info, item_path)


def _parts(value: Any, info: mi.Type, path: str) -> Iterable[tuple[Any, mi.Type, str]]:
    """The values inside `value` with their types and paths (a union's: as each member would read it)."""
    if isinstance(info, mi.StructType) and isinstance(value, info.cls):
        return [(getattr(value, field.name), field.type, _join(path, field.name)) for field in info.fields]
    if isinstance(info, mi.StructType) and isinstance(value, dict):
        if info.tag_field is not None and value.get(info.tag_field) != info.tag:
            return []  # another member of the union
        fields = [field for field in info.fields if field.encode_name in value]
        return [(value[field.encode_name], field.type, _join(path, field.name)) for field in fields]
    if isinstance(info, mi.TypedDictType) and isinstance(value, dict):
        return [
            (value[field.name], field.type, _join(path, field.name)) for field in info.fields if field.name in value
        ]
    if isinstance(info, mi.DictType) and isinstance(value, dict):
        return [(item, info.value_type, f"{path}[{key!r}]") for key, item in value.items()]
    if isinstance(info, mi.ListType | mi.VarTupleType) and isinstance(value, list | tuple):
        return [(item, info.item_type, f"{path}[{index}]") for index, item in enumerate(value)]
    if isinstance(info, mi.UnionType):
        return [(value, member, path) for member in info.types]
    return []


def _check_number(value: Any, info: mi.FloatType | mi.IntType, path: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return
    outside = (
        (info.ge is not None and value < info.ge)
        or (info.gt is not None and value <= info.gt)
        or (info.le is not None and value > info.le)
        or (info.lt is not None and value >= info.lt)
    )
    if outside or not math.isfinite(value):
        kind = "an integer" if isinstance(info, mi.IntType) else "a finite number"
        raise rule_error(path, value, f"must be {kind}{_bounds(info)}")


def _bounds(info: mi.FloatType | mi.IntType) -> str:
    bounds = [(">=", info.ge), (">", info.gt), ("<=", info.le), ("<", info.lt)]
    return "".join(f" {sign} {bound:g}" for sign, bound in bounds if bound is not None)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
