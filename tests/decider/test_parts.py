"""How a decision worker cuts a fetch into parts: a few thousand requests at most, a message's never split."""

from __future__ import annotations

from typing import cast

from nats.aio.msg import Msg

from schemas.commands import RemoveActor
from services.decider.app import Answers, Item, by_messages


def alone(name: str) -> Item:
    """A request that is its message alone."""
    return Item(cast(Msg, object()), RemoveActor(actor_id=name))


def batch(name: str, count: int) -> list[Item]:
    """The requests of one batch message of `count`."""
    msg = cast(Msg, object())
    answers = Answers(msg, count)
    return [Item(msg, RemoveActor(actor_id=f"{name}{place}"), place, 0, answers) for place in range(1, count + 1)]


def test_parts_hold_at_most_so_many_requests_and_never_split_a_message() -> None:
    waiting = [*batch("a", 3), alone("b"), *batch("c", 3), alone("d"), *batch("e", 5), alone("f")]
    parts = by_messages(waiting, 4)
    assert [[item.request.actor_id for item in part] for part in parts] == [  # type: ignore[union-attr]
        ["a1", "a2", "a3", "b"],
        ["c1", "c2", "c3", "d"],
        ["e1", "e2", "e3", "e4", "e5"],
        ["f"],
    ]
    assert [item for part in parts for item in part] == waiting
    assert by_messages([], 4) == []
    assert len(by_messages([alone(str(index)) for index in range(10)], 4)) == 3
