"""The autoscaler's launches in the view: requested, registered by label, failed, drained, terminated, since when
each launched node has held no work (the log's times), and the same after a snapshot round trip."""

from __future__ import annotations

import pytest

from schemas import (
    ActorPlaced,
    ActorRemoved,
    AnyEvent,
    AutoscalerElected,
    NodeDied,
    NodeDrainCancelled,
    NodeDrainStarted,
    NodeLaunchFailed,
    NodeRegistered,
    NodesLaunchRequested,
    NodeTerminationRequested,
    PlacementGroupPlaced,
    PlacementGroupRemoved,
    PlacementGroupRequest,
    PlacementGroupSubmitted,
    ScheduleRequest,
    VirtualCluster,
    VirtualClusterRequested,
    VirtualNodeResized,
)
from services.core.labels import LAUNCH_ID, NODE_TYPE
from services.core.state import ClusterView, replay
from services.core.state.launch_folds import LAUNCHES_KEPT
from services.core.state.snapshot import digest, dump, restore


def launched(node_id: str, launch_id: str) -> NodeRegistered:
    labels = {NODE_TYPE: "cpu-4", LAUNCH_ID: launch_id}
    return NodeRegistered(node_id=node_id, resources={"CPU": 4}, labels=labels)


LOG: list[AnyEvent] = [
    AutoscalerElected(instance="a", epoch=3),
    NodesLaunchRequested(node_type="cpu-4", launch_ids=["L1", "L2", "L3"], reason="3 pending", work=["a1"]),
    launched("n1", "L1"),
    NodeLaunchFailed(launch_id="L2", reason="not registered within 5s", failed_at=9.0),
    launched("n3", "L3"),
    NodeDrainStarted(node_id="n1", launch_id="L1", reason="idle 60s", at=70.0),
    NodeDrainCancelled(node_id="n1", launch_id="L1", reason="work landed", at=71.0),
    NodeDrainStarted(node_id="n3", launch_id="L3", reason="idle 60s", at=72.0),
    NodeTerminationRequested(node_id="n3", launch_id="L3", reason="idle 60s", requested_at=73.0),
    NodeDied(node_id="n3"),
]


def test_a_launch_moves_through_its_states_as_the_log_says() -> None:
    view = replay(LOG)
    states = {launch_id: (launch.state, launch.node_id) for launch_id, launch in view.launches.items()}
    assert states == {"L1": ("registered", "n1"), "L2": ("failed", ""), "L3": ("terminated", "n3")}
    assert (view.launched_nodes, view.launch_count, view.autoscaler_epoch) == ({"n1": "L1"}, 3, 3)


def test_a_node_that_registers_after_its_launch_failed_is_still_the_autoscalers() -> None:
    view = replay([*LOG, launched("n2", "L2")])
    assert (view.launches["L2"].state, view.launched_nodes["n2"]) == ("registered", "L2")


def test_a_node_with_an_unknown_launch_id_is_no_launch() -> None:
    view = replay([*LOG, launched("forged", "L99")])
    assert "forged" not in view.launched_nodes and "L99" not in view.launches


def test_launches_survive_a_snapshot_with_the_same_digest() -> None:
    view = replay(LOG)
    again = restore(dump(view))
    assert digest(again) == digest(view)
    assert {k: v.state for k, v in again.launches.items()} == {k: v.state for k, v in view.launches.items()}
    assert (again.launched_nodes, list(again.ended_launches)) == (view.launched_nodes, list(view.ended_launches))


def test_only_the_newest_ended_launches_are_kept() -> None:
    ids = [f"L{i}" for i in range(LAUNCHES_KEPT + 5)]
    log: list[AnyEvent] = [NodesLaunchRequested(node_type="cpu-4", launch_ids=ids, reason="many")]
    log += [NodeLaunchFailed(launch_id=launch_id, reason="timeout") for launch_id in ids]
    view = replay(log)
    assert len(view.launches) == LAUNCHES_KEPT and "L0" not in view.launches and view.launch_count == len(ids)


TIMED_LOG: list[tuple[float, AnyEvent]] = [
    (10.0, NodesLaunchRequested(node_type="cpu-4", launch_ids=["L1", "L2"], reason="2 pending")),
    (20.0, launched("n1", "L1")),
    (21.0, launched("n2", "L2")),
    (30.0, ActorPlaced(actor_id="a", node_id="n1", request=ScheduleRequest("a", {"CPU": 1}))),
    (31.0, ActorPlaced(actor_id="b", node_id="n1", request=ScheduleRequest("b", {"CPU": 1}))),
    (40.0, ActorRemoved(actor_id="a")),
    (50.0, ActorRemoved(actor_id="b")),
    (60.0, PlacementGroupSubmitted(request=PlacementGroupRequest("pg", [{"CPU": 1}]))),
    (61.0, PlacementGroupPlaced(pg_id="pg", bundle_nodes=["n2"])),
    (70.0, PlacementGroupRemoved(pg_id="pg")),
    (80.0, VirtualClusterRequested(vc_id="vc", spec=VirtualCluster(flexible_resource_max={"CPU": 4}))),
    (81.0, VirtualNodeResized(vc_id="vc", vnode_id="vn", parent_node="n2", resources={"CPU": 2})),
    (90.0, VirtualNodeResized(vc_id="vc", vnode_id="vn", parent_node="n2", resources={})),
]
"""n1 holds two actors from 30 to 50; n2 holds a bundle from 61 to 70 and a virtual node from 81 to 90."""


def timed_replay(log: list[tuple[float, AnyEvent]]) -> ClusterView:
    view = ClusterView()
    for at, event in log:
        view.fold(event, at)
    return view


@pytest.mark.parametrize(
    ("folded", "expected"),
    [
        (3, {"L1": 20.0, "L2": 21.0}),
        (4, {"L1": None, "L2": 21.0}),
        (6, {"L1": None, "L2": 21.0}),
        (7, {"L1": 50.0, "L2": 21.0}),
        (9, {"L1": 50.0, "L2": None}),
        (10, {"L1": 50.0, "L2": 70.0}),
        (12, {"L1": 50.0, "L2": None}),
        (13, {"L1": 50.0, "L2": 90.0}),
    ],
    ids=[
        "idle from its registration",
        "an actor placed ends the idle time",
        "one actor of two removed: still busy",
        "the last actor removed: idle from that event's time",
        "a bundle reserved: busy",
        "the group removed: idle from then",
        "a virtual node carved from it: busy",
        "the virtual node gone: idle from then",
    ],
)
def test_a_launched_nodes_idle_time_is_the_log_time_of_the_event_that_left_it_empty(
    folded: int, expected: dict[str, float | None]
) -> None:
    view = timed_replay(TIMED_LOG[:folded])
    assert {launch_id: launch.idle_since for launch_id, launch in view.launches.items()} == expected


def test_idle_times_survive_a_snapshot_and_a_replay_gives_the_same_view() -> None:
    view = timed_replay(TIMED_LOG)
    again = restore(dump(view))
    assert {k: v.idle_since for k, v in again.launches.items()} == {"L1": 50.0, "L2": 90.0}
    assert digest(again) == digest(view) == digest(timed_replay(TIMED_LOG))
    assert digest(timed_replay(TIMED_LOG[:7])) != digest(timed_replay([*TIMED_LOG[:6], (51.0, TIMED_LOG[6][1])]))
