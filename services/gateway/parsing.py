"""Request pieces read once: proposal 002's taint bodies and the `?selector=` / `?labels=` query strings."""

from __future__ import annotations

from typing import get_args

from schemas import SelectorValue, Taint, TaintEffect
from services.core.errors import rule_error
from services.core.selectors import parse_condition

EFFECTS: tuple[str, ...] = get_args(TaintEffect)


def taints_of(body: dict[str, str]) -> list[Taint]:
    """`{"key": "value"}` or `{"key": "value:Effect"}` as taints (the effect defaults to NoSchedule)."""
    if not body:
        raise rule_error("body", body, 'must name at least one taint, like {"gpu_node": "true"}')
    taints = []
    for key, text in body.items():
        value, colon, effect = text.rpartition(":")
        if not colon:
            value, effect = text, "NoSchedule"
        if effect not in EFFECTS:
            raise rule_error(
                f"taint {key!r}", text, f"must be VALUE or VALUE:EFFECT, EFFECT one of {', '.join(EFFECTS)}"
            )
        taints.append(Taint(key, value, effect))  # type: ignore[arg-type]  # checked against EFFECTS above
    return taints


def removals_of(body: dict[str, str]) -> dict[str, TaintEffect | None]:
    """A DELETE body (checked like an append's): each key -> the one effect to delete when its value names one
    (`"value:Effect"` or `":Effect"`), or None to delete the key's taints of every effect (`"value"`)."""
    taints = taints_of(body)
    return {taint.key: taint.effect if ":" in body[taint.key] else None for taint in taints}


def selector_of(text: str) -> dict[str, SelectorValue]:
    """`zone=z1,gpu=exists(),tier=in(a,b)`: entries split on the commas outside parentheses, each checked."""
    selector: dict[str, SelectorValue] = {}
    for entry in _top_level_split(text):
        key, equals, condition = (part.strip() for part in entry.partition("="))
        if not equals:
            raise rule_error("selector", entry, "each entry is KEY=CONDITION (zone=z1, zone=!z1, zone=in(z1,z2))")
        if key in selector:
            raise rule_error("selector", text, f"key {key!r} is given twice")
        parse_condition(key, condition)
        selector[key] = condition
    return selector


def _top_level_split(text: str) -> list[str]:
    entries, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            entries.append(text[start:index])
            start = index + 1
    entries.append(text[start:])
    return [entry for entry in entries if entry.strip()]
