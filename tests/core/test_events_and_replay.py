"""The event log: ordered schemas events with ids, that fold back into the same placements and survive msgpack."""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import pytest

from schemas import (
    ActorFailed,
    ActorPending,
    ActorPlaced,
    AnyEvent,
    Event,
    In,
    NodeAffinitySchedulingStrategy,
    NodeLabelSchedulingStrategy,
    PlacementGroupRequest,
    PlacementGroupSchedulingStrategy,
    Prefer,
    RunAfter,
    ScheduleRequest,
    Taint,
)
from services.core import Cluster, ClusterView, replay
from tests.core.builders import affinity, make_actor, make_cluster, node_of, on_node

SEED = 7


def folded_placements(view: ClusterView) -> dict[str, str]:
    return {a: s.node_id for a, s in view.actors.items() if s.status == "placed" and s.node_id is not None}


def busy_cluster() -> Cluster:
    """A cluster that went through every kind of command, with work placed, waiting, failed and removed."""
    cluster = make_cluster(5, cpu=4, seed=SEED)
    cluster.add_node("gpu", {"CPU": 8, "GPU": 2}, labels={"rack": "r1"}, taints=[Taint("gpu", "true")], zone="z9")
    cluster.submit(make_actor("web", labels={"app": "web"}, max_restarts=2))
    cluster.submit(make_actor("near", scheduling_strategy=affinity("app", "IN", ["web"]), max_restarts=1))
    cluster.submit(
        make_actor(
            "far", scheduling_strategy=affinity("app", "NOT_IN", ["web"], topology_key="corral.io/availability-zone")
        )
    )
    train: dict[str, float] = {"CPU": 2, "GPU": 1}
    cluster.submit(ScheduleRequest("train", train, tolerations={"gpu": In("true")}, label_selector={"rack": "r1"}))
    cluster.submit(make_actor("after", run_after=RunAfter("train", "Prefer", prefer=[Prefer("rack", 50)])))
    cluster.submit(make_actor("pinned", scheduling_strategy=NodeAffinitySchedulingStrategy("n3")))
    cluster.submit(make_actor("soft", scheduling_strategy=NodeLabelSchedulingStrategy(soft={"rack": "r1"})))
    cluster.submit(make_actor("huge", 64))
    cluster.create_placement_group(PlacementGroupRequest("pg", [{"CPU": 1}] * 3, "STRICT_SPREAD"))
    cluster.submit(make_actor("inside", scheduling_strategy=PlacementGroupSchedulingStrategy("pg", 1), max_restarts=1))
    cluster.fail_actor("web")
    cluster.remove_actor("pinned")
    cluster.set_labels("n4", {"rack": "r2"})
    cluster.add_taints("n2", [Taint("drain", "now", "NoExecute")])
    cluster.remove_taints("n2", ["drain"])
    cluster.remove_node(cluster.placements()["inside"])
    cluster.add_node("late", {"CPU": 64})
    cluster.submit(make_actor("lonely", scheduling_strategy=affinity("app", "IN", ["nobody"])))
    cluster.create_placement_group(PlacementGroupRequest("wide", [{"CPU": 1}] * 9, "STRICT_SPREAD"))
    return cluster


def test_events_are_schemas_events_with_increasing_unique_ids() -> None:
    events = busy_cluster().events()
    assert all(isinstance(event, Event) for event in events)
    ids = [int(event.event_id) for event in events]
    assert ids == list(range(1, len(events) + 1))
    assert {type(event).__name__ for event in events} >= {
        "NodeRegistered",
        "NodeDied",
        "NodeLabelsChanged",
        "TaintsChanged",
        "ActorSubmitted",
        "ActorPlaced",
        "ActorPending",
        "ActorFailed",
        "ActorRemoved",
        "PlacementGroupSubmitted",
        "PlacementGroupPlaced",
        "PlacementGroupBundlesLost",
    }


def test_every_event_names_its_cause_and_what_it_is_about() -> None:
    events = busy_cluster().events()
    seen: set[str] = set()
    for event in events:
        assert event.correlation_id, f"{event} has no correlation id"
        assert event.causation_id == "" or event.causation_id in seen, f"{event} is caused by an unknown event"
        seen.add(event.event_id)


def test_a_submit_that_unblocks_waiting_work_records_the_chain_of_causes() -> None:
    cluster = make_cluster(2, cpu=4)
    cluster.submit(make_actor("b", scheduling_strategy=affinity("app", "IN", ["web"])))
    start = len(cluster.events())
    cluster.submit(make_actor("a", labels={"app": "web"}))
    placed_a, placed_b = cluster.events()[start:]
    assert isinstance(placed_a, ActorPlaced) and placed_a.actor_id == "a"
    assert placed_a.request is not None and placed_a.request.actor_id == "a"  # submitted and placed: one event
    assert isinstance(placed_b, ActorPlaced) and placed_b.actor_id == "b" and placed_b.request is None
    assert placed_a.causation_id == ""
    assert placed_b.causation_id == placed_a.event_id
    assert {placed_a.correlation_id, placed_b.correlation_id} == {"a"}


def test_an_actor_placed_as_submitted_is_one_event_and_one_that_waits_is_two() -> None:
    cluster = make_cluster(1, cpu=2)
    cluster.submit(make_actor("now", cpu=2))
    cluster.submit(make_actor("later", cpu=2))
    names = [type(event).__name__ for event in cluster.events()[1:]]
    assert names == ["ActorPlaced", "ActorSubmitted", "ActorPending"]
    cluster.remove_actor("now")
    placed_later = cluster.events()[-1]
    assert isinstance(placed_later, ActorPlaced) and placed_later.actor_id == "later"
    assert placed_later.request is None  # its submission is already in the log
    assert Cluster.from_events(cluster.events()).view.actors["later"].node_id == placed_later.node_id


def test_a_node_death_records_the_failures_it_caused() -> None:
    cluster = make_cluster(2, cpu=4)
    home = node_of(cluster.submit(make_actor("a", max_restarts=1, label_selector=on_node("n0"))))
    start = len(cluster.events())
    cluster.remove_node(home)
    later = cluster.events()[start:]
    failed = [event for event in later if isinstance(event, ActorFailed)]
    assert [(event.actor_id, event.node_id, event.will_restart) for event in failed] == [("a", "n0", True)]
    pending = [event for event in later if isinstance(event, ActorPending)]
    assert [event.actor_id for event in pending] == ["a"], "its selector now matches no node, so it waits"
    assert all(event.correlation_id == "n0" for event in later)
    assert all(event.causation_id == later[0].event_id for event in later[1:])


def scenario_small() -> Cluster:
    cluster = make_cluster(3, cpu=4, seed=SEED)
    for index in range(7):
        cluster.submit(make_actor(f"a{index}", 2))
    return cluster


@pytest.mark.parametrize(
    "build",
    [busy_cluster, scenario_small, lambda: make_cluster(3)],
    ids=[
        "folding the log of a busy cluster gives its placements",
        "folding the log of a cluster with waiting work gives its placements",
        "folding the log of a cluster with nodes only gives no placements",
    ],
)
def test_folding_the_events_into_a_fresh_view_gives_the_same_placements(build: Callable[[], Cluster]) -> None:
    cluster = build()
    view = replay(cluster.events(), SEED)
    assert folded_placements(view) == cluster.placements()
    assert set(view.nodes) == set(cluster.view.nodes)
    assert {n: node.free for n, node in view.nodes.items()} == {n: node.free for n, node in cluster.view.nodes.items()}
    assert set(view.pending) == {p.id for p in cluster.pending()}


def test_a_cluster_rebuilt_from_its_events_keeps_working() -> None:
    original = busy_cluster()
    rebuilt = Cluster.from_events(original.events(), SEED)
    assert rebuilt.placements() == original.placements()
    assert [p.id for p in rebuilt.pending()] == [p.id for p in original.pending()]
    assert (
        node_of(rebuilt.submit(make_actor("newcomer", scheduling_strategy=affinity("app", "IN", ["web"]))))
        == (rebuilt.placements()["web"])
    )
    rebuilt.remove_actor("huge")
    rebuilt.add_node("extra", {"CPU": 4})
    assert folded_placements(replay(rebuilt.events(), SEED)) == rebuilt.placements()
    assert [int(event.event_id) for event in rebuilt.events()] == list(range(1, len(rebuilt.events()) + 1))


def test_a_cluster_rebuilt_from_its_events_places_work_that_was_waiting() -> None:
    original = scenario_small()
    waiting_ids = {p.id for p in original.pending()}
    assert waiting_ids
    rebuilt = Cluster.from_events(original.events(), SEED)
    rebuilt.add_node("extra", {"CPU": 16})
    assert waiting_ids <= set(rebuilt.placements())


def test_every_event_survives_a_msgpack_round_trip() -> None:
    events = busy_cluster().events()
    encoder = msgspec.msgpack.Encoder()
    decoder = msgspec.msgpack.Decoder(AnyEvent)
    for event in events:
        assert decoder.decode(encoder.encode(event)) == event
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(events), type=list[AnyEvent]) == events
