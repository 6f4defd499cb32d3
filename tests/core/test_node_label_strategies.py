"""NodeLabel and NodeAffinity strategies, the DEFAULT and SPREAD policies, and soft rules outranking the policy."""

from __future__ import annotations

import pytest

from schemas import (
    Exists,
    In,
    NodeAffinitySchedulingStrategy,
    NodeLabelSchedulingStrategy,
    ScheduleRequest,
    SchedulingStrategy,
    SelectorSpec,
)
from services.core import Cluster, Pending, Placed
from tests.core.builders import affinity, make_actor, make_cluster

SELECTOR = "didn't match the label selector"
NODE_AFFINITY = "didn't match the node affinity"


def _labelled_cluster() -> Cluster:
    """n0 (zone z0), n1 (zone z1, disk=ssd), n2 (zone z2, disk=ssd, gpu=t4); 4 CPU each."""
    cluster = make_cluster(3)
    cluster.set_labels("n1", {"disk": "ssd"})
    cluster.set_labels("n2", {"disk": "ssd", "gpu": "t4"})
    return cluster


def _load(cluster: Cluster, used: dict[str, float]) -> None:
    """Pin busy actors so that each node has `used` CPUs taken."""
    for node_id, cpu in used.items():
        if cpu:
            pin = NodeAffinitySchedulingStrategy(node_id)
            assert cluster.submit(make_actor(f"busy-{node_id}", cpu, scheduling_strategy=pin)) == Placed(
                f"busy-{node_id}", node_id
            )


# NodeLabelSchedulingStrategy


@pytest.mark.parametrize(
    ("hard", "allowed"),
    [
        ({"disk": "ssd"}, {"n1", "n2"}),
        ({"disk": In("ssd")}, {"n1", "n2"}),
        ({"disk": "!exists()"}, {"n0"}),
        ({"disk": "ssd", "gpu": "!t4"}, {"n1"}),
        ({"corral.io/availability-zone": "in(z0,z2)"}, {"n0", "n2"}),
    ],
    ids=[
        "hard keeps actors on nodes with the label",
        "hard accepts the structured In form",
        "hard !exists() keeps actors on nodes lacking the key",
        "every hard entry must hold",
        "hard can select on default labels",
    ],
)
def test_node_label_hard_filters_nodes(hard: SelectorSpec, allowed: set[str]) -> None:
    cluster = _labelled_cluster()
    strategy = NodeLabelSchedulingStrategy(hard=hard)
    for index in range(4 * len(allowed)):
        decision = cluster.submit(make_actor(f"a{index}", scheduling_strategy=strategy))
        assert isinstance(decision, Placed)
        assert decision.node_id in allowed
    overflow = cluster.submit(make_actor("overflow", scheduling_strategy=strategy))
    assert isinstance(overflow, Pending)
    expected = {"Insufficient CPU": len(allowed), SELECTOR: 3 - len(allowed)}
    assert overflow.reasons == {reason: count for reason, count in expected.items() if count}


def test_node_label_hard_matching_nothing_leaves_the_actor_pending() -> None:
    cluster = _labelled_cluster()
    decision = cluster.submit(make_actor("a", scheduling_strategy=NodeLabelSchedulingStrategy(hard={"disk": "nvme"})))
    assert isinstance(decision, Pending)
    assert decision.reasons == {SELECTOR: 3}
    assert decision.message == f"0/3 nodes are available: 3 node(s) {SELECTOR}."


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        (NodeLabelSchedulingStrategy(soft={"gpu": "t4"}), "n2"),
        (NodeLabelSchedulingStrategy(soft={"gpu": "exists()", "disk": "ssd"}), "n2"),
        (NodeLabelSchedulingStrategy(soft={"disk": "!ssd"}), "n0"),
        (NodeLabelSchedulingStrategy(hard={"corral.io/availability-zone": "in(z0,z1)"}, soft={"disk": "ssd"}), "n1"),
    ],
    ids=[
        "soft sends the actor to the matching node",
        "the node matching more soft entries wins",
        "a negative soft entry prefers nodes without the value",
        "soft picks among the nodes hard allows",
    ],
)
def test_node_label_soft_prefers_matching_nodes(strategy: NodeLabelSchedulingStrategy, expected: str) -> None:
    cluster = _labelled_cluster()
    for index in range(4):
        assert cluster.submit(make_actor(f"a{index}", scheduling_strategy=strategy)) == Placed(f"a{index}", expected)
    overflow = cluster.submit(make_actor("overflow", scheduling_strategy=strategy))
    assert isinstance(overflow, Placed)
    assert overflow.node_id != expected


def test_node_label_soft_is_ignored_when_nothing_matches() -> None:
    cluster = _labelled_cluster()
    strategy = NodeLabelSchedulingStrategy(soft={"disk": "nvme"})
    for index in range(12):
        assert isinstance(cluster.submit(make_actor(f"a{index}", scheduling_strategy=strategy)), Placed)
    assert sorted(cluster.placements().values()) == ["n0"] * 4 + ["n1"] * 4 + ["n2"] * 4


# NodeAffinitySchedulingStrategy


def test_hard_node_affinity_places_on_that_node() -> None:
    cluster = make_cluster(3)
    for index in range(4):
        pin = NodeAffinitySchedulingStrategy("n1")
        assert cluster.submit(make_actor(f"a{index}", scheduling_strategy=pin)) == Placed(f"a{index}", "n1")


def test_hard_node_affinity_on_a_full_node_waits_for_it() -> None:
    cluster = make_cluster(3)
    _load(cluster, {"n1": 4})
    decision = cluster.submit(make_actor("a", scheduling_strategy=NodeAffinitySchedulingStrategy("n1")))
    assert isinstance(decision, Pending)
    assert decision.reasons == {NODE_AFFINITY: 2, "Insufficient CPU": 1}
    assert decision.nodes_by_reason == {NODE_AFFINITY: ["n0", "n2"], "Insufficient CPU": ["n1"]}
    cluster.remove_actor("busy-n1")
    assert cluster.placements() == {"a": "n1"}


def test_hard_node_affinity_to_an_unknown_node_is_pending() -> None:
    cluster = make_cluster(3)
    decision = cluster.submit(make_actor("a", scheduling_strategy=NodeAffinitySchedulingStrategy("ghost")))
    assert isinstance(decision, Pending)
    assert decision.message == f"0/3 nodes are available: 3 node(s) {NODE_AFFINITY}."


def test_soft_node_affinity_prefers_the_node_then_goes_elsewhere() -> None:
    cluster = make_cluster(3)
    near = NodeAffinitySchedulingStrategy("n1", soft=True)
    for index in range(4):
        assert cluster.submit(make_actor(f"a{index}", scheduling_strategy=near)) == Placed(f"a{index}", "n1")
    overflow = cluster.submit(make_actor("overflow", scheduling_strategy=near))
    assert isinstance(overflow, Placed)
    assert overflow.node_id in {"n0", "n2"}


def test_soft_node_affinity_to_an_unknown_node_places_anywhere() -> None:
    cluster = make_cluster(3)
    decision = cluster.submit(make_actor("a", scheduling_strategy=NodeAffinitySchedulingStrategy("ghost", soft=True)))
    assert isinstance(decision, Placed)


# soft rules outrank the policy


def _friend_on(cluster: Cluster, node_id: str) -> None:
    pin = NodeAffinitySchedulingStrategy(node_id)
    cluster.submit(make_actor("friend", 1, labels={"app": "friend"}, scheduling_strategy=pin))


SOFT_TOWARDS_N2: list[SchedulingStrategy] = [
    NodeLabelSchedulingStrategy(soft={"corral.io/hostname": "h2"}),
    NodeAffinitySchedulingStrategy("n2", soft=True),
    affinity("app", "IN", ["friend"], soft=True),
]
SOFT_IDS = ["a NodeLabel soft entry", "soft NodeAffinity", "soft actor affinity"]


@pytest.mark.parametrize("strategy", SOFT_TOWARDS_N2, ids=[f"{i} beats DEFAULT's packing" for i in SOFT_IDS])
def test_soft_weight_outranks_default_packing(strategy: SchedulingStrategy) -> None:
    cluster = make_cluster(3, cpu=10)
    _load(cluster, {"n0": 3, "n1": 3})
    _friend_on(cluster, "n2")
    assert cluster.submit(make_actor("plain")).id == "plain"
    assert cluster.placements()["plain"] in {"n0", "n1"}, "DEFAULT alone packs onto the busier nodes"
    assert cluster.submit(make_actor("a", scheduling_strategy=strategy)) == Placed("a", "n2")


@pytest.mark.parametrize("strategy", SOFT_TOWARDS_N2, ids=[f"{i} beats spreading to the idle nodes" for i in SOFT_IDS])
def test_soft_weight_outranks_spreading(strategy: SchedulingStrategy) -> None:
    cluster = make_cluster(3, cpu=10)
    _load(cluster, {"n2": 6})
    _friend_on(cluster, "n2")
    assert cluster.submit(make_actor("plain")).id == "plain"
    assert cluster.placements()["plain"] in {"n0", "n1"}, "DEFAULT alone spreads away from the busy node"
    assert cluster.submit(make_actor("a", scheduling_strategy=strategy)) == Placed("a", "n2")


def test_soft_weight_outranks_the_spread_policy() -> None:
    cluster = make_cluster(3, cpu=10)
    _load(cluster, {"n2": 6})
    strategy = NodeLabelSchedulingStrategy(soft={"corral.io/hostname": "h2"})
    assert cluster.submit(make_actor("a", scheduling_strategy=strategy)) == Placed("a", "n2")


# policies


def test_default_packs_small_actors_while_utilisation_stays_below_half() -> None:
    cluster = make_cluster(3, cpu=10)
    first = cluster.submit(make_actor("a0"))
    assert isinstance(first, Placed)
    for index in range(1, 4):
        assert cluster.submit(make_actor(f"a{index}")) == Placed(f"a{index}", first.node_id)
    fifth = cluster.submit(make_actor("a4"))
    assert isinstance(fifth, Placed)
    assert fifth.node_id != first.node_id, "a fifth CPU would bring the first node to half: DEFAULT moves on"


@pytest.mark.parametrize(
    ("policy", "used", "expected"),
    [
        (None, {"n0": 1, "n1": 2}, "n1"),
        ("DEFAULT", {"n0": 1, "n1": 2}, "n1"),
        ("DEFAULT", {"n0": 1, "n1": 4}, "n0"),
        ("DEFAULT", {"n0": 6, "n1": 2, "n2": 7}, "n1"),
        ("DEFAULT", {"n0": 5, "n1": 6, "n2": 7}, "n0"),
        ("DEFAULT", {"n0": 8, "n1": 6, "n2": 7}, "n1"),
        ("SPREAD", {"n0": 1, "n1": 2}, "n2"),
        ("SPREAD", {"n0": 3, "n1": 1, "n2": 2}, "n1"),
        ("SPREAD", {"n0": 5, "n1": 6, "n2": 7}, "n0"),
    ],
    ids=[
        "with no policy the most utilised node below half wins",
        "DEFAULT prefers the most utilised node below half",
        "DEFAULT passes over a node the actor would bring to half",
        "DEFAULT prefers a node below half to busier ones",
        "DEFAULT spreads to the least utilised node once every node is at least half used",
        "DEFAULT spreading picks a middle node when it is the least used",
        "SPREAD picks the idle node",
        "SPREAD picks the least utilised node",
        "SPREAD picks the least utilised node when all are busy",
    ],
)
def test_policies_order_nodes_by_utilisation(policy: str | None, used: dict[str, float], expected: str) -> None:
    cluster = make_cluster(3, cpu=10)
    _load(cluster, used)
    assert cluster.submit(make_actor("a", scheduling_strategy=policy)) == Placed("a", expected)


def test_spread_places_a_run_of_actors_on_distinct_nodes() -> None:
    cluster = make_cluster(3, cpu=10)
    for index in range(3):
        cluster.submit(make_actor(f"a{index}", scheduling_strategy="SPREAD"))
    assert sorted(cluster.placements().values()) == ["n0", "n1", "n2"]


def test_a_preferred_node_without_room_is_passed_over() -> None:
    cluster = make_cluster(2, cpu=4)
    _load(cluster, {"n1": 4})
    near = NodeAffinitySchedulingStrategy("n1", soft=True)
    assert cluster.submit(make_actor("a", scheduling_strategy=near)) == Placed("a", "n0")


# soft weight must not be lost to candidate sampling


def _large_cluster(seed: int) -> Cluster:
    """100 nodes (far more than one decision samples): only n42 has gpu=t4 and zone z-b; the rest disk=ssd, z-a."""
    cluster = Cluster(seed=seed)
    for index in range(100):
        labels = {"gpu": "t4"} if index == 42 else {"disk": "ssd"}
        cluster.add_node(f"n{index}", {"CPU": 4}, labels, zone="z-b" if index == 42 else "z-a")
    _friend_on(cluster, "n0")
    return cluster


@pytest.mark.parametrize(
    "strategy",
    [
        NodeLabelSchedulingStrategy(soft={"gpu": "t4"}),
        NodeLabelSchedulingStrategy(soft={"gpu": "in(t4,a100)"}),
        NodeAffinitySchedulingStrategy("n42", soft=True),
        NodeLabelSchedulingStrategy(soft={"gpu": "exists()"}),
        NodeLabelSchedulingStrategy(soft={"gpu": Exists()}),
        NodeLabelSchedulingStrategy(soft={"disk": "!ssd"}),
        NodeLabelSchedulingStrategy(soft={"disk": "!in(ssd,hdd)"}),
        NodeLabelSchedulingStrategy(soft={"disk": "!exists()"}),
        affinity("app", "NOT_IN", ["friend"], soft=True, topology_key="corral.io/availability-zone"),
    ],
    ids=[
        "in a large cluster the only node matching a soft v entry wins",
        "in a large cluster the only node matching a soft in() entry wins",
        "in a large cluster the softly affine node wins",
        "in a large cluster the only node matching a soft exists() entry wins",
        "in a large cluster the only node matching a soft Exists() entry wins",
        "in a large cluster the only node matching a soft !v entry wins",
        "in a large cluster the only node matching a soft !in() entry wins",
        "in a large cluster the only node matching a soft !exists() entry wins",
        "in a large cluster the only zone satisfying soft anti-affinity wins",
    ],
)
def test_soft_weight_always_wins_however_many_nodes_there_are(strategy: SchedulingStrategy) -> None:
    chosen = []
    for seed in range(10):
        cluster = _large_cluster(seed)
        decision = cluster.submit(make_actor("a", scheduling_strategy=strategy))
        assert isinstance(decision, Placed)
        chosen.append(decision.node_id)
    assert chosen == ["n42"] * 10


@pytest.mark.parametrize(
    ("policy", "load_n0", "load_n1"),
    [
        ("SPREAD", {"CPU": 1, "memory": 6}, {"CPU": 3, "memory": 1}),
        ("DEFAULT", {"CPU": 3, "memory": 6}, {"CPU": 1, "memory": 1}),
    ],
    ids=[
        "SPREAD judges a node by its most used resource, not by the one requested",
        "DEFAULT stops packing a node whose most used resource is past half",
    ],
)
def test_utilisation_is_the_most_used_resource(
    policy: str, load_n0: dict[str, float], load_n1: dict[str, float]
) -> None:
    cluster = Cluster()
    cluster.add_node("n0", {"CPU": 10, "memory": 10})
    cluster.add_node("n1", {"CPU": 10, "memory": 10})
    pin0, pin1 = NodeAffinitySchedulingStrategy("n0"), NodeAffinitySchedulingStrategy("n1")
    cluster.submit(ScheduleRequest("busy-n0", load_n0, scheduling_strategy=pin0))
    cluster.submit(ScheduleRequest("busy-n1", load_n1, scheduling_strategy=pin1))
    assert cluster.submit(make_actor("a", scheduling_strategy=policy)) == Placed("a", "n1")
