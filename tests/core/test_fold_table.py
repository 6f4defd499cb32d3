"""The fold table covers the log: every event type has exactly one fold, and nothing else has one."""

from __future__ import annotations

from typing import get_args

import pytest

from schemas import AnyEvent, NodeDied
from services.core.state.folds import FOLDS, fold_of


def test_every_event_type_of_the_log_has_exactly_one_fold() -> None:
    event_types = get_args(AnyEvent)
    assert len(set(event_types)) == len(event_types)
    missing = sorted(t.__name__ for t in set(event_types) - set(FOLDS))
    unknown = sorted(t.__name__ for t in set(FOLDS) - set(event_types))
    assert not missing, f"event types without a fold: {missing}"
    assert not unknown, f"folds for types that are not events of the log: {unknown}"


def test_a_second_fold_for_an_event_type_is_refused_and_the_first_stays() -> None:
    first = FOLDS[NodeDied]

    def another(view: object, event: object) -> None:
        del view, event

    with pytest.raises(TypeError, match="NodeDied has two folds"):
        fold_of(NodeDied)(another)
    assert FOLDS[NodeDied] is first
