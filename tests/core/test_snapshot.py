"""Snapshots: a view dumped and restored, or rebuilt from any order of a racing log, has the same digest."""

from __future__ import annotations

import msgspec
import pytest

from schemas import (
    ActorPlaced,
    AnyEvent,
    NodeAffinitySchedulingStrategy,
    NodeDied,
    NodeRegistered,
    PlacementGroupRequest,
    SchedulerElected,
    ScheduleRequest,
)
from services.core import Cluster
from services.core.state import replay
from services.core.state.snapshot import decode, digest, dump, encode, restore
from tests.core.builders import affinity, make_actor, make_cluster


def busy_cluster() -> Cluster:
    """A cluster with labels, taints, affinity, a placement group, a dead node and pending work."""
    cluster = make_cluster(4, 4, zones=2)
    cluster.add_taints("n1", {"gpu": "true"})
    cluster.submit(make_actor("web", 1, labels={"app": "web"}))
    cluster.submit(make_actor("cache", 1, scheduling_strategy=affinity("app", "IN", ["web"])))
    cluster.submit(make_actor("big", 64))
    cluster.create_placement_group(PlacementGroupRequest("pg", [{"CPU": 1}, {"CPU": 1}], strategy="SPREAD"))
    cluster.remove_node("n2")
    return cluster


def test_a_restored_view_has_the_digest_of_the_view_it_was_dumped_from() -> None:
    """dump, encode, decode, restore: the same digest, and the same decisions afterwards."""
    cluster = busy_cluster()
    restored = restore(decode(encode(dump(cluster.view, sequence=42))))
    assert digest(restored) == digest(cluster.view)
    again = Cluster.from_view(restored)
    for target in (cluster, again):
        target.submit(make_actor("late", 1, labels={"app": "web"}))
    assert digest(again.view) == digest(cluster.view)


def test_a_snapshot_plus_the_log_tail_equals_the_whole_log() -> None:
    """Restore the first half from a snapshot, fold the rest: the digest of a full replay."""
    events = busy_cluster().events()
    half = len(events) // 2
    resumed = restore(decode(encode(dump(replay(events[:half])))))
    for event in events[half:]:
        resumed.fold(event)
    assert digest(resumed) == digest(replay(events))


def test_different_views_have_different_digests() -> None:
    """One more placed actor changes the digest."""
    cluster = busy_cluster()
    before = digest(cluster.view)
    cluster.submit(make_actor("one-more", 1))
    assert digest(cluster.view) != before


def test_a_corrupt_blob_does_not_decode() -> None:
    """Garbage raises msgspec's error, which services turn into a full replay."""
    with pytest.raises(msgspec.DecodeError):
        decode(b"\x00not a snapshot")


def test_a_placement_landing_after_its_node_died_folds_and_is_then_failed() -> None:
    """The log may hold NodeDied before the scheduler's ActorPlaced on that node; the fold still balances."""
    cluster = Cluster()
    cluster.add_node("n1", {"CPU": 2})
    cluster.add_node("n2", {"CPU": 2})
    on_n1 = NodeAffinitySchedulingStrategy("n1")
    cluster.submit(ScheduleRequest("a", {"CPU": 1}, scheduling_strategy=on_n1, max_restarts=1))
    live_events = cluster.events()
    placed = [e for e in live_events if isinstance(e, ActorPlaced)]
    assert placed and placed[0].node_id == "n1"
    racing: list[AnyEvent] = [e for e in live_events if not isinstance(e, ActorPlaced)]
    racing += [NodeDied(node_id="n1"), placed[0]]
    follower = Cluster.from_view(replay(racing))
    follower.reconcile()
    assert follower.view.actors["a"].status == "pending"
    assert follower.view.dead["n1"].free == {"CPU": 2.0}


def test_scheduler_events_of_an_older_epoch_are_ignored_after_an_election() -> None:
    """A deposed leader's late placement changes nothing once the next epoch is elected."""
    cluster = Cluster()
    cluster.add_node("n1", {"CPU": 1})
    cluster.submit(ScheduleRequest("a", {"CPU": 2}))  # waits: ActorSubmitted, ActorPending
    cluster.add_node("n2", {"CPU": 2})  # NodeRegistered, then a's ActorPlaced
    cluster.submit(ScheduleRequest("b", {"CPU": 1}))  # placed as submitted: one ActorPlaced
    events = cluster.events()
    assert [type(e).__name__ for e in events[-2:]] == ["ActorPlaced", "ActorPlaced"]
    view = replay([*events[:4], SchedulerElected(epoch=2, instance="b"), *events[4:]])
    assert view.actors["a"].status == "pending"
    assert "b" not in view.actors
    assert view.nodes["n1"].free == {"CPU": 1.0} and view.nodes["n2"].free == {"CPU": 2.0}


def test_a_node_registering_again_after_death_starts_empty() -> None:
    """A dead node's id can come back; it comes back with all of its resources free."""
    cluster = Cluster()
    cluster.add_node("n1", {"CPU": 1})
    cluster.submit(ScheduleRequest("a", {"CPU": 1}, max_restarts=1))
    back = NodeRegistered(node_id="n1", resources={"CPU": 1.0}, labels={})
    view = replay([*cluster.events(), NodeDied(node_id="n1"), back])
    assert view.nodes["n1"].free == {"CPU": 1.0}
    assert view.nodes["n1"].actors == set()
