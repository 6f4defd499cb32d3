"""The autoscaler's launches in the view: requested, registered by label, failed, drained, terminated, and the
same after a snapshot round trip."""

from __future__ import annotations

from schemas import (
    AnyEvent,
    AutoscalerElected,
    NodeDied,
    NodeDrainCancelled,
    NodeDrainStarted,
    NodeLaunchFailed,
    NodeRegistered,
    NodesLaunchRequested,
    NodeTerminationRequested,
)
from services.core.labels import LAUNCH_ID, NODE_TYPE
from services.core.state import replay
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
