"""The chaos run's figures from a synthetic log: lost, decided twice, over-full, fenced epochs, the longest gap."""

from __future__ import annotations

from loadtest.chaos.figures import Overfull, Request, fold_log, longest_gap, lost
from schemas import (
    ActorFailed,
    ActorPending,
    ActorPlaced,
    ActorRemoved,
    AnyEvent,
    Explanation,
    NodeDied,
    NodeRegistered,
    SchedulerElected,
    ScheduleRequest,
    Taint,
    TaintsChanged,
    VirtualClusterDestroyed,
    VirtualNodesReserved,
)
from schemas.vclusters import VirtualNodeGrant


def placed(actor_id: str, node_id: str, cpu: float = 1.0, epoch: int = 1) -> ActorPlaced:
    """An actor placed as submitted."""
    return ActorPlaced(actor_id=actor_id, node_id=node_id, request=ScheduleRequest(actor_id, {"CPU": cpu}), epoch=epoch)


def node(node_id: str, cpu: float = 2.0) -> NodeRegistered:
    return NodeRegistered(node_id=node_id, resources={"CPU": cpu}, labels={})


ELECTED = SchedulerElected(epoch=1, instance="s1")


def test_a_placement_again_without_a_removal_between_is_doubled_and_one_after_a_failure_is_not() -> None:
    events: list[AnyEvent] = [
        ELECTED,
        node("n1"),
        node("n2"),
        placed("a1", "n1"),
        placed("a1", "n2"),
        placed("a2", "n1"),
        ActorFailed(actor_id="a2", node_id="n1", reason="x", will_restart=True, epoch=1),
        ActorPlaced(actor_id="a2", node_id="n2", epoch=1),
        placed("a3", "n1"),
        NodeDied(node_id="n1"),
        ActorPlaced(actor_id="a3", node_id="n2", epoch=1),
    ]
    assert fold_log(events).doubled == ["a1"]


def test_events_of_an_older_epoch_do_not_count() -> None:
    """A deposed leader's late placement is fenced: not doubled, not capacity, not a decision."""
    events: list[AnyEvent] = [
        ELECTED,
        node("n1", cpu=1.0),
        SchedulerElected(epoch=2, instance="s2"),
        placed("a1", "n1", epoch=1),
        placed("a1", "n1", epoch=2),
    ]
    fold = fold_log(events)
    assert (fold.doubled, fold.overfull, fold.fenced) == ([], [], 1)


def test_a_node_is_over_full_when_its_placements_pass_its_capacity_and_once_per_resource() -> None:
    events: list[AnyEvent] = [ELECTED, node("n1", cpu=2.0), placed("a1", "n1"), placed("a2", "n1"), placed("a3", "n1")]
    assert fold_log(events).overfull == [Overfull("n1", "CPU", 3.0, 2.0, 4)]
    freed: list[AnyEvent] = [*events[:4], ActorRemoved(actor_id="a1", epoch=1), placed("a3", "n1")]
    assert fold_log(freed).overfull == []


def test_virtual_nodes_take_from_their_parent_and_give_back_when_the_cluster_goes() -> None:
    grant = VirtualNodeGrant("vn1", "n1", {"CPU": 2.0})
    events: list[AnyEvent] = [
        ELECTED,
        node("n1", cpu=3.0),
        VirtualNodesReserved(vc_id="vc", vnodes=[grant], epoch=1),
        placed("a1", "vn1", cpu=2.0),
        VirtualClusterDestroyed(vc_id="vc", epoch=1),
        placed("a2", "n1", cpu=3.0),
    ]
    assert fold_log(events).overfull == []
    crowded: list[AnyEvent] = [*events[:4], placed("a2", "n1", cpu=2.0)]
    assert fold_log(crowded).overfull == [Overfull("n1", "CPU", 4.0, 3.0, 4)]
    inside: list[AnyEvent] = [*events[:4], placed("a3", "vn1", cpu=1.0)]
    assert fold_log(inside).overfull == [Overfull("vn1", "CPU", 3.0, 2.0, 4)]


def test_a_request_is_lost_when_the_log_holds_no_decision_for_it_unless_it_was_refused() -> None:
    pending = ActorPending(actor_id="a2", explanation=Explanation(0, "waits"), epoch=1)
    fold = fold_log([ELECTED, node("n1"), placed("a1", "n1"), pending, ActorRemoved(actor_id="a1", epoch=1)])
    requests = [
        Request("submit", "a1", 0.0),
        Request("submit", "a2", 0.0),
        Request("submit", "a3", 0.0, answered_at=1.0),
        Request("remove", "a1", 0.0),
        Request("remove", "a9", 0.0, answered_at=1.0, rejected=True),
        Request("register", "n1", 0.0),
        Request("taint", "n1/k", 0.0),
    ]
    assert [(r.kind, r.key) for r in lost(requests, fold)] == [("submit", "a3"), ("taint", "n1/k")]


def test_a_taint_is_added_when_its_key_appears_and_removed_when_it_is_not_there_at_the_end() -> None:
    taint = Taint("k", "x", "PreferNoSchedule")
    events: list[AnyEvent] = [
        node("n1"),
        node("n2"),
        TaintsChanged(node_id="n1", taints=[taint]),
        TaintsChanged(node_id="n2", taints=[taint]),
        TaintsChanged(node_id="n1", taints=[]),
        NodeDied(node_id="n2"),
        TaintsChanged(node_id="n3", taints=[taint]),
    ]
    fold = fold_log(events)
    requests = [Request("taint", f"{n}/k", 0.0) for n in ("n1", "n2", "n3")]
    requests += [Request("untaint", f"{n}/k", 0.0) for n in ("n1", "n2", "n3")]
    assert [(r.kind, r.key) for r in lost(requests, fold)] == [("untaint", "n3/k")]


def test_the_longest_gap_counts_from_the_start_and_to_the_end() -> None:
    assert longest_gap([1.0, 1.5, 4.0], start=0.0, end=5.0) == (2.5, 1.5)
    assert longest_gap([], start=2.0, end=3.0) == (1.0, 2.0)
    assert longest_gap([0.5, 9.0], start=0.0, end=10.0) == (8.5, 0.5)


def test_a_removal_is_lost_only_when_the_actor_is_still_live_at_the_end() -> None:
    """Removed, failed for good or stopped with its cluster: the removal holds (a refusal may have been lost)."""
    events: list[AnyEvent] = [
        ELECTED,
        node("n1", cpu=10.0),
        *(placed(actor, "n1") for actor in ("a1", "a2", "a3", "a4", "a5")),
        ActorRemoved(actor_id="a1", epoch=1),
        ActorFailed(actor_id="a2", node_id="n1", reason="x", will_restart=False, epoch=1),
        ActorFailed(actor_id="a3", node_id="n1", reason="x", will_restart=True, epoch=1),
        VirtualClusterDestroyed(vc_id="vc", stopped=["a4"], epoch=1),
    ]
    requests = [Request("remove", actor, 0.0) for actor in ("a1", "a2", "a3", "a4", "a5")]
    assert [r.key for r in lost(requests, fold_log(events))] == ["a3", "a5"]
