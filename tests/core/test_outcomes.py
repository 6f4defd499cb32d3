"""A command run through `Cluster.decided` returns its decision with exactly the events it wrote; `fold` and
`reconcile` return what they reacted with; a command that fails midway still hands over what it wrote."""

from __future__ import annotations

import pytest

from schemas import (
    ActorFailed,
    ActorPending,
    ActorPlaced,
    ActorRemoved,
    ActorSubmitted,
    AnyEvent,
    NodeDied,
    Pending,
    Placed,
)
from services.core.cluster import Cluster
from services.core.errors import NotFoundError
from services.core.recording import CommandFailedError
from services.core.state import replay
from services.core.state.snapshot import digest
from tests.core.builders import make_actor


def _service_cluster() -> tuple[Cluster, list[AnyEvent]]:
    """A cluster as a service keeps one (no history), with one 2-CPU node, and the log it wrote so far."""
    cluster = Cluster(seed=1, keep_history=False)
    log = cluster.decided(lambda: cluster.add_node("n1", {"CPU": 2})).events
    return cluster, log


def test_a_submit_returns_its_placement_with_the_one_event_that_records_it() -> None:
    cluster, _log = _service_cluster()
    outcome = cluster.decided(lambda: cluster.submit(make_actor("a", 1)))
    assert isinstance(outcome.result, Placed) and outcome.result.node_id == "n1"
    (placed,) = outcome.events
    assert isinstance(placed, ActorPlaced) and placed.request == make_actor("a", 1)


def test_a_removal_returns_its_own_event_and_the_placement_of_the_work_it_made_room_for() -> None:
    cluster, log = _service_cluster()
    log += cluster.decided(lambda: cluster.submit(make_actor("big", 2))).events
    waiting = cluster.decided(lambda: cluster.submit(make_actor("next", 2)))
    assert isinstance(waiting.result, Pending)
    assert [type(event) for event in waiting.events] == [ActorSubmitted, ActorPending]
    log += waiting.events
    removal = cluster.decided(lambda: cluster.remove_actor("big"))
    assert [type(event) for event in removal.events] == [ActorRemoved, ActorPlaced]
    log += removal.events
    assert digest(replay(log, 1)) == digest(cluster.view), "the outcomes' events are the whole log"


def test_events_are_handed_over_once() -> None:
    cluster, _log = _service_cluster()
    cluster.decided(lambda: cluster.submit(make_actor("a", 1)))
    assert cluster.decided(lambda: cluster.decision("a")).events == []


def test_a_refusal_writes_nothing_and_raises_its_own_error() -> None:
    cluster, _log = _service_cluster()
    with pytest.raises(NotFoundError, match="no such live actor"):
        cluster.decided(lambda: cluster.remove_actor("ghost"))
    assert cluster.decided(lambda: None).events == []


def test_a_command_failing_after_it_wrote_hands_over_what_it_wrote() -> None:
    """The view folded those events: the log must get them, or a replay would differ from the view."""
    cluster, log = _service_cluster()

    def placed_then_broken() -> None:
        cluster.submit(make_actor("a", 1))
        raise ValueError("a bug after the placement")

    with pytest.raises(CommandFailedError) as failed:
        cluster.decided(placed_then_broken)
    assert isinstance(failed.value.__cause__, ValueError)
    assert [type(event) for event in failed.value.events] == [ActorPlaced]
    assert digest(replay(log + failed.value.events, 1)) == digest(cluster.view)


def test_a_fold_returns_what_the_cluster_reacted_with_and_a_follower_catches_up_on_it_in_reconcile() -> None:
    cluster, log = _service_cluster()
    log += cluster.decided(lambda: cluster.submit(make_actor("a", 1, max_restarts=0))).events
    died = NodeDied(node_id="n1", event_id="labels-1")
    follower = Cluster.from_view(replay(log, 1), keep_history=False)
    assert follower.fold(died, react=False) == []
    reactions = cluster.fold(died)
    assert [(type(event), event.actor_id) for event in reactions if isinstance(event, ActorFailed)] == [
        (ActorFailed, "a")
    ]
    caught_up = follower.reconcile()
    assert [type(event) for event in caught_up] == [type(event) for event in reactions]
