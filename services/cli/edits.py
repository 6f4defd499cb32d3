"""kubectl's label and taint edits as pure functions: `k=v` / `k-` on labels, `k=v:Effect` / `k:Effect-` / `k-` on
taints, turned into the labels or taints a node ends with."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import cast

from schemas import Taint, TaintEffect
from services.cli import args as types
from services.cli.common import UsageError
from services.core.errors import LabelError
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


def labelled(current: dict[str, str], edit: LabelEdit, *, overwrite: bool, replace: bool) -> dict[str, str]:
    """The user labels after `edit`: changing a key needs `overwrite`; `replace` keeps only the ones set."""
    if replace:
        if edit.remove:
            raise UsageError(f"--replace sets every user label: drop {edit.remove[0]}-")
        return dict(edit.set)
    for key, value in edit.set.items():
        if key in current and current[key] != value and not overwrite:
            raise UsageError(
                f"label {key!r} already has a value ({current[key]!r}): use --overwrite to change it to {value!r}"
            )
    result = {key: value for key, value in current.items() if key not in edit.remove}
    return result | edit.set


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


def removals(current: list[Taint], edit: TaintEdit) -> tuple[list[str], dict[str, list[TaintEffect]]]:
    """The keys whose taints go (every effect), and per key the effects whose taint goes; a removal that matches
    no taint is an error naming it."""
    for key in edit.remove_keys:
        if all(taint.key != key for taint in current):
            raise UsageError(f"taint {key}- : the node has no taint with key {key!r}")
    effects: dict[str, list[TaintEffect]] = {}
    for key, effect in edit.remove_effects:
        if all((taint.key, taint.effect) != (key, effect) for taint in current):
            raise UsageError(f"taint {key}:{effect}- : the node has no taint {key!r} with effect {effect}")
        effects.setdefault(key, []).append(effect)
    return list(dict.fromkeys(edit.remove_keys)), effects
