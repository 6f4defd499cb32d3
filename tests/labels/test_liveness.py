"""The labels service's liveness loop: a long start-up replay is no silence of the nodes it folded."""

from __future__ import annotations

import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from schemas import NodeRegistered
from services.labels.liveness import Liveness
from services.labels.view import LabelsView

pytestmark = pytest.mark.anyio

RUN_FOR = 1.2
"""Seconds of real time the loop runs in a test."""


class Clock:
    """The monotonic clock, plus the seconds a test skips ahead."""

    def __init__(self) -> None:
        self.skipped = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.skipped


class Desk:
    """Records what the loop would append (it appends nothing)."""

    def __init__(self) -> None:
        self.judged: list[Any] = []

    async def execute(self, append: Callable[[], Any]) -> None:
        self.judged.append(append())


def view_with_one_node(clock: Clock) -> LabelsView:
    view = LabelsView(clock)
    view.fold(NodeRegistered(node_id="n1", resources={"CPU": 1}, labels={}), 1)
    return view


async def judged(view: LabelsView, timeout: float) -> list[str]:
    """The kinds of event the liveness loop would append in `RUN_FOR` seconds (heartbeat timeout = grace)."""
    desk = Desk()
    shell = SimpleNamespace(bus=SimpleNamespace(connection_listeners=[]))
    liveness = Liveness(shell, desk, view, timeout=timeout, grace=timeout)  # type: ignore[arg-type]
    with anyio.move_on_after(RUN_FOR):
        await liveness.run()
    return [type(event).__name__ for outcome in desk.judged if isinstance(outcome, list) for event in outcome]


async def test_nodes_folded_by_a_replay_longer_than_the_timeout_are_not_unreachable_when_it_ends() -> None:
    clock = Clock()
    view = view_with_one_node(clock)
    clock.skipped = 60  # the rest of the replay took a minute: no heartbeat could be heard meanwhile
    assert await judged(view, timeout=2 * RUN_FOR) == []


async def test_a_node_silent_past_the_timeout_while_the_loop_runs_is_judged_unreachable() -> None:
    view = view_with_one_node(Clock())
    assert (await judged(view, timeout=RUN_FOR / 3))[:1] == ["NodeUnreachable"]
