"""DataFlow affinity inheritance (proposal 003): a later operation runs on, or near, the node an earlier one ran on."""

from __future__ import annotations

import pytest

from schemas import (
    NodeAffinitySchedulingStrategy,
    NodeLabelSchedulingStrategy,
    PlacementGroupRequest,
    Prefer,
    RunAfter,
    ScheduleRequest,
)
from services.core import Cluster, ClusterView, Placed
from services.core.state.snapshot import digest, dump, restore
from tests.core.builders import SIX_NODES, ZONE_OF_N2, make_actor, node_of, on_node, six_nodes, waiting

HOSTNAME = "corral.io/hostname"
ZONE = "corral.io/availability-zone"
DATAFLOW = "didn't match the DataFlow affinity"
SEEDS = range(4)

# six_nodes() gives n0..n5 hostnames h0..h5 and zones z0 {n0, n3}, z1 {n1, n4}, z2 {n2, n5}, 8 CPUs each.
# An earlier operation of 6 CPUs on n2 makes n2 a node the DEFAULT policy spreads away from, so a later operation
# lands there only because of the DataFlow rule.
REPELS = 6


def earlier(cpu: float = REPELS, node: str = "n2") -> ScheduleRequest:
    """The earlier operation, held on `node` by node affinity (which records no extra label keys)."""
    return make_actor("A", cpu, scheduling_strategy=NodeAffinitySchedulingStrategy(node))


@pytest.mark.parametrize(
    ("run_after", "allowed"),
    [
        (RunAfter("A", "Require"), {"n2"}),
        (RunAfter("A", "Require", require=[HOSTNAME]), {"n2"}),
        (RunAfter("A", "Require", require=[ZONE]), ZONE_OF_N2),
        (RunAfter("A", "Require", require=[ZONE, HOSTNAME]), {"n2"}),
    ],
    ids=[
        "Require without keys lands on the earlier operation's host",
        "Require on the hostname lands on the earlier operation's host",
        "Require on the zone lands in the earlier operation's zone",
        "Require on the zone and the hostname needs both to match",
    ],
)
def test_require_inherits_the_earlier_operations_location(run_after: RunAfter, allowed: set[str]) -> None:
    for seed in SEEDS:
        cluster = six_nodes(seed)
        assert node_of(cluster.submit(earlier())) == "n2"
        assert node_of(cluster.submit(make_actor("B", run_after=run_after))) in allowed, f"seed {seed}"


def test_require_on_the_zone_takes_another_node_of_the_zone_when_the_earlier_host_is_full() -> None:
    cluster = six_nodes()
    node_of(cluster.submit(earlier(cpu=8)))
    assert node_of(cluster.submit(make_actor("B", run_after=RunAfter("A", "Require", require=[ZONE])))) == "n5"


def test_require_on_the_host_waits_when_the_earlier_host_is_full() -> None:
    cluster = six_nodes()
    node_of(cluster.submit(earlier(cpu=8)))
    pending = waiting(cluster.submit(make_actor("B", run_after=RunAfter("A", "Require"))))
    assert pending.reasons == {"Insufficient CPU": 1, DATAFLOW: 5}
    assert pending.nodes_by_reason["Insufficient CPU"] == ["n2"]


def racks(seed: int = 0) -> Cluster:
    """n0, n1 in rack r0 and n2, n3 in rack r1; n4 has no rack label."""
    cluster = Cluster(seed=seed)
    for index, rack in enumerate(["r0", "r0", "r1", "r1", None]):
        labels = {"rack": rack} if rack else {}
        cluster.add_node(f"n{index}", {"CPU": 8}, labels=labels, hostname=f"h{index}", zone="z0")
    return cluster


@pytest.mark.parametrize(
    "earlier_request",
    [
        make_actor("A", 8, label_selector={"rack": "r1"}),
        make_actor("A", 8, label_selector={"rack": "in(r1, r9)"}),
        make_actor("A", 8, scheduling_strategy=NodeLabelSchedulingStrategy(hard={"rack": "r1"})),
        make_actor("A", 8, scheduling_strategy=NodeLabelSchedulingStrategy(soft={"rack": "r1"})),
    ],
    ids=[
        "a rack key in the earlier operation's label selector is recorded and can be required",
        "a rack key selected with in() is recorded with the node's value and can be required",
        "a rack key in the earlier operation's hard node-label strategy is recorded and can be required",
        "a rack key in the earlier operation's soft node-label strategy is recorded and can be required",
    ],
)
def test_a_custom_key_the_earlier_operation_selected_on_can_be_required(earlier_request: ScheduleRequest) -> None:
    for seed in SEEDS:
        cluster = racks(seed)
        first = node_of(cluster.submit(earlier_request))
        assert cluster.view.nodes[first].labels["rack"] == "r1"
        later = node_of(cluster.submit(make_actor("B", run_after=RunAfter("A", "Require", require=["rack"]))))
        assert later != first
        assert cluster.view.nodes[later].labels.get("rack") == "r1", f"seed {seed}"


@pytest.mark.parametrize(
    ("earlier_request", "require"),
    [
        (make_actor("A", 8, scheduling_strategy=NodeAffinitySchedulingStrategy("n2")), ["rack"]),
        (make_actor("A", 8, label_selector={"rack": "!exists()"}), ["rack"]),
        (
            make_actor(
                "A",
                8,
                label_selector=on_node("n4"),
                scheduling_strategy=NodeLabelSchedulingStrategy(soft={"rack": "r9"}),
            ),
            ["rack"],
        ),
        (make_actor("A", 8, label_selector={"rack": "!exists()"}), ["corral.io/availability-region"]),
        (make_actor("A", 8, label_selector={"rack": "!exists()"}), ["rack", "corral.io/availability-region"]),
    ],
    ids=[
        "a key the earlier operation never named is not recorded and constrains nothing",
        "a named key the earlier operation's node lacks is not recorded and constrains nothing",
        "a soft key the earlier operation's node lacks is not recorded and constrains nothing",
        "a region the earlier operation's node was registered without constrains nothing",
        "several keys that were not recorded constrain nothing together",
    ],
)
def test_a_key_that_was_not_recorded_constrains_nothing(earlier_request: ScheduleRequest, require: list[str]) -> None:
    cluster = racks()
    node_of(cluster.submit(earlier_request))
    later = make_actor("B", run_after=RunAfter("A", "Require", require=require), label_selector=on_node("n0"))
    assert node_of(cluster.submit(later)) == "n0"


def test_a_missing_hostname_on_the_earlier_node_makes_the_default_require_constrain_nothing() -> None:
    cluster = Cluster()
    cluster.add_node("bare", {"CPU": 8})
    cluster.add_node("named", {"CPU": 8}, hostname="h1")
    node_of(cluster.submit(earlier(cpu=8, node="bare")))
    assert node_of(cluster.submit(make_actor("B", run_after=RunAfter("A", "Require")))) == "named"


def test_a_key_recorded_on_the_earlier_node_binds_even_when_the_later_request_prefers_otherwise() -> None:
    cluster = racks()
    node_of(cluster.submit(make_actor("A", 8, label_selector={"rack": "r1"})))
    later = make_actor("B", run_after=RunAfter("A", "Require", require=["rack"]), label_selector=on_node("n0"))
    pending = waiting(cluster.submit(later))
    assert pending.nodes_by_reason[DATAFLOW] == ["n0"]


@pytest.mark.parametrize(
    "run_after",
    [RunAfter("A", "Require"), RunAfter("A", "Require", require=[ZONE])],
    ids=[
        "Require on the host waits for an earlier operation that is not placed, and follows it when it is",
        "Require on the zone waits for an earlier operation that is not placed, and follows it when it is",
    ],
)
def test_require_waits_until_the_earlier_operation_is_placed(run_after: RunAfter) -> None:
    cluster = six_nodes()
    pending = waiting(cluster.submit(make_actor("B", run_after=run_after)))
    assert pending.reasons == {DATAFLOW: 6}
    assert pending.message == f"0/6 nodes are available: 6 node(s) {DATAFLOW}."
    node_of(cluster.submit(earlier()))
    placements = cluster.placements()
    assert "B" in placements, "the submit that placed the earlier operation should have placed the later one"
    key = run_after.require[0] if run_after.require else HOSTNAME
    nodes = cluster.view.nodes
    assert nodes[placements["B"]].labels[key] == nodes["n2"].labels[key]


def test_require_follows_an_earlier_operation_placed_by_a_node_joining() -> None:
    cluster = six_nodes()
    waiting(cluster.submit(make_actor("B", run_after=RunAfter("A", "Require"))))
    waiting(cluster.submit(make_actor("A", 12)))
    cluster.add_node("large", {"CPU": 16}, hostname="big")
    assert cluster.placements() == {"A": "large", "B": "large"}


@pytest.mark.parametrize(
    ("earlier_cpu", "run_after", "allowed"),
    [
        (REPELS, RunAfter("A", "Prefer"), {"n2"}),
        (REPELS, RunAfter("A", "Prefer", prefer=[Prefer(HOSTNAME, 100)]), {"n2"}),
        (REPELS, RunAfter("A", "Prefer", prefer=[Prefer(ZONE, 50)]), ZONE_OF_N2),
        (REPELS, RunAfter("A", "Prefer", prefer=[Prefer(ZONE, 10), Prefer(HOSTNAME, 5)]), {"n2"}),
        (8, RunAfter("A", "Prefer"), SIX_NODES - {"n2"}),
        (8, RunAfter("A", "Prefer", prefer=[Prefer(ZONE, 50)]), {"n5"}),
    ],
    ids=[
        "Prefer without keys prefers the earlier operation's host",
        "Prefer on the hostname prefers the earlier operation's host",
        "Prefer on the zone prefers the earlier operation's zone",
        "Prefer weights add up, so the host in the zone beats the rest of the zone",
        "Prefer never blocks: with the preferred host full the operation lands elsewhere",
        "Prefer on the zone with the earlier host full takes the other node of the zone",
    ],
)
def test_prefer_adds_weight_and_never_blocks(earlier_cpu: int, run_after: RunAfter, allowed: set[str]) -> None:
    for seed in SEEDS:
        cluster = six_nodes(seed)
        node_of(cluster.submit(earlier(cpu=earlier_cpu)))
        assert node_of(cluster.submit(make_actor("B", run_after=run_after))) in allowed, f"seed {seed}"


@pytest.mark.parametrize(
    ("run_after", "allowed"),
    [
        (RunAfter("A", ""), SIX_NODES - {"n2"}),
        (RunAfter("A", "", require=[HOSTNAME], prefer=[Prefer(HOSTNAME, 100)]), SIX_NODES - {"n2"}),
        (RunAfter("A", "Prefer"), {"n2"}),
        (RunAfter("A", "Require"), {"n2"}),
    ],
    ids=[
        "the empty policy inherits nothing, so the SPREAD policy picks an emptier node",
        "the empty policy ignores require and prefer keys",
        "Prefer outranks the SPREAD policy",
        "Require outranks the SPREAD policy",
    ],
)
def test_the_empty_policy_inherits_nothing(run_after: RunAfter, allowed: set[str]) -> None:
    for seed in SEEDS:
        cluster = six_nodes(seed)
        node_of(cluster.submit(earlier(cpu=1)))
        later = make_actor("B", run_after=run_after, scheduling_strategy="SPREAD")
        assert node_of(cluster.submit(later)) in allowed, f"seed {seed}"


@pytest.mark.parametrize(
    "run_after",
    [RunAfter("A", ""), RunAfter("A", "Prefer")],
    ids=[
        "the empty policy does not wait for an earlier operation that was never placed",
        "Prefer does not wait for an earlier operation that was never placed",
    ],
)
def test_only_require_waits_for_the_earlier_operation(run_after: RunAfter) -> None:
    decision = six_nodes().submit(make_actor("B", run_after=run_after))
    assert isinstance(decision, Placed), decision


@pytest.mark.parametrize(
    "run_after",
    [RunAfter("A", "Require"), RunAfter("A", "Prefer"), RunAfter("A", "Require", require=[ZONE])],
    ids=[
        "Require still follows an earlier operation that has finished",
        "Prefer still follows an earlier operation that has finished",
        "Require on the zone still follows an earlier operation that has finished",
    ],
)
def test_a_finished_earlier_operation_still_counts(run_after: RunAfter) -> None:
    for seed in SEEDS:
        cluster = six_nodes(seed)
        node_of(cluster.submit(earlier(cpu=1)))
        cluster.remove_actor("A")
        node_of(cluster.submit(make_actor("filler", 7, label_selector=on_node("n2"))))  # n2 now repels the policy
        later = node_of(cluster.submit(make_actor("B", run_after=run_after)))
        assert cluster.view.nodes[later].labels[ZONE] == "z2", f"seed {seed}"
        if not run_after.require:
            assert later == "n2", f"seed {seed}"


def test_require_after_a_placement_group_constrains_nothing_since_groups_record_nothing() -> None:
    cluster = six_nodes()
    assert cluster.create_placement_group(PlacementGroupRequest("pg", [{"CPU": 1}]))
    node_of(cluster.submit(make_actor("B", run_after=RunAfter("pg", "Require"))))


def test_require_follows_the_earlier_operation_to_where_it_was_placed_last() -> None:
    for seed in SEEDS:
        cluster = six_nodes(seed)
        node_of(cluster.submit(make_actor("A", REPELS, max_restarts=1)))
        first = cluster.placements()["A"]
        cluster.add_taints(first, {"maintenance": "true"})
        cluster.fail_actor("A")
        moved = cluster.placements()["A"]
        assert moved != first
        assert node_of(cluster.submit(make_actor("B", run_after=RunAfter("A", "Require")))) == moved, f"seed {seed}"


def test_records_of_ended_operations_are_kept_up_to_a_bound_and_replay_drops_the_same_ones() -> None:
    """A long-running cluster does not keep every ended operation's record: the oldest go first."""
    cluster = six_nodes()
    cluster.view.footprints_kept = 2
    for name in ("A", "B", "C"):
        cluster.submit(make_actor(name))
        cluster.remove_actor(name)
    cluster.submit(make_actor("live"))
    assert set(cluster.view.footprints) == {"B", "C", "live"}  # A was the oldest ended one; live ones always stay
    late = cluster.submit(make_actor("late", run_after=RunAfter("A", "Require")))
    assert DATAFLOW in waiting(late).reasons  # a dropped record reads as an operation that never ran
    d_node = node_of(cluster.submit(make_actor("D", run_after=RunAfter("C", "Require"))))
    assert cluster.view.nodes[d_node].labels[HOSTNAME] == cluster.view.footprints["C"][HOSTNAME]
    view = ClusterView(cluster.seed)
    view.footprints_kept = 2
    for event in cluster.events():
        view.fold(event)
    assert digest(view) == digest(cluster.view)
    assert digest(restore(dump(view))) == digest(view)
