"""The autoscaler's rounds, on a folded view and a given clock: launch timeouts, launch ids, and the scale-down
rules (never below min_workers, never a node with work, never a node it did not launch, idle counted from the
log's times)."""

from __future__ import annotations

import pytest

from schemas import (
    ActorPending,
    ActorPlaced,
    ActorRemoved,
    ActorSubmitted,
    AnyEvent,
    Explanation,
    NodeDrainCancelled,
    NodeDrainStarted,
    NodeLaunchFailed,
    NodeRegistered,
    NodesLaunchRequested,
    NodeTerminationRequested,
    PlacementGroupPending,
    PlacementGroupRequest,
    PlacementGroupSubmitted,
    ScheduleRequest,
    Taint,
    TaintsChanged,
)
from services.autoscaler.handlers import Decider
from services.core.autoscale import parse_config
from services.core.labels import LAUNCH_ID, NODE_TYPE, SCALE_DOWN_TAINT
from services.core.state import ClusterView

CONFIG = """
idle_timeout_s: 10
launch_timeout_s: 30
node_types:
  cpu-4:
    resources: {{CPU: 4}}
    min_workers: {minimum}
    max_workers: 5
"""


def decider(minimum: int = 0) -> Decider:
    """A decider for one type, cpu-4 (idle timeout 10 s, launch timeout 30 s)."""
    return Decider(parse_config(CONFIG.format(minimum=minimum)), (), interval=1.0)


def launched(node_id: str, launch_id: str) -> NodeRegistered:
    return NodeRegistered(node_id=node_id, resources={"CPU": 4}, labels={NODE_TYPE: "cpu-4", LAUNCH_ID: launch_id})


def fleet_log(*launch_ids: str) -> list[AnyEvent]:
    log: list[AnyEvent] = [
        NodesLaunchRequested(node_type="cpu-4", launch_ids=list(launch_ids), reason="test", requested_at=100.0)
    ]
    return log + [launched(f"n-{launch_id}", launch_id) for launch_id in launch_ids]


def kinds(events: list[AnyEvent]) -> list[tuple[str, str]]:
    return [
        (type(event).__name__, getattr(event, "node_id", "") or getattr(event, "launch_id", "")) for event in events
    ]


def replay(events: list[AnyEvent], at: float = 100.0) -> ClusterView:
    """A view of `events`, each stored in the log at time `at`."""
    view = ClusterView()
    for event in events:
        view.fold(event, at)
    return view


def test_a_launch_not_registered_within_the_timeout_fails() -> None:
    view = replay([NodesLaunchRequested(node_type="cpu-4", launch_ids=["L1"], reason="x", requested_at=100.0)])
    assert decider().decide(view, 120.0, {}).events == []
    events = decider().decide(view, 131.0, {}).events
    assert kinds(events) == [("NodeLaunchFailed", "L1")]
    assert isinstance(events[0], NodeLaunchFailed) and "launch_timeout_s (30s)" in events[0].reason


def test_a_provider_failure_fails_the_launch_at_once_with_its_reason() -> None:
    view = replay([NodesLaunchRequested(node_type="cpu-4", launch_ids=["L1"], reason="x", requested_at=100.0)])
    (failed,) = decider().decide(view, 101.0, {"L1": "the launch command exited with code 3"}).events
    assert isinstance(failed, NodeLaunchFailed) and failed.reason == "the launch command exited with code 3"


def test_launch_ids_go_on_from_the_logs_count() -> None:
    view = replay(
        [*fleet_log("L1", "L2"), ActorPlaced(actor_id="a", node_id="n-L1", request=ScheduleRequest("a", {"CPU": 1}))]
    )
    view.fold(NodesLaunchRequested(node_type="cpu-4", launch_ids=["L3"], reason="x", requested_at=100.0))
    view.fold(NodeLaunchFailed(launch_id="L3", reason="x", failed_at=100.0))
    pending = ScheduleRequest("big", {"CPU": 4})
    view.fold(ActorSubmitted(request=pending))
    view.fold(ActorPending(actor_id="big", explanation=Explanation(0, "waits")))
    view.fold(ActorPlaced(actor_id="b", node_id="n-L2", request=ScheduleRequest("b", {"CPU": 1})))
    (requested,) = decider().decide(view, 200.0, {}).events
    assert isinstance(requested, NodesLaunchRequested) and requested.launch_ids == ["L4"]


def test_a_strict_spread_group_whose_first_nodes_registered_while_the_last_launches_gets_no_second_launch() -> None:
    group = PlacementGroupRequest("pg", [{"CPU": 2}] * 3, "STRICT_SPREAD")
    log: list[AnyEvent] = [
        PlacementGroupSubmitted(request=group),
        PlacementGroupPending(pg_id="pg", explanation=Explanation(0, "waits")),
        NodesLaunchRequested(
            node_type="cpu-4",
            launch_ids=["L1", "L2", "L3"],
            reason="x",
            work=["pg"],
            requested_at=100.0,
            nominated={launch_id: {"pg": {"CPU": 2.0}} for launch_id in ("L1", "L2", "L3")},
        ),
        launched("n-L1", "L1"),
        launched("n-L2", "L2"),
    ]
    round_ = decider().decide(replay(log), 105.0, {})
    assert round_.events == []
    assert round_.plan is not None and round_.plan.about("pg") == "autoscaler: waiting for launch L3 to register"


@pytest.mark.parametrize(
    ("minimum", "expected"),
    [(0, [("NodeDrainStarted", "n-L1"), ("NodeDrainStarted", "n-L2")]), (1, [("NodeDrainStarted", "n-L1")])],
    ids=["idle nodes are drained", "never below min_workers"],
)
def test_idle_launched_nodes_are_drained_down_to_min_workers(minimum: int, expected: list[tuple[str, str]]) -> None:
    view = replay(fleet_log("L1", "L2"))
    assert decider(minimum).decide(view, 109.0, {}).events == []
    assert kinds(decider(minimum).decide(view, 111.0, {}).events) == expected


def test_a_node_with_work_or_not_launched_by_the_autoscaler_is_never_drained() -> None:
    log = [
        *fleet_log("L1"),
        ActorPlaced(actor_id="a", node_id="n-L1", request=ScheduleRequest("a", {"CPU": 1})),
        NodeRegistered(node_id="theirs", resources={"CPU": 4}, labels={NODE_TYPE: "cpu-4", LAUNCH_ID: "L9"}),
    ]
    assert decider().decide(replay(log), 300.0, {}).events == []


def test_a_drained_node_is_terminated_only_once_its_taint_is_in_the_log() -> None:
    log = [*fleet_log("L1"), NodeDrainStarted(node_id="n-L1", launch_id="L1", reason="idle", at=200.0)]
    view = replay(log)
    assert decider().decide(view, 205.0, {}).events == []
    view.fold(TaintsChanged(node_id="n-L1", taints=[Taint(SCALE_DOWN_TAINT, "true")]))
    (terminated,) = decider().decide(view, 205.0, {}).events
    assert isinstance(terminated, NodeTerminationRequested) and terminated.node_id == "n-L1"


def test_work_on_a_draining_node_cancels_the_drain() -> None:
    log = [
        *fleet_log("L1"),
        NodeDrainStarted(node_id="n-L1", launch_id="L1", reason="idle", at=200.0),
        TaintsChanged(node_id="n-L1", taints=[Taint(SCALE_DOWN_TAINT, "true")]),
        ActorPlaced(actor_id="late", node_id="n-L1", request=ScheduleRequest("late", {"CPU": 1})),
    ]
    (cancelled,) = decider().decide(replay(log), 205.0, {}).events
    assert isinstance(cancelled, NodeDrainCancelled) and "1 actor(s)" in cancelled.reason


def test_a_node_idle_since_a_time_in_the_log_is_drained_a_timeout_later_by_any_decider() -> None:
    """The idle time is the log's: a decider that never saw the node before (an autoscaler started again, another
    instance) drains it once idle_timeout_s has passed since the event that left it empty, not since it looked."""
    log = [
        *fleet_log("L1"),
        ActorPlaced(actor_id="a", node_id="n-L1", request=ScheduleRequest("a", {"CPU": 1})),
    ]
    view = replay(log)
    view.fold(ActorRemoved(actor_id="a"), 150.0)
    assert decider().decide(view, 159.0, {}).events == []
    (drained,) = decider().decide(view, 160.5, {}).events
    assert isinstance(drained, NodeDrainStarted) and drained.reason == "idle for 10s (idle_timeout_s 10)"
