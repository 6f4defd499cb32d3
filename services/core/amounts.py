"""Check every number of a wire message against its type before it is sent: finite, and within its bounds (pure).

Building a Struct in Python checks none of its `msgspec.Meta` constraints, and JSON has no NaN or infinity
(msgspec writes them as `null`), so a message is checked here, where the error can still name the field, the
value and the rule.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any, Final

import msgspec.inspect as mi

from services.core.errors import RejectedError, rule_error


@lru_cache(maxsize=128)
def _info(kind: Any) -> mi.Type:
    return mi.type_info(kind)


def check_amounts(message: object, kind: Any = None) -> None:
    """Raise `RejectedError` naming the first number of `message` that is not finite or breaks its bound.

    `message` is a Struct, or the plain JSON values of a message of type `kind`. The numbers are first checked by
    `_checker(kind)`, which names nothing and visits only what can hold a number; only a message it cannot pass is
    walked again with paths (`_check`), for the error.
    """
    if kind is None:
        kind = type(message)
    within = _checker(kind)
    if within is not None and not within(message):  # None: the type holds no number
        _check(message, _info(kind), "")


Within = Callable[[Any], bool]
"""Whether every number inside a value is finite and within its bounds, as `_check` reads the value: True only when
`_check` would raise nothing (False also for a shape it does not know: a plain JSON object where a Struct goes)."""


_STRUCT_CHECKS: Final[dict[type, Within | None]] = {}
"""Each Struct type's check, once built (a type that holds itself, as a virtual cluster its children, refers to it)."""


@lru_cache(maxsize=128)
def _checker(kind: Any) -> Within | None:
    """`kind`'s check, built once; None when nothing in it is a number with a bound to check."""
    return _within(_info(kind), set())


def _within(info: mi.Type, building: set[type]) -> Within | None:
    """The check of a value of type `info`, mirroring `_parts` (None: no number inside, nothing to do); `building`:
    the Struct types whose checks are being built, which a field of theirs refers to as built later."""
    while isinstance(info, mi.Metadata):
        info = info.type
    if isinstance(info, mi.FloatType | mi.IntType):
        return functools.partial(_number_within, info)
    if isinstance(info, mi.StructType):
        return _struct_check(info, building)
    if isinstance(info, mi.TypedDictType):
        keyed = [(field.name, check) for field in info.fields if (check := _within(field.type, building)) is not None]
        return functools.partial(_typed_dict_within, keyed) if keyed else None
    if isinstance(info, mi.DictType):
        check = _within(info.value_type, building)
        return None if check is None else functools.partial(_items_within, dict, check)
    if isinstance(info, mi.ListType | mi.VarTupleType):
        check = _within(info.item_type, building)
        return None if check is None else functools.partial(_items_within, list | tuple, check)
    if isinstance(info, mi.UnionType):
        members = [check for member in info.types if (check := _within(member, building)) is not None]
        return functools.partial(_all_within, members) if members else None
    return None


def _struct_check(info: mi.StructType, building: set[type]) -> Within | None:
    cls = info.cls
    if cls in _STRUCT_CHECKS:
        return _STRUCT_CHECKS[cls]
    if cls in building:
        return functools.partial(_built_later, cls)
    building.add(cls)
    fields = [(field.name, check) for field in info.fields if (check := _within(field.type, building)) is not None]
    building.discard(cls)
    check = functools.partial(_struct_within, cls, fields) if fields else None
    _STRUCT_CHECKS[cls] = check
    return check


def _built_later(cls: type, value: Any) -> bool:
    check = _STRUCT_CHECKS.get(cls)
    return check is None or check(value)


def _number_within(info: mi.FloatType | mi.IntType, value: Any) -> bool:
    try:
        _check_number(value, info, "")
    except RejectedError:
        return False
    return True


def _struct_within(cls: type, fields: list[tuple[str, Within]], value: Any) -> bool:
    if isinstance(value, cls):
        return all(check(getattr(value, name)) for name, check in fields)
    return not isinstance(value, dict)  # a plain object is read by its tag and encoded names: `_check` decides


def _typed_dict_within(fields: list[tuple[str, Within]], value: Any) -> bool:
    return not isinstance(value, dict) or all(check(value[name]) for name, check in fields if name in value)


def _items_within(kind: Any, check: Within, value: Any) -> bool:
    if not isinstance(value, kind):
        return True
    items = value.values() if isinstance(value, dict) else value
    return all(check(item) for item in items)


def _all_within(members: list[Within], value: Any) -> bool:
    return all(check(value) for check in members)


def _check(value: Any, info: mi.Type, path: str) -> None:
    while isinstance(info, mi.Metadata):  # a field's description (or other annotations) around its type
        info = info.type
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


# amounts spelled for people: one spelling in every table, message and event meaning

SUFFIXES: Final[dict[str, float]] = {
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
    "Ei": 2.0**60,
}
"""The Kubernetes quantity suffixes: decimal `k M G T P E`, binary `Ki ... Ei` (powers of 1024), `m` thousandths."""
_BINARY_FIRST: Final = ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki")
_LARGE_DECIMAL_FIRST: Final = ("E", "P", "T", "G", "M")


def _decimals(value: float, places: int) -> str:
    """`value` with at most `places` decimals, trailing zeros dropped, never in exponent notation."""
    return f"{value:.{places}f}".rstrip("0").rstrip(".")


def format_quantity(value: float, *, binary: bool = False) -> str:
    """`value` as a Kubernetes quantity, never in exponent notation: with `binary` (memory) in the largest binary
    unit it fills (`4Gi`, `1.5Gi`, `3.2Gi` rounded to 2 decimals; bytes below 1Ki); else `500m` below 1, plain
    numbers up to a million (`1796`, `1.5`), then `M`, `G`, ... (`2.5M`)."""
    if not math.isfinite(value):
        return str(value)
    if value < 0:
        return "-" + format_quantity(-value, binary=binary)
    for suffix in _BINARY_FIRST if binary else _LARGE_DECIMAL_FIRST:
        if value >= SUFFIXES[suffix]:
            return _decimals(value / SUFFIXES[suffix], 2 if binary else 3) + suffix
    if 0 < value < 1 and not binary:
        return _decimals(value * 1000, 3) + "m"
    return _decimals(value, 3) or "0"


def format_amount(name: str, value: float) -> str:
    """A resource's amount: memory-like resources in binary units (`4Gi`), the others decimal (`500m`, `8`)."""
    return format_quantity(value, binary="memory" in name.lower())


def format_amounts(amounts: Mapping[str, float], *, joiner: str = "=") -> str:
    """`CPU=8, memory=4Gi` (names sorted, CPU first; `joiner` between a name and its amount), `nothing` if empty."""
    names = sorted(amounts, key=lambda name: (name != "CPU", name))
    return ", ".join(f"{name}{joiner}{format_amount(name, amounts[name])}" for name in names) or "nothing"
