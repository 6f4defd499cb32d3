"""Placement groups: gang reservations under PACK, SPREAD, STRICT_PACK and STRICT_SPREAD, and actors inside them."""

from __future__ import annotations

import pytest

from schemas import (
    PlacementGroupRequest,
    PlacementGroupSchedulingStrategy,
    PlacementGroupSubmitted,
    PlacementStrategy,
    ScheduleRequest,
    SelectorSpec,
    Taint,
)
from services.core import Cluster, Pending, Placed
from services.core.request import MAX_BUNDLES
from tests.core.builders import disks, make_actor, make_cluster, node_of, on_node, waiting

SEEDS = range(4)
NOT_IN_BUNDLE = "didn't match the placement group bundle"
BUNDLE_SELECTOR = "didn't match the bundle label selector"


def group(
    pg_id: str,
    bundles: list[dict[str, float]],
    strategy: PlacementStrategy = "PACK",
    *,
    bundle_label_selector: list[SelectorSpec] | None = None,
    tolerations: SelectorSpec | None = None,
) -> PlacementGroupRequest:
    return PlacementGroupRequest(pg_id, bundles, strategy, bundle_label_selector or [], tolerations or {})


def bundle_nodes(decision: Placed | Pending) -> list[str]:
    assert isinstance(decision, Placed), f"expected the group to be placed, got {decision}"
    return decision.bundle_nodes


def in_bundle(actor_id: str, index: int = -1, *, cpu: float = 1, max_restarts: int = 0) -> ScheduleRequest:
    strategy = PlacementGroupSchedulingStrategy("pg", index)
    return make_actor(actor_id, cpu, scheduling_strategy=strategy, max_restarts=max_restarts)


@pytest.mark.parametrize(
    ("strategy", "bundles", "distinct"),
    [
        ("PACK", [{"CPU": 1}] * 3, 1),
        ("PACK", [{"CPU": 2}] * 3, 2),
        ("PACK", [{"CPU": 3}] * 2, 2),
        ("STRICT_PACK", [{"CPU": 2}] * 2, 1),
        ("STRICT_PACK", [{"CPU": 1}] * 4, 1),
        ("SPREAD", [{"CPU": 1}] * 3, 3),
        ("SPREAD", [{"CPU": 1}] * 4, 4),
        ("SPREAD", [{"CPU": 1}] * 6, 4),
        ("STRICT_SPREAD", [{"CPU": 1}] * 4, 4),
    ],
    ids=[
        "PACK puts bundles that fit on one node together",
        "PACK fills one node and spills the rest over as few nodes as it can",
        "PACK is best effort: bundles too big to share a node go on separate nodes",
        "STRICT_PACK puts all bundles on one node",
        "STRICT_PACK puts bundles that exactly fill a node on that node",
        "SPREAD puts each bundle on its own node when there are enough nodes",
        "SPREAD uses every node when there are exactly as many nodes as bundles",
        "SPREAD is best effort: with too few nodes it reuses them, still touching every node",
        "STRICT_SPREAD puts each bundle on its own node",
    ],
)
def test_the_strategy_decides_how_many_nodes_the_bundles_use(
    strategy: PlacementStrategy, bundles: list[dict[str, float]], distinct: int
) -> None:
    for seed in SEEDS:
        cluster = make_cluster(4, cpu=4, seed=seed)
        nodes = bundle_nodes(cluster.create_placement_group(group("pg", bundles, strategy)))
        assert len(nodes) == len(bundles)
        assert len(set(nodes)) == distinct, f"seed {seed}: {nodes}"
        assert cluster.placement_groups() == {"pg": nodes}


def test_strict_pack_picks_the_one_node_that_can_hold_every_bundle() -> None:
    for seed in SEEDS:
        cluster = make_cluster(4, cpu=4, seed=seed)
        for node in ("n0", "n1", "n2"):
            node_of(cluster.submit(make_actor(f"filler-{node}", 3, label_selector=on_node(node))))
        assert bundle_nodes(cluster.create_placement_group(group("pg", [{"CPU": 2}] * 2, "STRICT_PACK"))) == ["n3"] * 2


@pytest.mark.parametrize(
    ("strategy", "bundles", "group_reason"),
    [
        ("STRICT_PACK", [{"CPU": 3}] * 2, "STRICT_PACK: no single node can hold all 2 bundles"),
        ("STRICT_SPREAD", [{"CPU": 1}] * 5, "STRICT_SPREAD needs 5 distinct nodes but only 4 can take a bundle"),
        ("STRICT_SPREAD", [{"CPU": 1}] * 3 + [{"CPU": 8}], ""),
    ],
    ids=[
        "STRICT_PACK that fits on no node waits with a group-level reason",
        "STRICT_SPREAD with more bundles than nodes waits with a group-level reason naming both counts",
        "a group with a bundle no node can hold waits with per-node reasons",
    ],
)
def test_a_group_that_cannot_be_placed_says_why(
    strategy: PlacementStrategy, bundles: list[dict[str, float]], group_reason: str
) -> None:
    cluster = make_cluster(4, cpu=4)
    pending = waiting(cluster.create_placement_group(group("pg", bundles, strategy)))
    assert pending.kind == "placement_group"
    assert pending.group_reason == group_reason
    if group_reason:
        assert group_reason in pending.message
    assert sum(pending.reasons.values()) == 4
    assert [p.id for p in cluster.pending()] == ["pg"]


def test_strict_spread_counts_only_the_nodes_that_could_take_a_bundle() -> None:
    cluster = make_cluster(4, cpu=4)
    cluster.add_taints("n0", {"dedicated": "ml"})
    cluster.add_taints("n1", {"dedicated": "ml"})
    pending = waiting(cluster.create_placement_group(group("pg", [{"CPU": 1}] * 3, "STRICT_SPREAD")))
    assert pending.group_reason == "STRICT_SPREAD needs 3 distinct nodes but only 2 can take a bundle"
    assert pending.nodes_by_reason["had untolerated taint {dedicated: ml}"] == ["n0", "n1"]


def test_strict_pack_waits_for_room_and_takes_it_when_freed() -> None:
    cluster = make_cluster(2, cpu=4)
    for node in ("n0", "n1"):
        node_of(cluster.submit(make_actor(f"filler-{node}", 3, label_selector=on_node(node))))
    pending = waiting(cluster.create_placement_group(group("pg", [{"CPU": 2}] * 2, "STRICT_PACK")))
    assert pending.group_reason == ""
    assert pending.reasons == {"Insufficient CPU": 2}
    cluster.remove_actor("filler-n1")
    assert cluster.placement_groups() == {"pg": ["n1", "n1"]}


@pytest.mark.parametrize(
    ("strategy", "bundles"),
    [
        ("PACK", [{"CPU": 3}] * 3),
        ("SPREAD", [{"CPU": 3}] * 3),
        ("STRICT_SPREAD", [{"CPU": 1}] * 3),
        ("STRICT_PACK", [{"CPU": 2}] * 3),
        ("PACK", [{"CPU": 1}, {"GPU": 1}]),
    ],
    ids=[
        "a PACK group with one bundle too many reserves nothing",
        "a SPREAD group with one bundle too many reserves nothing",
        "a STRICT_SPREAD group with too few nodes reserves nothing",
        "a STRICT_PACK group too big for one node reserves nothing",
        "a group with one bundle no node can hold reserves nothing for the others",
    ],
)
def test_a_group_is_reserved_all_or_nothing(strategy: PlacementStrategy, bundles: list[dict[str, float]]) -> None:
    cluster = make_cluster(2, cpu=4)
    waiting(cluster.create_placement_group(group("pg", bundles, strategy)))
    assert cluster.placement_groups() == {}
    assert all(node.free == node.total for node in cluster.view.nodes.values())
    assert node_of(cluster.submit(make_actor("a", 4))) != node_of(cluster.submit(make_actor("b", 4)))


@pytest.mark.parametrize(
    ("strategy", "selectors", "expected_disks"),
    [
        ("PACK", [{"disk": "ssd"}, {"disk": "hdd"}], ["ssd", "hdd"]),
        ("SPREAD", [{"disk": "hdd"}, {"disk": "hdd"}, {}], ["hdd", "hdd", None]),
        ("STRICT_PACK", [{"disk": "ssd"}, {}], ["ssd", "ssd"]),
        ("STRICT_SPREAD", [{"disk": "ssd"}, {"disk": "ssd"}], ["ssd", "ssd"]),
        ("PACK", [{"disk": "!in(ssd)"}, {"disk": "in(ssd, nvme)"}], ["hdd", "ssd"]),
    ],
    ids=[
        "under PACK each bundle goes to a node its own selector matches",
        "under SPREAD the selected bundles stay on matching nodes while an unconstrained one goes anywhere",
        "under STRICT_PACK one bundle's selector pins the whole group",
        "under STRICT_SPREAD both selected bundles take the two matching nodes",
        "bundle selectors accept the full selector grammar",
    ],
)
def test_bundle_label_selector_i_constrains_bundle_i(
    strategy: PlacementStrategy, selectors: list[SelectorSpec], expected_disks: list[str | None]
) -> None:
    for seed in SEEDS:
        cluster = disks(seed)
        request = group("pg", [{"CPU": 1}] * len(selectors), strategy, bundle_label_selector=selectors)
        nodes = bundle_nodes(cluster.create_placement_group(request))
        for node, disk in zip(nodes, expected_disks, strict=True):
            if disk is not None:
                assert cluster.view.nodes[node].labels["disk"] == disk, f"seed {seed}: {nodes}"


@pytest.mark.parametrize(
    ("strategy", "selectors", "group_reason"),
    [
        ("PACK", [{"disk": "nvme"}, {}], ""),
        ("STRICT_SPREAD", [{"disk": "ssd"}] * 3, "STRICT_SPREAD needs 3 distinct nodes but only 2 can take a bundle"),
    ],
    ids=[
        "a bundle whose selector no node matches keeps the group waiting with the bundle-selector reason",
        "STRICT_SPREAD with more selected bundles than matching nodes waits with a group-level reason",
    ],
)
def test_a_bundle_selector_nothing_satisfies_keeps_the_group_waiting(
    strategy: PlacementStrategy, selectors: list[SelectorSpec], group_reason: str
) -> None:
    cluster = disks()
    request = group("pg", [{"CPU": 1}] * len(selectors), strategy, bundle_label_selector=selectors)
    pending = waiting(cluster.create_placement_group(request))
    assert pending.group_reason == group_reason
    assert BUNDLE_SELECTOR in pending.reasons
    assert sum(pending.reasons.values()) == 4


@pytest.mark.parametrize(
    ("tolerations", "placed"),
    [
        ({}, False),
        ({"gpu": "exists()"}, True),
        ({"gpu": "true"}, True),
        ({"gpu": "in(false, true)"}, True),
        ({"gpu": "false"}, False),
    ],
    ids=[
        "a group without tolerations keeps off tainted nodes",
        "a group tolerating the key with exists() may use tainted nodes",
        "a group tolerating the taint's value may use tainted nodes",
        "a group tolerating a list of values with the taint's value may use tainted nodes",
        "a group tolerating another value keeps off tainted nodes",
    ],
)
def test_a_group_honours_taints_through_its_tolerations(tolerations: SelectorSpec, placed: bool) -> None:
    cluster = make_cluster(3, cpu=4)
    for node in ("n0", "n1", "n2"):
        cluster.add_taints(node, [Taint("gpu", "true")])
    decision = cluster.create_placement_group(group("pg", [{"CPU": 1}] * 2, "SPREAD", tolerations=tolerations))
    if placed:
        assert len(bundle_nodes(decision)) == 2
    else:
        assert waiting(decision).reasons == {"had untolerated taint {gpu: true}": 3}


def test_an_actor_runs_on_the_node_of_the_bundle_it_names() -> None:
    for seed in SEEDS:
        cluster = make_cluster(4, cpu=4, seed=seed)
        nodes = bundle_nodes(cluster.create_placement_group(group("pg", [{"CPU": 2}] * 3, "STRICT_SPREAD")))
        for index in (2, 0, 1):
            decision = cluster.submit(in_bundle(f"a{index}", index=index))
            assert node_of(decision) == nodes[index], f"seed {seed}"
            assert isinstance(decision, Placed) and decision.bundle_index == index
        assert node_of(cluster.submit(in_bundle("any"))) in nodes


def test_a_bundle_holds_only_what_it_reserved() -> None:
    cluster = make_cluster(2, cpu=4)
    [node] = set(bundle_nodes(cluster.create_placement_group(group("pg", [{"CPU": 2}]))))
    node_of(cluster.submit(in_bundle("a1", index=0)))
    node_of(cluster.submit(in_bundle("a2", index=0)))
    pending = waiting(cluster.submit(in_bundle("a3", index=0)))
    assert pending.nodes_by_reason["Insufficient CPU"] == [node]
    assert pending.reasons == {"Insufficient CPU": 1, NOT_IN_BUNDLE: 1}
    cluster.remove_actor("a1")
    assert cluster.placements()["a3"] == node, "freeing room in the bundle places the waiting actor in that call"


def test_actors_inside_a_bundle_leave_the_rest_of_the_node_alone() -> None:
    cluster = make_cluster(1, cpu=4)
    bundle_nodes(cluster.create_placement_group(group("pg", [{"CPU": 2}])))
    node_of(cluster.submit(in_bundle("a1", index=0)))
    node_of(cluster.submit(in_bundle("a2", index=0)))
    assert node_of(cluster.submit(make_actor("outside", 2))) == "n0"
    assert waiting(cluster.submit(make_actor("too-much", 1))).reasons == {"Insufficient CPU": 1}


def test_an_actor_inside_a_bundle_needs_no_tolerations_of_its_own() -> None:
    cluster = make_cluster(2, cpu=4)
    for node in ("n0", "n1"):
        cluster.add_taints(node, {"dedicated": "ml"})
    bundle_nodes(cluster.create_placement_group(group("pg", [{"CPU": 2}], tolerations={"dedicated": "exists()"})))
    assert waiting(cluster.submit(make_actor("outside"))).reasons == {"had untolerated taint {dedicated: ml}": 2}
    node_of(cluster.submit(in_bundle("inside", index=0)))


def test_an_actor_waits_for_its_group_and_is_placed_by_the_call_that_places_it() -> None:
    cluster = make_cluster(3, cpu=4)
    pending = waiting(cluster.submit(in_bundle("a", index=1)))
    assert pending.group_reason == "placement group pg is not placed yet"
    assert pending.reasons == {NOT_IN_BUNDLE: 3}
    nodes = bundle_nodes(cluster.create_placement_group(group("pg", [{"CPU": 1}] * 2, "STRICT_SPREAD")))
    assert cluster.placements() == {"a": nodes[1]}


def test_an_actor_waits_for_a_pending_group_and_follows_it_when_a_node_joins() -> None:
    cluster = make_cluster(2, cpu=4)
    waiting(cluster.create_placement_group(group("pg", [{"CPU": 8}])))
    waiting(cluster.submit(in_bundle("a", index=0)))
    cluster.add_node("large", {"CPU": 8})
    assert cluster.placement_groups() == {"pg": ["large"]}
    assert cluster.placements() == {"a": "large"}


@pytest.mark.parametrize(
    ("restarts", "comes_back"),
    [(1, True), (0, False)],
    ids=[
        "a bundle lost with its node is reserved again elsewhere and its actor with restarts left restarts there",
        "a bundle lost with its node is reserved again elsewhere and its actor without restarts is gone",
    ],
)
def test_a_bundle_lost_with_its_node_is_reserved_again(restarts: int, comes_back: bool) -> None:
    for seed in SEEDS:
        cluster = make_cluster(3, cpu=4, seed=seed)
        first = bundle_nodes(cluster.create_placement_group(group("pg", [{"CPU": 2}] * 2, "STRICT_SPREAD")))
        node_of(cluster.submit(in_bundle("lost", index=0, max_restarts=restarts)))
        node_of(cluster.submit(in_bundle("kept", index=1)))
        cluster.remove_node(first[0])
        again = cluster.placement_groups()["pg"]
        assert again[1] == first[1], "the surviving bundle stays where it is"
        assert again[0] not in {first[0], first[1]}
        expected = {"kept": first[1], "lost": again[0]} if comes_back else {"kept": first[1]}
        assert cluster.placements() == expected, f"seed {seed}"


def test_a_strict_pack_group_that_loses_its_node_is_reserved_again_whole_on_one_node() -> None:
    cluster = make_cluster(3, cpu=4)
    [first] = set(bundle_nodes(cluster.create_placement_group(group("pg", [{"CPU": 2}] * 2, "STRICT_PACK"))))
    node_of(cluster.submit(in_bundle("a", 1, max_restarts=1)))
    cluster.remove_node(first)
    [again] = set(cluster.placement_groups()["pg"])
    assert again != first
    assert cluster.placements() == {"a": again}


def test_a_bundle_on_a_node_given_an_untolerated_no_execute_taint_is_reserved_again() -> None:
    cluster = make_cluster(3, cpu=4)
    first = bundle_nodes(cluster.create_placement_group(group("pg", [{"CPU": 2}] * 2, "STRICT_SPREAD")))
    node_of(cluster.submit(in_bundle("a", 0, max_restarts=1)))
    cluster.add_taints(first[0], [Taint("drain", "now", "NoExecute")])
    again = cluster.placement_groups()["pg"]
    assert again[0] not in first
    assert again[1] == first[1]
    assert cluster.placements() == {"a": again[0]}


def test_a_bundle_stays_on_a_node_given_a_no_execute_taint_the_group_tolerates() -> None:
    cluster = make_cluster(3, cpu=4)
    request = group("pg", [{"CPU": 2}] * 2, "STRICT_SPREAD", tolerations={"drain": "exists()"})
    first = bundle_nodes(cluster.create_placement_group(request))
    node_of(cluster.submit(in_bundle("a", 0)))
    cluster.add_taints(first[0], [Taint("drain", "now", "NoExecute")])
    assert cluster.placement_groups() == {"pg": first}
    assert cluster.placements() == {"a": first[0]}


def test_removing_a_group_frees_its_reservations_and_stops_its_actors() -> None:
    cluster = make_cluster(2, cpu=4)
    bundle_nodes(cluster.create_placement_group(group("pg", [{"CPU": 3}] * 2, "STRICT_SPREAD")))
    node_of(cluster.submit(in_bundle("inside", 0, max_restarts=-1)))
    assert waiting(cluster.submit(make_actor("outside", 4))).reasons == {"Insufficient CPU": 2}
    cluster.remove_placement_group("pg")
    assert cluster.placement_groups() == {}
    assert set(cluster.placements()) == {"outside"}, "the outside actor is placed by that call; the inside one stops"
    assert node_of(cluster.submit(make_actor("second", 4))) != cluster.placements()["outside"]


@pytest.mark.parametrize(
    "strategy",
    ["PACK", "SPREAD", "STRICT_SPREAD"],
    ids=[
        "a PACK group that fits only with its small bundle on the small node is placed",
        "a SPREAD group that fits only with its small bundle on the small node is placed",
        "a STRICT_SPREAD group that fits only with its small bundle on the small node is placed",
    ],
)
def test_a_group_that_fits_is_placed_whatever_the_order_of_its_bundles(strategy: PlacementStrategy) -> None:
    cluster = Cluster()
    cluster.add_node("big", {"CPU": 4})
    cluster.add_node("small", {"CPU": 1})
    assert bundle_nodes(cluster.create_placement_group(group("pg", [{"CPU": 1}, {"CPU": 4}], strategy))) == [
        "small",
        "big",
    ]


def test_strict_spread_places_a_group_whose_bundle_selectors_leave_one_valid_assignment() -> None:
    for seed in SEEDS:
        cluster = disks(seed)
        cluster.remove_node("n1")
        cluster.remove_node("n3")
        request = group("pg", [{"CPU": 1}] * 2, "STRICT_SPREAD", bundle_label_selector=[{}, {"disk": "ssd"}])
        assert bundle_nodes(cluster.create_placement_group(request)) == ["n2", "n0"], f"seed {seed}"


def test_pack_puts_every_bundle_on_one_node_when_some_node_can_hold_them_all() -> None:
    cluster = Cluster()
    cluster.add_node("n0", {"CPU": 8})
    cluster.add_node("n1", {"CPU": 16})
    node_of(cluster.submit(make_actor("busy", 2, label_selector=on_node("n0"))))
    assert bundle_nodes(cluster.create_placement_group(group("pg", [{"CPU": 1}] * 8))) == ["n1"] * 8


@pytest.mark.parametrize("strategy", ["PACK", "SPREAD", "STRICT_SPREAD"])
def test_a_group_of_the_most_bundles_accepted_is_placed_in_one_decision(strategy: PlacementStrategy) -> None:
    """1,000 bundles on 40 nodes (SPREAD reuses nodes once every node has one; STRICT_SPREAD cannot fit and waits,
    saying why). Before, each bundle re-checked every node used so far, or every node: a group of 40,000 held
    the decision for minutes."""
    cluster = make_cluster(40, cpu=32)
    decision = cluster.create_placement_group(group("big", [{"CPU": 1}] * MAX_BUNDLES, strategy))
    if strategy == "STRICT_SPREAD":
        assert isinstance(decision, Pending)
        assert decision.group_reason == "STRICT_SPREAD needs 1000 distinct nodes but only 40 can take a bundle"
        return
    nodes = bundle_nodes(decision)
    assert len(nodes) == MAX_BUNDLES
    if strategy == "SPREAD":
        assert set(nodes) == set(cluster.view.nodes)  # every node before any twice
    else:
        assert len(set(nodes)) == MAX_BUNDLES // 32 + 1  # each node filled before the next is opened


def test_a_group_past_the_bundle_limit_already_in_the_log_is_folded_and_placed_when_room_comes() -> None:
    """The limit is for new requests only: a group in the log from before it (or a lower one) folds as it did, and
    a retry places it."""
    big = group("big", [{"CPU": 1}] * (MAX_BUNDLES + 500), "SPREAD")
    cluster = Cluster.from_events([PlacementGroupSubmitted(request=big)])
    assert [p.id for p in cluster.pending()] == ["big"]
    cluster.add_node("n1", {"CPU": 2_000})
    assert cluster.placement_groups()["big"] == ["n1"] * (MAX_BUNDLES + 500)
