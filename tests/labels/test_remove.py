"""`corral node remove`'s answer: a warning when the node's agent was heard from lately (it may register the node
again), none when the agent has been silent for a few heartbeats."""

from __future__ import annotations

from schemas import NodeDied
from schemas.commands import RegisterNode, RemoveNode
from services.labels.handlers import LabelsHandlers
from services.labels.view import LabelsView
from services.runtime.commands import Noted


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def registered(clock: Clock) -> LabelsHandlers:
    """The labels handlers (a 3 s heartbeat timeout) over a view holding n4, just registered."""
    view = LabelsView(clock)
    handlers = LabelsHandlers(view, (), heard_within=3.0)
    outcome = handlers.register(RegisterNode(node_id="n4", resources={"CPU": 4}))
    assert isinstance(outcome, list)
    for sequence, event in enumerate(outcome, start=1):
        view.fold(event, sequence)
    return handlers


def test_removing_a_node_heard_from_lately_warns_that_its_agent_may_bring_it_back() -> None:
    clock = Clock()
    handlers = registered(clock)
    clock.now += 0.5
    outcome = handlers.remove(RemoveNode(node_id="n4"))
    assert isinstance(outcome, Noted)
    assert outcome.events == [NodeDied(node_id="n4", removed=True)]
    assert outcome.message.startswith("node n4 removed, but its agent was heard from 0.5s ago: if it still runs")
    assert "corral cordon n4" in outcome.message and "corral drain n4" in outcome.message


def test_removing_a_node_silent_past_the_heartbeat_timeout_only_removes_it() -> None:
    clock = Clock()
    handlers = registered(clock)
    clock.now += 3.5
    assert handlers.remove(RemoveNode(node_id="n4")) == [NodeDied(node_id="n4", removed=True)]
