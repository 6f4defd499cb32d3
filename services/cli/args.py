"""Command-line value parsers (`type=` callables for argparse): resources, labels, taints, selectors, tolerations.

Each raises `argparse.ArgumentTypeError` with a message naming the value and the rule; argparse prefixes it with
the flag (`argument --resources: ...`) and exits with status 2.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from typing import TypeVar, get_args

from schemas import Exists, SelectorValue, Taint, TaintEffect
from services.cli.quantity import parse_quantity
from services.core.amounts import format_amount
from services.core.errors import LabelError, RejectedError
from services.core.labels import parse_labels, validate_label_key, validate_label_value
from services.core.request import MAX_TOLERATION_S
from services.core.selectors import parse_condition
from services.runtime.settings import URL_SCHEMES, url_rule

Value = TypeVar("Value")

TAINT_EFFECTS: tuple[str, ...] = get_args(TaintEffect)
"""The taint effects the wire contract knows, in its order."""

ALIASES = {"cpu": "CPU", "gpu": "GPU"}
"""kubectl's lowercase resource names, taken as Corral's."""

_RESOURCE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_./:-]{0,127}")


def _entries(text: str) -> list[str]:
    """The comma-separated entries of `text`, stripped, blanks dropped."""
    return [entry.strip() for entry in text.split(",") if entry.strip()]


def resources(text: str) -> dict[str, float]:
    """`CPU=8,GPU=1,memory=16Gi` as `{"CPU": 8.0, ...}`: names once each, quantities >= 0 (`500m`, `4Gi`, `2k`);
    `cpu` and `gpu` (kubectl's spelling) mean CPU and GPU."""
    parsed: dict[str, float] = {}
    entries = _entries(text)
    if not entries:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=AMOUNT entries separated by commas (CPU=8,GPU=1)")
    for entry in entries:
        name, equals, amount_text = (part.strip() for part in entry.partition("="))
        if not equals:
            raise argparse.ArgumentTypeError(f"resource {entry!r} in {text!r}: expected NAME=AMOUNT (CPU=8)")
        if not _RESOURCE_NAME.fullmatch(name):
            raise argparse.ArgumentTypeError(
                f"resource {entry!r} in {text!r}: name {name!r} must start with a letter or '_' "
                "and hold only letters, digits, '_', '.', '/', ':' or '-'"
            )
        name = ALIASES.get(name, name)
        try:
            amount = parse_quantity(f"resource {name}", amount_text)
        except RejectedError as error:
            raise argparse.ArgumentTypeError(f"{error} (in {text!r})") from None
        if name in parsed:
            raise argparse.ArgumentTypeError(f"resource {name!r} in {text!r}: given twice")
        parsed[name] = amount
    return parsed


def amount(text: str) -> float:
    """A resource amount: a quantity >= 0 (`2`, `500m`, `4Gi`; `nan`, `inf` and negatives are refused)."""
    try:
        return parse_quantity("amount", text)
    except RejectedError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def labels(text: str) -> dict[str, str]:
    """`k=v,k2=v2` as a dict, in Kubernetes label syntax (user labels: no `corral.io/` prefix)."""
    try:
        return parse_labels(text)
    except LabelError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def taint(text: str) -> Taint:
    """`key=value:Effect`, `key:Effect`, `key=value` or `key` as a `Taint` (the effect defaults to NoSchedule)."""
    entry = text.strip()
    body, colon, effect = entry.rpartition(":")
    if not colon:
        body, effect = entry, "NoSchedule"
    if effect not in TAINT_EFFECTS:
        raise argparse.ArgumentTypeError(
            f"taint {entry!r}: effect {effect!r} must be one of {', '.join(TAINT_EFFECTS)}"
        )
    key, _, value = (part.strip() for part in body.partition("="))
    try:
        validate_label_key(key, allow_system=True)
        validate_label_value(key, value)
    except LabelError as error:
        raise argparse.ArgumentTypeError(f"taint {entry!r}: {error}") from None
    return Taint(key, value, effect)  # type: ignore[arg-type]  # checked against TAINT_EFFECTS above


def taints(text: str) -> list[Taint]:
    """`k=v:Effect,k2=v2` as a list of taints (see `taint`)."""
    return [taint(entry) for entry in _entries(text)]


def selector(text: str) -> tuple[str, SelectorValue]:
    """One selector entry `key=condition`: `zone=z1`, `zone=!z1`, `zone=in(z1,z2)`, `gpu=exists()`, ..."""
    key, equals, value = (part.strip() for part in text.partition("="))
    if not equals:
        raise argparse.ArgumentTypeError(f"selector {text!r}: expected KEY=CONDITION (zone=z1, zone=in(z1,z2))")
    try:
        parse_condition(key, value)
    except LabelError as error:
        raise argparse.ArgumentTypeError(f"selector {text!r}: {error}") from None
    return key, value


def toleration(text: str) -> tuple[str, SelectorValue]:
    """One toleration: `key=value` (or any selector condition), or a bare `key` for any value."""
    key, equals, value = (part.strip() for part in text.partition("="))
    condition: SelectorValue = value if equals else Exists()
    try:
        parse_condition(key, condition)
    except LabelError as error:
        raise argparse.ArgumentTypeError(f"toleration {text!r}: {error}") from None
    return key, condition


def toleration_seconds(text: str) -> tuple[str, float]:
    """`KEY=SECONDS` (`10`, `10s`, `2m`, `1h`): how long a NoExecute taint of KEY is tolerated."""
    key, equals, value = (part.strip() for part in text.partition("="))
    scale = {"s": 1, "m": 60, "h": 3600}.get(value[-1:], 0)
    try:
        seconds = float(value[:-1] if scale else value) * (scale or 1)
    except ValueError:
        seconds = math.nan
    if not equals or not key or not 0 <= seconds <= MAX_TOLERATION_S:
        raise argparse.ArgumentTypeError(
            f"toleration seconds {text!r}: expected KEY=SECONDS with 0 to {MAX_TOLERATION_S:,} seconds "
            f"(corral.io/unreachable=30, =30s, =2m)"
        )
    return key, seconds


def whole_number(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least `minimum`."""

    def parse(text: str) -> int:
        try:
            number = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if number < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} must be {minimum} or more")
        return number

    return parse


positive_int = whole_number(1)
non_negative_int = whole_number(0)


def duration(*, zero: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number of seconds above 0 (or 0 too, with `zero`)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
            bound = "0 or more" if zero else "above 0"
            raise argparse.ArgumentTypeError(f"{text!r} must be a number of seconds {bound}")
        return value

    return parse


seconds = duration()


def port(text: str) -> int:
    """A TCP port number, 1 to 65535."""
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} must be a port between 1 and 65535")
    return number


def url(setting: str) -> Callable[[str], str]:
    """An argparse type: a URL (or comma-separated URLs) with a scheme `Settings.<setting>` takes."""

    def parse(text: str) -> str:
        rule = url_rule(text, URL_SCHEMES[setting])
        if rule:
            raise argparse.ArgumentTypeError(f"{text!r}: {rule}")
        return text

    return parse


def merge(flag: str, entries: list[tuple[str, Value]]) -> dict[str, Value]:
    """Repeated `KEY=...` entries as one mapping; a key given twice is an error naming the flag."""
    merged: dict[str, Value] = {}
    for key, value in entries:
        if key in merged:
            raise ValueError(f"{flag}: key {key!r} given twice ({merged[key]!r} and {value!r})")
        merged[key] = value
    return merged


def format_taint(value: Taint) -> str:
    """A taint as the CLI spells it: `key=value:Effect` (`key:Effect` without a value)."""
    return f"{value.key}={value.value}:{value.effect}" if value.value else f"{value.key}:{value.effect}"


def format_resources(values: dict[str, float]) -> str:
    """`CPU=8,GPU=1,memory=4Gi` (names sorted, CPU first; quantities as `format_amount` spells them)."""
    names = sorted(values, key=lambda name: (name != "CPU", name))
    return ",".join(f"{name}={format_amount(name, values[name])}" for name in names)


def selector_list(text: str) -> list[tuple[str, SelectorValue]]:
    """`-l zone=z1,tier=in(a,b),gpu!=true`: entries split on commas outside parentheses, each as `selector` takes
    it (kubectl's `key!=value` is read as `key=!value`)."""
    entries, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            entries.append(text[start:index])
            start = index + 1
    entries.append(text[start:])
    parsed = []
    for entry in (entry.strip() for entry in entries):
        if not entry:
            raise argparse.ArgumentTypeError(f"selector {text!r}: empty entry (expected KEY=CONDITION,...)")
        key, bang, value = entry.partition("!=")
        parsed.append(selector(f"{key}=!{value}" if bang and "=" not in key else entry))
    return parsed
