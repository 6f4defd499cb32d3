"""A `TypeTest` answers as `isinstance` does, for the schemas' Struct classes and their subclasses alike."""

from __future__ import annotations

import pytest

from schemas import ActorFailed, ActorPlaced, ActorRemoved, NodeLabelSchedulingStrategy
from services.core.type_tests import TypeTest


class LaterRemoval(ActorRemoved, frozen=True):
    """A subclass the test defines: isinstance counts it as its base."""


VALUES = [
    ActorRemoved(actor_id="a"),
    ActorFailed(actor_id="a", node_id="n", reason="exited", will_restart=False),
    ActorPlaced(actor_id="a", node_id="n"),
    LaterRemoval(actor_id="a"),
    NodeLabelSchedulingStrategy(hard={"zone": "z"}),
    None,
    "DEFAULT",
]


@pytest.mark.parametrize("classes", [(ActorRemoved,), (ActorRemoved, ActorFailed), (NodeLabelSchedulingStrategy,)])
def test_a_type_test_answers_as_isinstance_the_first_time_and_every_time_after(classes: tuple[type, ...]) -> None:
    test: TypeTest[object] = TypeTest(*classes)
    for value in VALUES * 2:
        assert test.holds(value) == isinstance(value, classes), value
    assert set(test.answers) == {type(value) for value in VALUES}
