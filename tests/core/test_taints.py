"""Taints and tolerations: blocking effects, PreferNoSchedule, NoExecute eviction and rare-resource isolation."""

from __future__ import annotations

from typing import Any

import pytest

from schemas import (
    ActorFailed,
    ActorPlaced,
    Exists,
    In,
    NodeAffinitySchedulingStrategy,
    NodeLabelSchedulingStrategy,
    PlacementGroupRequest,
    ScheduleRequest,
    SelectorSpec,
    Taint,
    TaintEffect,
)
from services.core import Cluster, Pending, Placed
from tests.core.builders import affinity, make_actor

TAINT = "had untolerated taint {dedicated: ml}"
RARE = "had untolerated taint {rare-resource.corral.io/gpu: true}"
BLOCKING: list[TaintEffect] = ["NoSchedule", "NoExecute"]
BLOCKING_IDS = ["on a NoSchedule node", "on a NoExecute node"]


def _tainted_and_plain(effect: TaintEffect) -> Cluster:
    """`tainted` (pool=special, dedicated=ml with `effect`, hosting a tolerating app=friend actor) and `plain`."""
    cluster = Cluster()
    cluster.add_node("tainted", {"CPU": 4}, {"pool": "special"}, [Taint("dedicated", "ml", effect)])
    cluster.add_node("plain", {"CPU": 4})
    friend = make_actor(
        "friend",
        labels={"app": "friend"},
        tolerations={"dedicated": "exists()"},
        scheduling_strategy=NodeAffinitySchedulingStrategy("tainted"),
    )
    assert cluster.submit(friend) == Placed("friend", "tainted")
    return cluster


# blocking effects, every strategy


@pytest.mark.parametrize("effect", BLOCKING, ids=BLOCKING_IDS)
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"scheduling_strategy": "DEFAULT"},
        {"scheduling_strategy": "SPREAD"},
        {"scheduling_strategy": NodeLabelSchedulingStrategy(soft={"pool": "special"})},
        {"scheduling_strategy": NodeAffinitySchedulingStrategy("tainted", soft=True)},
        {"scheduling_strategy": affinity("app", "IN", ["friend"], soft=True)},
        {"label_selector": {"corral.io/node-id": "in(tainted,plain)"}},
    ],
    ids=[
        "an untolerating actor with no strategy avoids the tainted node",
        "an untolerating DEFAULT actor avoids the tainted node",
        "an untolerating SPREAD actor avoids the tainted node",
        "an untolerating actor softly preferring the tainted node's label avoids it",
        "an untolerating actor with soft node affinity for the tainted node avoids it",
        "an untolerating actor with soft actor affinity towards the tainted node avoids it",
        "an untolerating actor whose selector allows the tainted node avoids it",
    ],
)
def test_blocking_taints_hold_under_every_strategy(options: dict[str, Any], effect: TaintEffect) -> None:
    cluster = _tainted_and_plain(effect)
    for index in range(4):
        assert cluster.submit(make_actor(f"a{index}", **options)) == Placed(f"a{index}", "plain")
    overflow = cluster.submit(make_actor("overflow", **options))
    assert isinstance(overflow, Pending)
    assert overflow.reasons == {TAINT: 1, "Insufficient CPU": 1}
    assert overflow.nodes_by_reason == {TAINT: ["tainted"], "Insufficient CPU": ["plain"]}


@pytest.mark.parametrize("effect", BLOCKING, ids=BLOCKING_IDS)
@pytest.mark.parametrize(
    ("options", "other_reason"),
    [
        ({"scheduling_strategy": NodeAffinitySchedulingStrategy("tainted")}, "didn't match the node affinity"),
        (
            {"scheduling_strategy": NodeLabelSchedulingStrategy(hard={"pool": "special"})},
            "didn't match the label selector",
        ),
        ({"label_selector": {"pool": "special"}}, "didn't match the label selector"),
        ({"scheduling_strategy": affinity("app", "IN", ["friend"])}, "didn't match actor affinity rules"),
    ],
    ids=[
        "hard node affinity for the tainted node leaves an untolerating actor pending",
        "a hard node label rule naming only the tainted node leaves it pending",
        "a label selector naming only the tainted node leaves it pending",
        "hard actor affinity towards the tainted node leaves it pending",
    ],
)
def test_hard_rules_cannot_force_an_untolerating_actor_onto_a_tainted_node(
    options: dict[str, Any], other_reason: str, effect: TaintEffect
) -> None:
    cluster = _tainted_and_plain(effect)
    decision = cluster.submit(make_actor("a", **options))
    assert isinstance(decision, Pending)
    assert decision.reasons == {TAINT: 1, other_reason: 1}
    assert decision.nodes_by_reason == {TAINT: ["tainted"], other_reason: ["plain"]}
    assert decision.message == f"0/2 nodes are available: 1 node(s) {TAINT}, 1 node(s) {other_reason}."
    assert "a" not in cluster.placements()


@pytest.mark.parametrize("effect", BLOCKING, ids=BLOCKING_IDS)
@pytest.mark.parametrize(
    "strategy",
    ["PACK", "SPREAD", "STRICT_PACK"],
    ids=[
        "a PACK placement group keeps off the tainted node",
        "a SPREAD placement group keeps off the tainted node",
        "a STRICT_PACK placement group keeps off the tainted node",
    ],
)
def test_placement_groups_keep_off_tainted_nodes(strategy: Any, effect: TaintEffect) -> None:
    cluster = _tainted_and_plain(effect)
    decision = cluster.create_placement_group(PlacementGroupRequest("pg", [{"CPU": 2}, {"CPU": 2}], strategy))
    assert decision == Placed("pg", bundle_nodes=["plain", "plain"])


@pytest.mark.parametrize("effect", BLOCKING, ids=BLOCKING_IDS)
def test_a_strict_spread_group_that_needs_the_tainted_node_waits(effect: TaintEffect) -> None:
    cluster = _tainted_and_plain(effect)
    decision = cluster.create_placement_group(PlacementGroupRequest("pg", [{"CPU": 1}, {"CPU": 1}], "STRICT_SPREAD"))
    assert isinstance(decision, Pending)
    assert TAINT in decision.message
    assert cluster.placement_groups() == {}


@pytest.mark.parametrize("effect", BLOCKING, ids=BLOCKING_IDS)
def test_a_placement_group_selecting_only_the_tainted_node_waits(effect: TaintEffect) -> None:
    cluster = _tainted_and_plain(effect)
    request = PlacementGroupRequest("pg", [{"CPU": 1}], bundle_label_selector=[{"pool": "special"}])
    decision = cluster.create_placement_group(request)
    assert isinstance(decision, Pending)
    assert decision.reasons == {TAINT: 1, "didn't match the bundle label selector": 1}


@pytest.mark.parametrize("effect", BLOCKING, ids=BLOCKING_IDS)
@pytest.mark.parametrize(
    "strategy",
    ["STRICT_SPREAD", "STRICT_PACK"],
    ids=[
        "a tolerating STRICT_SPREAD group may use the tainted node",
        "a tolerating STRICT_PACK group selecting the tainted node lands there",
    ],
)
def test_a_tolerating_placement_group_may_use_the_tainted_node(strategy: Any, effect: TaintEffect) -> None:
    cluster = _tainted_and_plain(effect)
    selector: list[SelectorSpec] = [{"pool": "special"}] * 2 if strategy == "STRICT_PACK" else []
    request = PlacementGroupRequest(
        "pg", [{"CPU": 1}, {"CPU": 1}], strategy, selector, tolerations={"dedicated": Exists()}
    )
    decision = cluster.create_placement_group(request)
    assert isinstance(decision, Placed)
    assert "tainted" in decision.bundle_nodes


# tolerations


@pytest.mark.parametrize("effect", BLOCKING, ids=BLOCKING_IDS)
@pytest.mark.parametrize(
    ("tolerations", "tolerated"),
    [
        ({"dedicated": "exists()"}, True),
        ({"dedicated": "Exists()"}, True),
        ({"dedicated": Exists()}, True),
        ({"dedicated": "in(ml,gpu)"}, True),
        ({"dedicated": "IN(gpu, ml)"}, True),
        ({"dedicated": "in(gpu,cpu)"}, False),
        ({"dedicated": In("ml")}, True),
        ({"dedicated": In("gpu", "cpu")}, False),
        ({"dedicated": "ml"}, True),
        ({"dedicated": "gpu"}, False),
        ({"other": "exists()"}, False),
        ({}, False),
    ],
    ids=[
        "exists() tolerates the taint whatever its value",
        "Exists() in mixed case tolerates the taint",
        "the Exists() object tolerates the taint",
        "in(..) listing the taint's value tolerates it",
        "IN(..) in capitals listing the value tolerates it",
        "in(..) not listing the taint's value does not tolerate it",
        "In(..) listing the value tolerates it",
        "In(..) not listing the value does not tolerate it",
        "a plain value equal to the taint's tolerates it",
        "a plain value different from the taint's does not tolerate it",
        "a toleration for another key does not tolerate it",
        "no tolerations do not tolerate it",
    ],
)
def test_tolerations_admit_exactly_the_values_they_name(
    tolerations: SelectorSpec, tolerated: bool, effect: TaintEffect
) -> None:
    cluster = Cluster()
    cluster.add_node("n0", {"CPU": 4}, taints=[Taint("dedicated", "ml", effect)])
    decision = cluster.submit(make_actor("a", tolerations=tolerations))
    if tolerated:
        assert decision == Placed("a", "n0")
    else:
        assert isinstance(decision, Pending)
        assert decision.reasons == {TAINT: 1}


def test_a_taint_with_an_empty_value_is_tolerated_by_exists() -> None:
    cluster = Cluster()
    cluster.add_node("n0", {"CPU": 4}, taints=[Taint("maintenance")])
    assert isinstance(cluster.submit(make_actor("a")), Pending)
    assert cluster.submit(make_actor("b", tolerations={"maintenance": "exists()"})) == Placed("b", "n0")


def test_a_node_with_two_taints_needs_both_tolerated() -> None:
    cluster = Cluster()
    cluster.add_node("n0", {"CPU": 4}, taints={"dedicated": "ml", "maintenance": "yes"})
    assert isinstance(cluster.submit(make_actor("a", tolerations={"dedicated": "ml"})), Pending)
    both = make_actor("b", tolerations={"dedicated": "ml", "maintenance": "exists()"})
    assert cluster.submit(both) == Placed("b", "n0")


# PreferNoSchedule


def _soft_tainted_and_plain() -> Cluster:
    cluster = Cluster()
    cluster.add_node("soft", {"CPU": 4}, taints=[Taint("dedicated", "ml", "PreferNoSchedule")])
    cluster.add_node("plain", {"CPU": 4})
    return cluster


@pytest.mark.parametrize(
    "policy",
    [None, "DEFAULT", "SPREAD"],
    ids=[
        "with no policy, requests fill the untainted node first, then use the tainted one",
        "under DEFAULT, requests fill the untainted node first, then use the tainted one",
        "under SPREAD, requests fill the untainted node first, then use the tainted one",
    ],
)
def test_prefer_no_schedule_only_lowers_the_score(policy: str | None) -> None:
    cluster = _soft_tainted_and_plain()
    for index in range(4):
        assert cluster.submit(make_actor(f"a{index}", scheduling_strategy=policy)) == Placed(f"a{index}", "plain")
    assert cluster.submit(make_actor("a4", scheduling_strategy=policy)) == Placed("a4", "soft")


def test_a_node_whose_only_taint_is_prefer_no_schedule_still_takes_work() -> None:
    cluster = Cluster()
    cluster.add_node("soft", {"CPU": 4}, taints=[Taint("dedicated", "ml", "PreferNoSchedule")])
    assert cluster.submit(make_actor("a")) == Placed("a", "soft")


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [({"dedicated": "exists()"}, "soft"), ({}, "plain")],
    ids=[
        "a request tolerating PreferNoSchedule spreads onto the tainted node like any other",
        "a request not tolerating it stays on the busier untainted node",
    ],
)
def test_tolerating_prefer_no_schedule_removes_the_penalty(tolerations: SelectorSpec, expected: str) -> None:
    cluster = _soft_tainted_and_plain()
    cluster.submit(make_actor("busy", 2, scheduling_strategy=NodeAffinitySchedulingStrategy("plain")))
    decision = cluster.submit(make_actor("a", tolerations=tolerations, scheduling_strategy="SPREAD"))
    assert decision == Placed("a", expected)


@pytest.mark.parametrize(
    "strategy",
    ["PACK", "SPREAD"],
    ids=[
        "a PACK group's bundle goes to the busier node without PreferNoSchedule",
        "a SPREAD group's bundle goes to the busier node without PreferNoSchedule",
    ],
)
def test_a_placement_group_prefers_the_node_without_prefer_no_schedule(strategy: Any) -> None:
    cluster = _soft_tainted_and_plain()
    cluster.submit(make_actor("busy", 2, scheduling_strategy=NodeAffinitySchedulingStrategy("plain")))
    decision = cluster.create_placement_group(PlacementGroupRequest("pg", [{"CPU": 1}], strategy))
    assert decision == Placed("pg", bundle_nodes=["plain"])


# adding and removing taints


def _two_nodes_with_actors(max_restarts: int) -> Cluster:
    """Nodes a and b; on a: `victim` (no tolerations) and `tolerant` (tolerates dedicated)."""
    cluster = Cluster()
    cluster.add_node("a", {"CPU": 4})
    cluster.add_node("b", {"CPU": 4})
    near_a = NodeAffinitySchedulingStrategy("a", soft=True)
    cluster.submit(make_actor("victim", scheduling_strategy=near_a, max_restarts=max_restarts))
    cluster.submit(make_actor("tolerant", scheduling_strategy=near_a, tolerations={"dedicated": "exists()"}))
    assert cluster.placements() == {"victim": "a", "tolerant": "a"}
    return cluster


def _failures(cluster: Cluster) -> list[tuple[str, bool]]:
    return [(e.actor_id, e.will_restart) for e in cluster.events() if isinstance(e, ActorFailed)]


def test_a_no_execute_taint_restarts_an_untolerating_actor_elsewhere() -> None:
    cluster = _two_nodes_with_actors(max_restarts=1)
    cluster.add_taints("a", [Taint("dedicated", "ml", "NoExecute")])
    assert cluster.placements() == {"victim": "b", "tolerant": "a"}
    assert _failures(cluster) == [("victim", True)]


def test_a_no_execute_taint_ends_an_untolerating_actor_without_restarts() -> None:
    cluster = _two_nodes_with_actors(max_restarts=0)
    cluster.add_taints("a", [Taint("dedicated", "ml", "NoExecute")])
    assert cluster.placements() == {"tolerant": "a"}
    assert _failures(cluster) == [("victim", False)]
    assert cluster.pending() == []


def test_an_evicted_actor_with_nowhere_else_to_go_waits_on_the_taint() -> None:
    cluster = Cluster()
    cluster.add_node("a", {"CPU": 4})
    cluster.submit(make_actor("victim", max_restarts=1))
    cluster.add_taints("a", [Taint("dedicated", "ml", "NoExecute")])
    assert cluster.placements() == {}
    assert [(p.id, p.reasons) for p in cluster.pending()] == [("victim", {TAINT: 1})]


@pytest.mark.parametrize(
    "taints",
    [
        [Taint("dedicated", "ml", "NoSchedule")],
        {"dedicated": "ml"},
        [Taint("dedicated", "ml", "PreferNoSchedule")],
    ],
    ids=[
        "adding a NoSchedule taint evicts nothing",
        "adding a {key: value} taint evicts nothing",
        "adding a PreferNoSchedule taint evicts nothing",
    ],
)
def test_only_no_execute_evicts(taints: Any) -> None:
    cluster = _two_nodes_with_actors(max_restarts=1)
    cluster.add_taints("a", taints)
    assert cluster.placements() == {"victim": "a", "tolerant": "a"}
    assert _failures(cluster) == []


def test_a_no_schedule_taint_added_later_keeps_new_untolerating_work_off() -> None:
    cluster = _two_nodes_with_actors(max_restarts=0)
    cluster.add_taints("a", {"dedicated": "ml"})
    for index in range(4):
        near_a = NodeAffinitySchedulingStrategy("a", soft=True)
        assert cluster.submit(make_actor(f"new{index}", scheduling_strategy=near_a)) == Placed(f"new{index}", "b")


def test_removing_a_taint_places_the_actor_waiting_on_it() -> None:
    cluster = Cluster()
    cluster.add_node("n0", {"CPU": 4}, taints={"dedicated": "ml"})
    assert isinstance(cluster.submit(make_actor("a")), Pending)
    events_before = len(cluster.events())
    cluster.remove_taints("n0", ["dedicated"])
    assert cluster.placements() == {"a": "n0"}
    assert cluster.pending() == []
    placed = [e for e in cluster.events()[events_before:] if isinstance(e, ActorPlaced)]
    assert [(e.actor_id, e.node_id) for e in placed] == [("a", "n0")]


def test_removing_another_taint_leaves_the_actor_waiting() -> None:
    cluster = Cluster()
    cluster.add_node("n0", {"CPU": 4}, taints={"dedicated": "ml", "maintenance": "yes"})
    cluster.submit(make_actor("a", tolerations={"maintenance": "exists()"}))
    cluster.remove_taints("n0", ["maintenance"])
    assert cluster.placements() == {}
    assert [p.reasons for p in cluster.pending()] == [{TAINT: 1}]


def test_taints_given_to_add_node_as_a_map_mean_no_schedule() -> None:
    cluster = Cluster()
    cluster.add_node("n0", {"CPU": 4}, taints={"dedicated": "ml"})
    assert cluster.view.nodes["n0"].taints == (Taint("dedicated", "ml", "NoSchedule"),)
    decision = cluster.submit(make_actor("a"))
    assert isinstance(decision, Pending)
    assert decision.message == f"0/1 nodes are available: 1 node(s) {TAINT}."


# rare-resource isolation


def _rare_cluster(*, with_cpu_node: bool) -> Cluster:
    cluster = Cluster(rare_resources=("GPU",))
    cluster.add_node("gpu", {"CPU": 8, "GPU": 1})
    if with_cpu_node:
        cluster.add_node("cpu", {"CPU": 8})
    return cluster


def test_a_node_with_a_rare_resource_is_tainted_automatically() -> None:
    cluster = _rare_cluster(with_cpu_node=True)
    assert cluster.view.nodes["gpu"].taints == (Taint("rare-resource.corral.io/gpu", "true", "NoSchedule"),)
    assert cluster.view.nodes["cpu"].taints == ()


def test_a_cpu_only_request_cannot_land_on_a_rare_resource_node() -> None:
    cluster = _rare_cluster(with_cpu_node=False)
    decision = cluster.submit(make_actor("a"))
    assert isinstance(decision, Pending)
    assert RARE in decision.message
    assert decision.reasons == {RARE: 1}


@pytest.mark.parametrize(
    "policy",
    [None, "SPREAD"],
    ids=["cpu-only requests go to the cpu node by default", "cpu-only requests go to the cpu node under SPREAD"],
)
def test_cpu_only_requests_stay_on_ordinary_nodes(policy: str | None) -> None:
    cluster = _rare_cluster(with_cpu_node=True)
    for index in range(8):
        assert cluster.submit(make_actor(f"a{index}", scheduling_strategy=policy)) == Placed(f"a{index}", "cpu")
    assert isinstance(cluster.submit(make_actor("overflow", scheduling_strategy=policy)), Pending)


def test_a_gpu_request_lands_on_the_gpu_node_without_declaring_tolerations() -> None:
    cluster = _rare_cluster(with_cpu_node=True)
    decision = cluster.submit(ScheduleRequest("trainer", {"CPU": 1, "GPU": 1}))
    assert decision == Placed("trainer", "gpu")


def test_a_gpu_placement_group_lands_on_the_gpu_node_without_declaring_tolerations() -> None:
    cluster = _rare_cluster(with_cpu_node=True)
    decision = cluster.create_placement_group(PlacementGroupRequest("pg", [{"GPU": 1}]))
    assert decision == Placed("pg", bundle_nodes=["gpu"])


def test_a_cpu_only_placement_group_cannot_land_on_a_rare_resource_node() -> None:
    cluster = _rare_cluster(with_cpu_node=False)
    decision = cluster.create_placement_group(PlacementGroupRequest("pg", [{"CPU": 1}]))
    assert isinstance(decision, Pending)
    assert RARE in decision.message


def test_an_explicit_toleration_lets_a_cpu_request_use_the_rare_node() -> None:
    cluster = _rare_cluster(with_cpu_node=False)
    request = make_actor("a", tolerations={"rare-resource.corral.io/gpu": "exists()"})
    assert cluster.submit(request) == Placed("a", "gpu")


def test_without_rare_resources_configured_a_gpu_node_is_not_isolated() -> None:
    cluster = Cluster()
    cluster.add_node("gpu", {"CPU": 8, "GPU": 1})
    assert cluster.view.nodes["gpu"].taints == ()
    assert cluster.submit(make_actor("a")) == Placed("a", "gpu")


@pytest.mark.parametrize(
    ("tolerations", "moves"),
    [({}, True), ({"dedicated": "exists()"}, False)],
    ids=[
        "a NoExecute taint the group does not tolerate moves its bundle to another node",
        "a NoExecute taint the group tolerates leaves its bundle in place",
    ],
)
def test_a_no_execute_taint_re_reserves_untolerating_bundles(tolerations: SelectorSpec, moves: bool) -> None:
    cluster = Cluster()
    cluster.add_node("a", {"CPU": 4})
    cluster.add_node("b", {"CPU": 4})
    decision = cluster.create_placement_group(PlacementGroupRequest("pg", [{"CPU": 1}], tolerations=tolerations))
    assert isinstance(decision, Placed)
    first = decision.bundle_nodes[0]
    other = "b" if first == "a" else "a"
    cluster.add_taints(first, [Taint("dedicated", "ml", "NoExecute")])
    assert cluster.placement_groups() == {"pg": [other if moves else first]}


def test_removing_a_key_with_an_effect_keeps_its_taints_of_other_effects() -> None:
    cluster = Cluster()
    taints = [Taint("gpu", "a", "NoSchedule"), Taint("gpu", "a", "PreferNoSchedule"), Taint("zone", "x", "NoSchedule")]
    cluster.add_node("n0", {"CPU": 4}, taints=taints)
    events_before = len(cluster.events())
    cluster.remove_taints("n0", [], {"gpu": ["NoSchedule"]})
    assert cluster.view.nodes["n0"].taints == (taints[1], taints[2])
    assert len(cluster.events()) == events_before + 1  # one change: no moment without the other taints


@pytest.mark.parametrize("effects", [{"gpu": ["NoPlease"]}, {"gpu": "NoSchedule"}])
def test_an_effect_that_is_not_one_is_refused_naming_the_key(effects: Any) -> None:
    cluster = Cluster()
    cluster.add_node("n0", {"CPU": 4}, taints={"gpu": "a"})
    with pytest.raises(ValueError, match=r"effects\['gpu'\].*must be a list of NoSchedule, PreferNoSchedule"):
        cluster.remove_taints("n0", [], effects)
    assert [taint.key for taint in cluster.view.nodes["n0"].taints] == ["gpu"]
