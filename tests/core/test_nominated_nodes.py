"""Nominated nodes: the node a launch was for takes the work the autoscaler launched it for, holds its room from other
work meanwhile, and stops holding it when the launch or the work ends."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from schemas import (
    AnyEvent,
    LaunchesNominated,
    NodeDied,
    NodeLabelSchedulingStrategy,
    NodeLaunchFailed,
    NodeRegistered,
    NodesLaunchRequested,
    PlacementGroupRequest,
    ScheduleRequest,
    VirtualCluster,
)
from services.autoscaler.handlers import Decider
from services.core import Cluster
from services.core.autoscale import Fleet, parse_config, plan
from services.core.labels import LAUNCH_ID, NODE_TYPE
from services.core.state.nominations import nominated_nodes
from services.core.state.snapshot import digest, dump, restore


def launch(nominated: dict[str, dict[str, dict[str, float]]], at: float = 0.0) -> NodesLaunchRequested:
    """The autoscaler asks (at time `at`) for one cpu-4 per launch id, nominated for the work named."""
    ids = sorted(nominated)
    return NodesLaunchRequested(
        node_type="cpu-4", launch_ids=ids, reason="test", work=[], nominated=nominated, requested_at=at
    )


def registered(node_id: str, launch_id: str = "", cpu: float = 4, **labels: str) -> NodeRegistered:
    """A 4-CPU node registering (for `launch_id`, when given)."""
    if launch_id:
        labels |= {NODE_TYPE: "cpu-4", LAUNCH_ID: launch_id}
    return NodeRegistered(node_id=node_id, resources={"CPU": cpu}, labels=labels)


def actor(actor_id: str, cpu: float = 4, priority: int = 0, **options: object) -> ScheduleRequest:
    return ScheduleRequest(actor_id, {"CPU": cpu}, priority=priority, **options)  # type: ignore[arg-type]


def chosen_despite_a_better_node(cluster: Cluster) -> None:
    cluster.submit(actor("a", 1, scheduling_strategy=NodeLabelSchedulingStrategy(soft={"pool": "fast"})))
    cluster.fold(launch({"L1": {"a": {"CPU": 1}}}))
    cluster.fold(registered("fast", cpu=8, pool="fast"), react=False)
    cluster.fold(registered("n1", "L1"), react=False)
    cluster.reconcile()


def held_from_earlier_work(cluster: Cluster, priority: int = 0) -> None:
    cluster.submit(actor("b", priority=priority))
    cluster.submit(actor("a"))
    cluster.fold(launch({"L1": {"a": {"CPU": 4}}}))
    cluster.fold(registered("n1", "L1"))


def taken_by_higher_priority_work(cluster: Cluster) -> None:
    held_from_earlier_work(cluster, priority=1)


def free_after_the_launch_failed(cluster: Cluster) -> None:
    cluster.submit(actor("b"))
    cluster.submit(actor("a"))
    cluster.fold(launch({"L1": {"a": {"CPU": 4}}}))
    cluster.fold(NodeLaunchFailed(launch_id="L1", reason="not registered within 120s"))
    cluster.fold(registered("n1", "L1"))


def free_after_the_node_died(cluster: Cluster) -> None:
    cluster.submit(actor("b"))
    cluster.submit(actor("a", 8))
    cluster.fold(launch({"L1": {"a": {"CPU": 4}}, "L2": {"a": {"CPU": 4}}}))
    cluster.fold(registered("n1", "L1"), react=False)
    cluster.fold(NodeDied(node_id="n1"), react=False)
    cluster.fold(registered("n2", "L2"), react=False)
    cluster.fold(registered("plain"), react=False)
    cluster.reconcile()


def free_once_the_work_is_removed(cluster: Cluster) -> None:
    cluster.submit(actor("b"))
    cluster.submit(actor("a", 5))
    cluster.fold(launch({"L1": {"a": {"CPU": 4}}}))
    cluster.fold(registered("n1", "L1"))
    cluster.remove_actor("a")


def group_waits_for_every_node(cluster: Cluster) -> None:
    cluster.fold(registered("old", cpu=1), react=False)
    cluster.create_placement_group(PlacementGroupRequest("pg", [{"CPU": 2}, {"CPU": 2}], "STRICT_SPREAD"))
    cluster.fold(launch({"L1": {"pg": {"CPU": 2}}, "L2": {"pg": {"CPU": 2}}}))
    cluster.fold(registered("n1", "L1"))
    cluster.submit(actor("b", 3))
    cluster.fold(registered("n2", "L2"))


CASES = [
    pytest.param(chosen_despite_a_better_node, {"a": "n1"}, id="a nominated node is chosen over a better-scoring one"),
    pytest.param(held_from_earlier_work, {"a": "n1"}, id="room a nominated node holds is not taken by earlier work"),
    pytest.param(taken_by_higher_priority_work, {"b": "n1"}, id="work of higher priority may take room held for lower"),
    pytest.param(free_after_the_launch_failed, {"b": "n1"}, id="a failed launch's late node holds nothing"),
    pytest.param(
        free_after_the_node_died, {"b": "plain"}, id="a dead nominated node gives its nomination up, the others hold"
    ),
    pytest.param(free_once_the_work_is_removed, {"b": "n1"}, id="removed work gives the room held for it back"),
    pytest.param(
        group_waits_for_every_node,
        {},
        id="a placement group waits for every node launched for it, and others keep off its room",
    ),
]


@pytest.mark.parametrize(("story", "placements"), CASES)
def test_nominated_nodes(story: Callable[[Cluster], None], placements: dict[str, str]) -> None:
    cluster = Cluster()
    story(cluster)
    assert cluster.placements() == placements


def test_a_placement_group_takes_the_nodes_launched_for_it_once_all_registered() -> None:
    cluster = Cluster()
    group_waits_for_every_node(cluster)
    assert cluster.placement_groups() == {"pg": ["n1", "n2"]}


def test_a_placement_group_says_which_launch_it_waits_for() -> None:
    cluster = Cluster()
    cluster.create_placement_group(PlacementGroupRequest("pg", [{"CPU": 2}, {"CPU": 2}], "STRICT_SPREAD"))
    cluster.fold(launch({"L1": {"pg": {"CPU": 2}}, "L2": {"pg": {"CPU": 2}}}))
    cluster.fold(registered("n1", "L1"))
    (pending,) = cluster.pending()
    assert pending.message.startswith("the autoscaler is launching cpu-4 for it (launch L2)")


def test_an_actor_says_which_launch_it_waits_for() -> None:
    cluster = Cluster()
    cluster.submit(actor("a", 2))
    cluster.fold(launch({"L1": {"a": {"CPU": 2}}}))
    (pending,) = cluster.pending()
    assert pending.message.startswith("the autoscaler is launching cpu-4 for it (launch L1); 0/0 nodes are available")


def test_work_a_launch_is_for_never_reads_no_node_could_ever_host_it() -> None:
    cluster = Cluster()
    cluster.fold(registered("small", cpu=1))
    cluster.submit(actor("a", 2))
    assert cluster.pending()[0].message.startswith("no node could ever host it")  # true: nothing is coming
    cluster.fold(launch({"L1": {"a": {"CPU": 2}}}))
    (pending,) = cluster.pending()
    assert pending.message.startswith("the autoscaler is launching cpu-4 for it (launch L1); 0/1 nodes are")
    assert "ever" not in pending.message


def test_nominations_survive_a_snapshot_with_the_same_digest_and_effect() -> None:
    cluster = Cluster()
    cluster.submit(actor("b"))
    cluster.submit(actor("a"))
    cluster.fold(launch({"L1": {"a": {"CPU": 4}}}))
    cluster.fold(registered("n1", "L1"), react=False)
    view = cluster.view
    again = restore(dump(view))
    assert digest(again) == digest(view)
    assert (again.nominations, again.held) == ({"a": ["L1"]}, {"n1": {"a": (0, {"CPU": 4.0})}})
    restored = Cluster.from_view(again)
    restored.reconcile()
    assert restored.placements() == {"a": "n1"}


def test_work_whose_launch_failed_takes_room_on_another_launched_node_at_once() -> None:
    cluster = Cluster()
    cluster.submit(actor("a", 2))
    cluster.submit(actor("b", 2))
    cluster.fold(launch({"L1": {"a": {"CPU": 2}}, "L2": {"b": {"CPU": 2}}}))
    cluster.fold(registered("n2", "L2"))
    assert cluster.placements() == {"b": "n2"}
    cluster.fold(NodeLaunchFailed(launch_id="L1", reason="not registered within 120s"))
    assert cluster.placements() == {"a": "n2", "b": "n2"}


def test_work_nominated_to_a_launch_still_coming_keeps_off_other_launched_nodes() -> None:
    cluster = Cluster()
    cluster.submit(actor("a", 2))
    cluster.submit(actor("b", 2))
    cluster.fold(launch({"L1": {"a": {"CPU": 2}}, "L2": {"b": {"CPU": 2}}}))
    cluster.fold(registered("n1", "L1"))
    assert cluster.placements() == {"a": "n1"}
    cluster.fold(registered("n2", "L2"))
    assert cluster.placements() == {"a": "n1", "b": "n2"}


def test_room_freed_on_a_node_launched_in_an_earlier_round_is_open_to_work_awaiting_its_launch() -> None:
    cluster = Cluster()
    cluster.submit(actor("old-work", 4))
    cluster.fold(launch({"L1": {"old-work": {"CPU": 4}}}, at=1.0))
    cluster.fold(registered("n1", "L1"))
    cluster.submit(actor("a", 2))
    cluster.fold(launch({"L2": {"a": {"CPU": 2}}}, at=2.0))
    cluster.remove_actor("old-work")
    assert cluster.placements() == {"a": "n1"}


SCALING = parse_config("node_types:\n  cpu-4:\n    resources: {CPU: 4}\n    max_workers: 5\n")


def autoscaler_round(cluster: Cluster, now: float) -> list[AnyEvent]:
    """One autoscaler round on the cluster's view at `now`, its decisions folded; the decisions."""
    events = Decider(SCALING, (), 1.0).decide(cluster.view, now, {}).events
    for event in events:
        cluster.fold(event)
    return events


def two_rounds(cluster: Cluster) -> list[AnyEvent]:
    """Round 1 launches L1 for `a` (2 CPU); then `b` and `c` (2 CPU each) come, and round 2 counts `c` on L1 and
    launches L2 for `b` (the scheduler spreads `b`, re-tried first, once L1 is half full); L1 registers before L2.
    `b` came first: without `c`'s nomination, it would take the room round 2 counted on for `c`."""
    cluster.submit(actor("a", 2))
    autoscaler_round(cluster, 1.0)
    cluster.submit(actor("b", 2))
    cluster.submit(actor("c", 2))
    second = autoscaler_round(cluster, 2.0)
    cluster.fold(registered("n1", "L1"))
    return second


def test_work_a_later_round_counts_on_a_launching_node_lands_there_though_earlier_work_competes() -> None:
    cluster = Cluster()
    second = two_rounds(cluster)
    nominated = [event for event in second if isinstance(event, LaunchesNominated)]
    assert [event.nominated for event in nominated] == [{"L1": {"c": {"CPU": 2.0}}}]
    assert cluster.placements() == {"a": "n1", "c": "n1"}
    cluster.fold(registered("n2", "L2"))
    assert cluster.placements() == {"a": "n1", "b": "n2", "c": "n1"}


def test_a_round_that_counts_work_on_a_launch_already_nominated_for_it_decides_nothing_new() -> None:
    cluster = Cluster()
    cluster.submit(actor("a", 2))
    autoscaler_round(cluster, 1.0)
    cluster.submit(actor("b", 2))
    cluster.submit(actor("c", 2))
    assert autoscaler_round(cluster, 2.0)
    assert autoscaler_round(cluster, 3.0) == []


def test_nominations_added_to_a_launch_fold_alike_twice_and_from_a_snapshot() -> None:
    cluster = Cluster()
    cluster.submit(actor("a", 2))
    cluster.submit(actor("c", 2))
    cluster.fold(launch({"L1": {"a": {"CPU": 2}}}))
    added = LaunchesNominated(nominated={"L1": {"c": {"CPU": 2}}})
    cluster.fold(added)
    once = digest(cluster.view)
    cluster.fold(added)
    assert digest(cluster.view) == once
    assert cluster.view.nominations == {"a": ["L1"], "c": ["L1"]}
    assert cluster.view.launches["L1"].work == ("a", "c")
    assert digest(restore(dump(cluster.view))) == once


def test_nominations_for_a_launch_that_registered_meanwhile_hold_its_room_at_once() -> None:
    cluster = Cluster()
    cluster.submit(actor("a", 2))
    cluster.fold(launch({"L1": {"a": {"CPU": 2}}}))
    cluster.fold(registered("n1", "L1"), react=False)
    cluster.submit(actor("c", 2))
    cluster.fold(LaunchesNominated(nominated={"L1": {"c": {"CPU": 2}}}), react=False)
    cluster.submit(actor("b", 2))
    cluster.reconcile()
    assert cluster.placements() == {"a": "n1", "c": "n1"}


def test_work_nominated_to_a_registered_node_it_is_not_placed_on_yet_launches_nothing_more() -> None:
    """The free room of a registered node counts for the work nominated to it first (not for the alike work
    launched for elsewhere, which its own launch holds room for)."""
    cluster = Cluster()
    ids = [f"a{k}" for k in range(8)]
    for work_id in ids:
        cluster.submit(actor(work_id, 1))
    cluster.fold(launch({"L1": {w: {"CPU": 1} for w in ids[4:]}, "L2": {w: {"CPU": 1} for w in ids[:4]}}))
    cluster.fold(registered("n1", "L1"), react=False)
    assert Decider(SCALING, (), 1.0).decide(cluster.view, 2.0, {}).events == []


def test_alike_work_nominated_to_several_registered_nodes_is_counted_each_on_its_own() -> None:
    """Two alike higher-priority actors nominated to two full registered nodes are counted each on its own node, as
    the scheduler places them, not both on the first (whose room held for lower-priority work would then seem taken):
    the round launches nothing."""
    cluster = Cluster()
    cluster.create_placement_group(PlacementGroupRequest("pg", [{"CPU": 1}, {"CPU": 1}], "STRICT_SPREAD"))
    for work_id in ("lo0", "lo1"):
        cluster.submit(actor(work_id, 2))
    for work_id in ("hi0", "hi1"):
        cluster.submit(actor(work_id, 1, priority=1))
    one, two = {"CPU": 1.0}, {"CPU": 2.0}
    cluster.fold(launch({"L1": {"hi0": one, "lo0": two, "pg": one}, "L2": {"hi1": one, "lo1": two, "pg": one}}))
    cluster.fold(registered("n1", "L1"), react=False)
    cluster.fold(registered("n2", "L2"), react=False)
    assert plan(cluster.view, SCALING, Fleet(), ()).launches == ()
    cluster.reconcile()
    assert cluster.placements() == {"hi0": "n1", "hi1": "n2", "lo0": "n1", "lo1": "n2"}
    assert cluster.placement_groups() == {"pg": ["n1", "n2"]}


def test_room_a_registered_node_holds_counts_only_for_the_work_nominated_to_it() -> None:
    """A larger pending actor is not counted on the room a registered node holds for smaller nominated work (the
    scheduler would not give it that room): it is demand, and the nominated work is not."""
    cluster = Cluster()
    cluster.submit(actor("x", 2))
    cluster.submit(actor("y", 3))
    cluster.fold(launch({"L1": {"x": {"CPU": 2}}}))
    cluster.fold(registered("n1", "L1"), react=False)
    result = plan(cluster.view, SCALING, Fleet(), ())
    assert [launch.work_ids for launch in result.launches] == [("y",)]
    cluster.reconcile()
    assert cluster.placements() == {"x": "n1"}


def in_a_cluster(cluster: Cluster, cap: float = 8) -> None:
    """A top-level virtual cluster `vc` that may borrow `cap` CPUs and holds nothing yet."""
    cluster.create_virtual_cluster("vc", VirtualCluster(flexible_resource_max={"CPU": cap}))


def test_an_actor_of_a_virtual_cluster_grows_its_cluster_on_the_node_launched_for_it() -> None:
    """Two nodes launched for two actors of a virtual cluster: each grows the cluster's flexible node on its own
    node (the smaller one does not take the room the larger one was launched for)."""
    cluster = Cluster()
    in_a_cluster(cluster)
    cluster.submit(actor("small", 1, vcluster_id="vc"))
    cluster.submit(actor("large", 3, vcluster_id="vc"))
    cluster.submit(actor("root", 3))
    cluster.fold(launch({"L1": {"large": {"CPU": 3}, "root": {"CPU": 1}}, "L2": {"small": {"CPU": 1}}}))
    cluster.fold(registered("n1", "L1"), react=False)
    cluster.fold(registered("n2", "L2"), react=False)
    cluster.reconcile()
    assert cluster.placements(vcluster_id="vc") == {"small": "vc-flex-n2", "large": "vc-flex-n1"}


def test_room_held_for_nominated_work_is_not_carved_for_a_virtual_clusters_admission() -> None:
    """A cluster queued for 2 CPUs is not admitted onto the room a registered node holds for an actor."""
    cluster = Cluster()
    cluster.submit(actor("a", 3))
    cluster.fold(launch({"L1": {"a": {"CPU": 3}}}))
    cluster.create_virtual_cluster("vc", VirtualCluster(flexible_resource_min={"CPU": 2}))
    cluster.fold(registered("n1", "L1"), react=False)
    cluster.reconcile()
    assert cluster.placements() == {"a": "n1"}
    assert cluster.virtual_cluster("vc").state == "queued"


def test_room_held_for_nominated_work_is_not_lent_to_a_virtual_clusters_other_work() -> None:
    """A placement group waiting for the second of its two launched nodes keeps its room on the first: an actor of a
    virtual cluster submitted meanwhile does not grow its cluster onto it."""
    cluster = Cluster()
    in_a_cluster(cluster)
    cluster.create_placement_group(PlacementGroupRequest("pg", [{"CPU": 2}, {"CPU": 2}], "STRICT_SPREAD"))
    cluster.fold(launch({"L1": {"pg": {"CPU": 2}}, "L2": {"pg": {"CPU": 2}}}))
    cluster.fold(registered("n1", "L1"))
    cluster.submit(actor("inside", 3, vcluster_id="vc"))
    cluster.fold(registered("n2", "L2"))
    assert cluster.placement_groups() == {"pg": ["n1", "n2"]}
    assert cluster.placements(vcluster_id="vc") == {}


def test_an_actor_of_a_virtual_cluster_waits_for_its_own_launch_while_a_later_one_registers() -> None:
    """Its cluster does not grow onto a node launched later for other work (the plan gave that room away); it
    grows on its own node once that registers."""
    cluster = Cluster()
    in_a_cluster(cluster)
    cluster.submit(actor("inside", 1, vcluster_id="vc"))
    cluster.fold(launch({"L1": {"inside": {"CPU": 1}}}, at=1.0))
    cluster.submit(actor("big", 3))
    cluster.fold(launch({"L2": {"big": {"CPU": 3}}}, at=2.0))
    cluster.fold(registered("n2", "L2"))
    assert (cluster.placements(), cluster.placements(vcluster_id="vc")) == ({"big": "n2"}, {})
    cluster.fold(registered("n1", "L1"))
    assert cluster.placements(vcluster_id="vc") == {"inside": "vc-flex-n1"}


def test_room_a_node_stops_holding_is_lent_to_a_virtual_cluster_waiting_for_it() -> None:
    """Once the work a node held room for is gone, an actor of a virtual cluster that waited for that room grows its
    cluster there at once."""
    cluster = Cluster()
    in_a_cluster(cluster)
    cluster.create_placement_group(PlacementGroupRequest("pg", [{"CPU": 2}, {"CPU": 2}], "STRICT_SPREAD"))
    cluster.fold(launch({"L1": {"pg": {"CPU": 2}}, "L2": {"pg": {"CPU": 2}}}))
    cluster.fold(registered("n1", "L1"))
    cluster.submit(actor("inside", 3, vcluster_id="vc"))
    assert cluster.placements(vcluster_id="vc") == {}
    cluster.remove_placement_group("pg")
    assert cluster.placements(vcluster_id="vc") == {"inside": "vc-flex-n1"}


def test_the_scheduler_places_higher_priority_work_where_the_plan_counted_it_on_held_room() -> None:
    """The plan counts a higher-priority actor on the room a registered node holds for lower-priority work, and the
    displaced work on other free room (no launch); the scheduler places both there."""
    cluster = Cluster()
    cluster.submit(actor("lo", 2))
    cluster.submit(actor("hi", 4, priority=1))
    cluster.fold(launch({"L1": {"lo": {"CPU": 2}}}))
    cluster.fold(registered("n1", "L1"), react=False)
    cluster.fold(registered("other", cpu=2), react=False)
    assert plan(cluster.view, SCALING, Fleet(), ()).launches == ()
    cluster.reconcile()
    assert cluster.placements() == {"hi": "n1", "lo": "other"}


def test_higher_priority_work_takes_on_its_nominated_nodes_only_the_room_they_hold_for_it() -> None:
    """A nominated node is chosen outright only while the room it holds for the work (or room nobody holds) takes
    it: a higher-priority group spread over two launched nodes does not put a second bundle on the first, taking the
    room it holds for lower-priority work launched beside it."""
    cluster = Cluster()
    cluster.submit(actor("lo", 3))
    cluster.create_placement_group(PlacementGroupRequest("hi", [{"CPU": 1}] * 3, "SPREAD", priority=1))
    cluster.fold(launch({"L1": {"hi": {"CPU": 1}, "lo": {"CPU": 3}}, "L2": {"hi": {"CPU": 2}}}))
    cluster.fold(registered("n1", "L1"), react=False)
    cluster.fold(registered("n2", "L2"), react=False)
    cluster.reconcile()
    assert (cluster.placement_groups(), cluster.placements()) == ({"hi": ["n1", "n2", "n2"]}, {"lo": "n1"})


def test_quota_a_nominated_actor_holds_is_not_taken_by_an_earlier_actor_of_its_cluster() -> None:
    """A cluster that may borrow 3 CPUs: the actor a launch was for keeps its 2 CPUs of that maximum from an earlier
    actor of the same priority (which says so), and is placed on its node once that registers."""
    cluster = Cluster()
    in_a_cluster(cluster, cap=3)
    cluster.submit(actor("early", 2, vcluster_id="vc"))
    cluster.submit(actor("late", 2, vcluster_id="vc"))
    cluster.fold(launch({"L1": {"late": {"CPU": 2}}}))
    (early, _) = cluster.pending(vcluster_id="vc")
    assert early.id == "early"
    assert early.message.startswith(
        "virtual cluster vc is at its flexible maximum of CPU (0 of 3 held, 2 more kept for work a launch was for)"
    )
    cluster.fold(registered("n1", "L1"))
    assert cluster.placements(vcluster_id="vc") == {"late": "vc-flex-n1"}


def test_quota_a_nominated_actor_holds_may_be_taken_by_higher_priority_work_of_its_cluster() -> None:
    cluster = Cluster()
    in_a_cluster(cluster, cap=3)
    cluster.submit(actor("late", 2, vcluster_id="vc"))
    cluster.fold(launch({"L1": {"late": {"CPU": 2}}}))
    cluster.fold(registered("other"), react=False)
    cluster.submit(actor("urgent", 2, priority=1, vcluster_id="vc"))
    assert cluster.placements(vcluster_id="vc") == {"urgent": "vc-flex-other"}


def test_quota_a_nominated_actor_holds_is_not_taken_by_a_child_clusters_admission() -> None:
    """A cluster that may borrow 4 CPUs, a 3-CPU actor of it launched for, and a child queued for 2 CPUs: the child
    is not admitted (the parent grows into neither that quota nor that node's room), the actor is placed on its node,
    and the autoscaler does not count the child (it waits for the parent's quota, which no launch gives)."""
    cluster = Cluster()
    in_a_cluster(cluster, cap=4)
    cluster.submit(actor("inside", 3, vcluster_id="vc"))
    cluster.fold(launch({"L1": {"inside": {"CPU": 3}}}))
    cluster.create_virtual_cluster("child", VirtualCluster(flexible_resource_min={"CPU": 2}), parent="vc")
    assert plan(cluster.view, SCALING, Fleet(launching={"cpu-4": ("L1",)}), ()).launches == ()
    cluster.fold(registered("other"), react=False)
    cluster.fold(registered("n1", "L1"), react=False)
    cluster.reconcile()
    assert cluster.placements(vcluster_id="vc") == {"inside": "vc-flex-n1"}
    assert cluster.virtual_cluster("child").state == "queued"


def test_actors_launched_for_that_the_maximum_cannot_all_hold_do_not_block_each_other() -> None:
    """Two 2-CPU actors of a cluster that may borrow 3 CPUs, both nominated to one node (the maximum fell short of
    what the plan counted): the first in the queue holds its share and is placed; the other holds none."""
    cluster = Cluster()
    in_a_cluster(cluster, cap=3)
    cluster.submit(actor("first", 2, vcluster_id="vc"))
    cluster.submit(actor("second", 2, vcluster_id="vc"))
    cluster.fold(launch({"L1": {"first": {"CPU": 2}, "second": {"CPU": 2}}}))
    cluster.fold(registered("n1", "L1"))
    assert cluster.placements(vcluster_id="vc") == {"first": "vc-flex-n1"}


def group_mixing_an_existing_node_and_a_launch(cluster: Cluster) -> None:
    """A group the plan put half on existing node `e`'s free room and half on launch L1; then an actor fitting `e`."""
    cluster.fold(registered("e", cpu=2), react=False)
    cluster.create_placement_group(PlacementGroupRequest("pg", [{"CPU": 2}, {"CPU": 2}], "STRICT_SPREAD"))
    cluster.fold(launch({"L1": {"pg": {"CPU": 2}}}))
    cluster.fold(LaunchesNominated(nominated={}, existing={"L1": {"e": {"pg": {"CPU": 2}}}}))
    cluster.submit(actor("b", 2))


def test_an_existing_nodes_room_a_group_was_launched_with_is_held_until_its_launch_registers() -> None:
    cluster = Cluster()
    group_mixing_an_existing_node_and_a_launch(cluster)
    assert cluster.placements() == {}
    cluster.fold(registered("n1", "L1"))
    assert sorted(cluster.placement_groups()["pg"]) == ["e", "n1"]
    assert cluster.placements() == {"b": "n1"}


def test_an_existing_nodes_room_held_for_a_group_is_free_once_its_launch_failed() -> None:
    cluster = Cluster()
    group_mixing_an_existing_node_and_a_launch(cluster)
    cluster.fold(NodeLaunchFailed(launch_id="L1", reason="not registered within 120s"))
    assert cluster.placements() == {"b": "e"}
    assert cluster.view.held == {}


def test_an_existing_nodes_held_room_survives_a_snapshot_and_ends_with_the_node() -> None:
    cluster = Cluster()
    group_mixing_an_existing_node_and_a_launch(cluster)
    view = cluster.view
    again = restore(dump(view))
    assert digest(again) == digest(view)
    assert again.held == view.held == {"e": {"pg": (0, {"CPU": 2.0})}}
    assert nominated_nodes(again, "pg") == nominated_nodes(view, "pg") == ("e",)
    cluster.fold(NodeDied(node_id="e"))
    assert (cluster.view.held, cluster.view.launches["L1"].existing) == ({}, {})


def test_a_round_holds_an_existing_nodes_room_for_a_group_it_puts_there_once() -> None:
    cluster = Cluster()
    cluster.fold(registered("e", cpu=2), react=False)
    cluster.create_placement_group(PlacementGroupRequest("pg", [{"CPU": 2}, {"CPU": 2}], "STRICT_SPREAD"))
    first = autoscaler_round(cluster, 1.0)
    assert [event.existing for event in first if isinstance(event, LaunchesNominated)] == [
        {"L1": {"e": {"pg": {"CPU": 2.0}}}}
    ]
    cluster.submit(actor("b", 2))
    again = autoscaler_round(cluster, 2.0)
    assert [event.existing for event in again if isinstance(event, LaunchesNominated) and event.existing] == []
    assert "b" not in cluster.placements()
    cluster.fold(registered("n1", "L1"))
    assert sorted(cluster.placement_groups()["pg"]) == ["e", "n1"]
