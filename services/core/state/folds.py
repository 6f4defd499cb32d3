"""The one fold table: each event type of the log -> the function folding it into a root view (pure).

Each fold module registers its folds with `@fold_of(EventType)`, and the checks run before them (see `checks`) go
into `CHECKS`; `ClusterView.fold` dispatches through both. A test checks that every event type has its fold.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar

Fold = Callable[[Any, Any], None]
"""(root view, event) -> None: change the view by one event (the check has passed)."""
Check = Callable[[Any, Any], object]
"""(root view, event) -> anything: raise `UnfoldableEventError` when folding the event would fail half-way."""

FOLDS: Final[dict[type, Fold]] = {}
"""Event type -> its fold (exactly one each)."""
CHECKS: Final[dict[type, Check]] = {}
"""Event type -> what must hold before its fold (types whose fold cannot fail have none)."""

F = TypeVar("F", bound=Fold)


def fold_of(event_type: type) -> Callable[[F], F]:
    """Register the decorated function as the fold of `event_type` (a second fold for one type is a bug)."""

    def register(fold: F) -> F:
        if event_type in FOLDS:
            raise TypeError(f"{event_type.__name__} has two folds: {FOLDS[event_type].__name__} and {fold.__name__}")
        FOLDS[event_type] = fold
        return fold

    return register
