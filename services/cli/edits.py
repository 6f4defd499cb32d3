"""kubectl's label and taint edits as pure functions: `k=v` / `k-` on labels, `k=v:Effect` / `k:Effect-` / `k-` on
taints, read from the command line (the services apply them, each in one change)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import cast

from schemas import Taint, TaintEffect
from services.cli import args as types
from services.cli.common import UsageError
from services.core.errors import LabelError, NotFoundError
from services.core.labels import parse_labels, validate_label_key


@dataclass
class LabelEdit:
    """Labels to set and keys to remove."""

    set: dict[str, str] = field(default_factory=dict)
    remove: list[str] = field(default_factory=list)


def label_edit(words: list[str]) -> LabelEdit:
    """`k=v` sets, `k-` removes (user keys only; a key given twice is bad usage)."""
    edit = LabelEdit()
    for word in words:
        try:
            if word.endswith("-") and "=" not in word:
                key = word[:-1]
                validate_label_key(key)
                edit.remove.append(key)
                continue
            for key, value in parse_labels(word).items():
                if key in edit.set:
                    raise UsageError(f"label {key!r} given twice ({edit.set[key]!r} and {value!r})")
                edit.set[key] = value
        except LabelError as error:
            raise UsageError(str(error)) from None
    if both := set(edit.set) & set(edit.remove):
        raise UsageError(f"label {sorted(both)[0]!r} is both set and removed")
    return edit


@dataclass
class TaintEdit:
    """Taints to add, keys to remove, and (key, effect) pairs to remove."""

    add: list[Taint] = field(default_factory=list)
    remove_keys: list[str] = field(default_factory=list)
    remove_effects: list[tuple[str, TaintEffect]] = field(default_factory=list)


def taint_edit(words: list[str]) -> TaintEdit:
    """`k=v:Effect` (or `k:Effect`, `k=v`, `k`) adds; `k:Effect-` removes by key and effect; `k-` by key."""
    edit = TaintEdit()
    for word in words:
        if not word.endswith("-"):
            try:
                edit.add.append(types.taint(word))
            except argparse.ArgumentTypeError as error:
                raise UsageError(str(error)) from None
            continue
        body = word[:-1]
        key, colon, effect = body.partition(":")
        key = key.partition("=")[0]
        try:
            validate_label_key(key, allow_system=True)
        except LabelError as error:
            raise UsageError(f"taint {word!r}: {error}") from None
        if not colon:
            edit.remove_keys.append(key)
        elif effect not in types.TAINT_EFFECTS:
            raise UsageError(f"taint {word!r}: effect {effect!r} must be one of {', '.join(types.TAINT_EFFECTS)}")
        else:
            edit.remove_effects.append((key, cast(TaintEffect, effect)))
    return edit


def removals(current: list[Taint], edit: TaintEdit, node_id: str) -> tuple[list[str], dict[str, list[TaintEffect]]]:
    """The keys whose taints go (every effect), and per key the effects whose taint goes; a removal that matches
    no taint is `NotFoundError` naming it (before anything changes)."""
    for key in edit.remove_keys:
        if all(taint.key != key for taint in current):
            raise NotFoundError(f"taint {key!r} not found on node {node_id}")
    effects: dict[str, list[TaintEffect]] = {}
    for key, effect in edit.remove_effects:
        if all((taint.key, taint.effect) != (key, effect) for taint in current):
            raise NotFoundError(f"taint {key}:{effect} not found on node {node_id}")
        effects.setdefault(key, []).append(effect)
    return list(dict.fromkeys(edit.remove_keys)), effects
