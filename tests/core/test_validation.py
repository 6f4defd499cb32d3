"""Bad input is refused with a ValueError naming the field and the value, and leaves the cluster untouched."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from schemas import (
    NodeAffinitySchedulingStrategy,
    PlacementGroupRequest,
    RunAfter,
    ScheduleRequest,
    Taint,
)
from services.core import Cluster, Pending, Placed
from services.core.errors import ConflictError
from tests.core.builders import affinity, make_actor, make_cluster

SOMETIMES: Any = "Sometimes"
RANDOM: Any = "RANDOM"


def _submit(request: ScheduleRequest) -> Callable[[Cluster], object]:
    return lambda cluster: cluster.submit(request)


def _create(request: PlacementGroupRequest) -> Callable[[Cluster], object]:
    return lambda cluster: cluster.create_placement_group(request)


@pytest.mark.parametrize(
    ("call", "field", "value"),
    [
        (_submit(ScheduleRequest("a", {"CPU": -1})), "resources['CPU']", "-1"),
        (_submit(ScheduleRequest("a", {"CPU": float("nan")})), "resources['CPU']", "nan"),
        (_submit(ScheduleRequest("a", {"CPU": float("inf")})), "resources['CPU']", "inf"),
        (_submit(ScheduleRequest("", {"CPU": 1})), "actor_id", "''"),
        (_submit(ScheduleRequest("a b", {"CPU": 1})), "actor_id", "'a b'"),
        (_submit(make_actor("a", scheduling_strategy=RANDOM)), "scheduling_strategy", "'RANDOM'"),
        (_submit(make_actor("a", scheduling_strategy=affinity("app", "IN"))), "values", "[]"),
        (_submit(make_actor("a", scheduling_strategy=affinity("app", "NOT_IN"))), "values", "[]"),
        (_submit(make_actor("a", scheduling_strategy=affinity("app", "EXISTS", ["x"]))), "values", "['x']"),
        (
            _submit(make_actor("a", scheduling_strategy=affinity("app", "DOES_NOT_EXIST", ["x"]))),
            "values",
            "['x']",
        ),
        (_submit(make_actor("a", run_after=RunAfter("placed", SOMETIMES))), "run_after.policy", "'Sometimes'"),
        (_submit(make_actor("a", max_restarts=-2)), "max_restarts", "-2"),
        (_submit(make_actor("a", label_selector={"tier": "in()"})), "label_selector", "'in()'"),
        (_submit(make_actor("a", fallback_strategy=[{"selector": {}}])), "fallback_strategy[0]", "'selector'"),
        (_submit(make_actor("a", tolerations={"dedicated": "!!v"})), "tolerations", "'!!v'"),
        (
            _create(PlacementGroupRequest("pg2", [{"CPU": 1}, {"CPU": 1}], bundle_label_selector=[{}])),
            "bundle_label_selector",
            "[{}]",
        ),
        (_create(PlacementGroupRequest("pg2", [])), "bundles", "[]"),
        (_create(PlacementGroupRequest("pg2", [{"CPU": -1}])), "bundles[0]['CPU']", "-1"),
        (_create(PlacementGroupRequest("pg2", [{"CPU": 1}], RANDOM)), "strategy", "'RANDOM'"),
        (_create(PlacementGroupRequest("pg2", [{"CPU": 0.001}] * 1_001)), "bundles", "'1,001 bundles'"),
        (
            _create(PlacementGroupRequest("pg2", [{"CPU": 1}], fallback_strategy=[{"bundles": [{"CPU": 1}] * 1_001}])),
            "fallback_strategy[0].bundles",
            "'1,001 bundles'",
        ),
        (_submit(make_actor("a", fallback_strategy=[{"label_selector": {}}] * 9)), "fallback_strategy", "'9 options'"),
        (lambda c: c.add_node("n0", {"CPU": 4}), "node_id", "'n0'"),
        (lambda c: c.add_node("n9", {"CPU": -4}), "resources['CPU']", "-4"),
        (lambda c: c.add_node("n9", {"CPU": float("nan")}), "resources['CPU']", "nan"),
        (lambda c: c.add_node("n9", {"CPU": 4}, taints=[Taint("k", "v", SOMETIMES)]), "effect", "'Sometimes'"),
        (lambda c: c.add_taints("n1", [Taint("k", "v", SOMETIMES)]), "effect", "'Sometimes'"),
        (lambda c: c.set_labels("ghost", {"a": "1"}), "node_id", "'ghost'"),
        (lambda c: c.add_taints("ghost", {"k": "v"}), "node_id", "'ghost'"),
        (lambda c: c.remove_taints("ghost", ["k"]), "node_id", "'ghost'"),
        (lambda c: c.remove_node("ghost"), "node_id", "'ghost'"),
        (lambda c: c.remove_actor("ghost"), "actor_id", "'ghost'"),
        (lambda c: c.fail_actor("waiting"), "actor_id", "'waiting'"),
    ],
    ids=[
        "a negative resource amount is refused",
        "a NaN resource amount is refused",
        "an infinite resource amount is refused",
        "an empty actor_id is refused",
        "an actor_id with a blank is refused",
        "an unknown scheduling_strategy string is refused",
        "an IN expression with no values is refused",
        "a NOT_IN expression with no values is refused",
        "an EXISTS expression with values is refused",
        "a DOES_NOT_EXIST expression with values is refused",
        "a RunAfter policy of Sometimes is refused",
        "max_restarts below -1 is refused",
        "a label selector in() with no values is refused",
        "a fallback option without label_selector is refused",
        "a toleration !!v is refused",
        "a bundle_label_selector shorter than the bundles is refused",
        "a placement group with no bundles is refused",
        "a bundle with a negative amount is refused",
        "an unknown placement group strategy is refused",
        "a placement group of more than 1,000 bundles is refused",
        "a placement group fallback of more than 1,000 bundles is refused",
        "more than 8 fallback options are refused",
        "registering a node id twice is refused",
        "a node with a negative resource is refused",
        "a node with a NaN resource is refused",
        "a node with a taint effect of Sometimes is refused",
        "adding a taint with an effect of Sometimes is refused",
        "set_labels on an unknown node is refused",
        "add_taints on an unknown node is refused",
        "remove_taints on an unknown node is refused",
        "remove_node on an unknown node is refused",
        "remove_actor on an unknown actor is refused",
        "fail_actor on a pending actor is refused",
    ],
)
def test_bad_input_is_refused_naming_field_and_value_and_changes_nothing(
    call: Callable[[Cluster], object], field: str, value: str
) -> None:
    cluster = _busy_cluster()
    events = cluster.events()
    placements = cluster.placements()
    groups = cluster.placement_groups()
    labels = {node_id: dict(node.labels) for node_id, node in cluster.view.nodes.items()}
    with pytest.raises(ValueError) as raised:
        call(cluster)
    message = str(raised.value)
    assert field in message
    assert value in message
    assert cluster.events() == events
    assert cluster.placements() == placements
    assert cluster.placement_groups() == groups
    assert [p.id for p in cluster.pending()] == ["waiting"]
    assert {node_id: node.labels for node_id, node in cluster.view.nodes.items()} == labels


@pytest.mark.parametrize(
    ("operator", "values", "rule"),
    [("IN", [], "IN needs at least one value"), ("EXISTS", ["x"], "EXISTS takes no values")],
    ids=["an empty IN explains the rule it broke", "an EXISTS with values explains the rule it broke"],
)
def test_affinity_errors_name_the_rule(operator: str, values: list[str], rule: str) -> None:
    cluster = make_cluster(1)
    with pytest.raises(ValueError, match=rule):
        cluster.submit(make_actor("a", scheduling_strategy=affinity("app", operator, values)))


# submitting a live id


PLACED = make_actor("placed", scheduling_strategy=NodeAffinitySchedulingStrategy("n0"))
WAITING = make_actor("waiting", label_selector={"disk": "ssd"})


def _busy_cluster() -> Cluster:
    """Three nodes, a placed actor, a pending actor and a placed placement group."""
    cluster = make_cluster(3)
    cluster.submit(PLACED)
    cluster.submit(WAITING)
    cluster.create_placement_group(PlacementGroupRequest("pg", [{"CPU": 1}]))
    return cluster


@pytest.mark.parametrize(
    "again",
    [PLACED, msgspec.structs.replace(WAITING, vcluster_id="")],
    ids=["resubmitting a placed actor returns where it is", "resubmitting a pending actor returns why it waits"],
)
def test_submitting_a_live_id_returns_its_decision_and_records_nothing(again: ScheduleRequest) -> None:
    cluster = _busy_cluster()
    events = cluster.events()
    placements = cluster.placements()
    decision = cluster.submit(again)
    if again.actor_id == "placed":
        assert decision == Placed("placed", "n0")
    else:
        assert isinstance(decision, Pending)
        assert decision.id == "waiting"
        assert decision.reasons == {"didn't match the label selector": 3}
    assert cluster.events() == events
    assert cluster.placements() == placements


@pytest.mark.parametrize(
    ("again", "named"),
    [
        (make_actor("placed", 3, label_selector={"disk": "nvme"}), 'resources {"CPU":1} -> {"CPU":3}'),
        (make_actor("waiting"), 'label_selector {"disk":"ssd"} -> {}'),
    ],
    ids=[
        "resubmitting a placed actor with another request is a conflict naming both",
        "resubmitting a pending actor with easier options is a conflict and does not place it",
    ],
)
def test_submitting_a_live_id_with_another_request_is_a_conflict(again: ScheduleRequest, named: str) -> None:
    cluster = _busy_cluster()
    events = cluster.events()
    with pytest.raises(ConflictError, match=re.escape(named)):
        cluster.submit(again)
    assert cluster.events() == events


def test_creating_a_live_placement_group_again_returns_its_decision_and_records_nothing() -> None:
    cluster = _busy_cluster()
    events = cluster.events()
    groups = cluster.placement_groups()
    decision = cluster.create_placement_group(PlacementGroupRequest("pg", [{"CPU": 1}]))
    assert decision == Placed("pg", bundle_nodes=groups["pg"])
    with pytest.raises(ConflictError, match=re.escape('bundles [{"CPU":1}] -> [{"CPU":2},{"CPU":2}]')):
        cluster.create_placement_group(PlacementGroupRequest("pg", [{"CPU": 2}, {"CPU": 2}]))
    assert cluster.events() == events


def test_an_id_that_is_no_longer_live_may_be_submitted_again() -> None:
    cluster = _busy_cluster()
    cluster.remove_actor("placed")
    events = len(cluster.events())
    assert isinstance(cluster.submit(make_actor("placed")), Placed)
    assert len(cluster.events()) > events
    assert "placed" in cluster.placements()
