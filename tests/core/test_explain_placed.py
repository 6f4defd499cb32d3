"""`explain_placed`: a placement re-run from the log's inputs chooses the recorded node, the top-scored one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import ActorPlaced, AnyEvent, NodeLabelSchedulingStrategy
from services.core import Cluster, replay
from services.core.explain_placed import (
    FREE_RESOURCES,
    PlacementTrace,
    explain_placed,
    known_when_deciding,
    view_for_decision,
)
from tests.core.builders import make_actor, make_cluster
from tests.support.examples import examples


def traces(cluster: Cluster) -> list[PlacementTrace]:
    """Every placement of the cluster's log, explained from the fold of the events before it."""
    events: list[AnyEvent] = cluster.events()
    found = []
    for index, event in enumerate(events):
        if isinstance(event, ActorPlaced):
            view = view_for_decision(replay(events[:index], cluster.seed), event)
            found.append(explain_placed(view, event))
    return found


def test_a_placement_is_re_run_to_the_recorded_node_the_top_scored_one() -> None:
    cluster = make_cluster(6, cpu=4, seed=7)
    cluster.add_taints("n5", {"dedicated": "gpu"})
    for index in range(8):
        cluster.submit(make_actor(f"a{index}", cpu=1))
    found = traces(cluster)
    assert len(found) == 8
    for trace in found:
        assert trace.reproduced, trace.note
        option = trace.options[-1]
        assert option.chosen == trace.node_id
        best = option.scored[0]
        chosen = next(entry for entry in option.scored if entry.node_id == trace.node_id)
        assert (chosen.weight, chosen.policy_rank) == (best.weight, best.policy_rank)
        assert option.filters[-1].plugin == FREE_RESOURCES
        taints = next(step for step in option.filters if step.plugin == "TaintFilter")
        assert taints.reached - taints.passed == 1  # n5's taint is not tolerated


def test_a_selector_narrows_the_candidates_and_a_soft_label_scores() -> None:
    cluster = make_cluster(4, cpu=4)
    cluster.set_labels("n1", {"disk": "ssd"})
    cluster.set_labels("n2", {"disk": "ssd"})
    cluster.set_labels("n3", {"gpu": "yes"})
    soft = NodeLabelSchedulingStrategy(hard={"disk": "in(ssd)"}, soft={"gpu": "in(yes)"})
    cluster.submit(make_actor("a", scheduling_strategy=soft))
    (trace,) = traces(cluster)
    assert trace.reproduced
    option = trace.options[0]
    assert option.nodes == 4
    assert option.candidates == 2 and option.narrowed_by
    assert {entry.node_id for entry in option.scored} == {"n1", "n2"}


def test_a_placement_logged_without_its_inputs_is_said_not_to_be_re_runnable() -> None:
    cluster = make_cluster(2)
    cluster.submit(make_actor("a"))
    events = cluster.events()
    placed = events[-1]
    assert isinstance(placed, ActorPlaced)
    old = ActorPlaced(actor_id="a", node_id=placed.node_id, request=placed.request)
    trace = explain_placed(view_for_decision(replay(events[:-1]), old), old)
    assert not trace.reproduced and "cannot be re-run" in trace.note


def test_a_node_appended_while_the_scheduler_decided_is_left_out_of_the_view_it_had() -> None:
    labels, scheduler = Cluster(seed=3), Cluster(seed=3)
    log: list[AnyEvent] = []
    labels.add_node("n0", {"CPU": 4})
    labels.add_node("n1", {"CPU": 4})
    for event in labels.events():
        log.append(event)
        scheduler.fold(event)
    scheduler.folded = len(log)
    # appended before the placement, but not folded by the scheduler yet
    log += labels.decided(lambda: labels.add_node("roomy", {"CPU": 8})).events
    log += scheduler.decided(lambda: scheduler.submit(make_actor("x", cpu=3))).events
    placed_at = len(log)
    placed = log[-1]
    assert isinstance(placed, ActorPlaced) and placed.node_id in ("n0", "n1")

    known = [
        event for sequence, event in enumerate(log[:-1], 1) if known_when_deciding(sequence, event, placed, placed_at)
    ]
    trace = explain_placed(view_for_decision(replay(known, 3), placed), placed)
    assert trace.reproduced and trace.options[0].nodes == 2
    everything = explain_placed(view_for_decision(replay(log[:-1], 3), placed), placed)
    assert not everything.reproduced and everything.options[0].chosen == "roomy"  # the view it did not have


@settings(max_examples=examples(30), deadline=None)
@given(
    seed=st.integers(0, 2**64 - 1),
    cpus=st.lists(st.integers(1, 8), min_size=1, max_size=6),
    asks=st.lists(st.integers(1, 4), min_size=1, max_size=12),
    removals=st.lists(st.integers(0, 11), max_size=4),
)
def test_every_placement_of_a_random_workload_is_reproduced(
    seed: int, cpus: list[int], asks: list[int], removals: list[int]
) -> None:
    cluster = Cluster(seed=seed)
    for index, cpu in enumerate(cpus):
        cluster.add_node(f"n{index}", {"CPU": cpu})
    for index, cpu in enumerate(asks):
        cluster.submit(make_actor(f"a{index}", cpu=cpu))
        if index in removals and f"a{index - 1}" in cluster.placements():
            cluster.remove_actor(f"a{index - 1}")
    for trace in traces(cluster):
        assert trace.reproduced, trace.note
