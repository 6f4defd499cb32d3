"""Scheduling inside a virtual cluster: scope, inherited labels and taints, the core rules, borrowing, introspection."""

from __future__ import annotations

import pytest

from schemas import (
    ActorPlaced,
    ActorRemoved,
    FixedSizeNode,
    FixedSizeNodes,
    In,
    NodeAffinitySchedulingStrategy,
    NodeLabelSchedulingStrategy,
    PlacementGroupRequest,
    PlacementGroupSchedulingStrategy,
    RunAfter,
    ScheduleRequest,
    SelectorSpec,
    Taint,
    VirtualCluster,
)
from services.core import Cluster, Pending, Placed, replay
from services.core.labels import NODE_ID, VCLUSTER_ID, VNODE_ID, ZONE
from services.core.state.snapshot import digest
from tests.core.builders import affinity, make_actor, make_cluster
from tests.core.vc_builders import admitted, fixed, free_cpu, host_of, parent_of, spec


def test_a_virtual_node_inherits_the_parent_labels_and_taints_and_adds_its_own() -> None:
    cluster = Cluster()
    cluster.add_node("n1", {"CPU": 4}, {"disk": "ssd"}, [Taint("team", "a", "PreferNoSchedule")], zone="z1")
    vnode = admitted(cluster.create_virtual_cluster("vc1", spec(fixed(2, labels=[{"role": "head"}]))))[0]
    info = cluster.virtual_cluster("vc1").nodes[0]
    assert info.node_id == vnode and info.parent_node == "n1"
    assert info.node_labels["disk"] == "ssd" and info.node_labels["role"] == "head"
    assert info.node_labels["corral.io/availability-zone"] == "z1"
    assert info.node_labels[NODE_ID] == vnode and info.node_labels[VNODE_ID] == vnode
    assert info.node_labels[VCLUSTER_ID] == "vc1"
    assert cluster.view.scope("vc1").nodes[vnode].taints == (Taint("team", "a", "PreferNoSchedule"),)
    cluster.set_labels("n1", {"disk": "nvme"})
    assert cluster.virtual_cluster("vc1").nodes[0].node_labels["disk"] == "nvme"
    cluster.add_taints("n1", [Taint("maintenance", "")])
    assert Taint("maintenance", "") in cluster.view.scope("vc1").nodes[vnode].taints


def test_work_inside_a_cluster_sees_only_its_nodes_and_never_lands_outside() -> None:
    cluster = make_cluster(4, cpu=8)
    vnodes = set(admitted(cluster.create_virtual_cluster("vc1", spec(fixed(2, 2, policy="STRICT_SPREAD")))))
    for index in range(6):
        cluster.submit(make_actor(f"a{index}", vcluster_id="vc1"))
    assert set(cluster.placements("vc1").values()) <= vnodes
    assert len(cluster.placements("vc1")) == 4
    assert [p.id for p in cluster.pending("vc1")] == ["a4", "a5"]
    root = cluster.submit(make_actor("outside", 2))
    assert isinstance(root, Placed) and root.node_id not in vnodes
    assert cluster.placements(None)["outside"] == root.node_id and "outside" not in cluster.placements("vc1")


def test_label_selectors_inside_a_cluster_match_the_virtual_nodes_labels() -> None:
    cluster = make_cluster(3, cpu=4)
    labels = [{"bundle_index": "0"}, {"bundle_index": "1"}]
    cluster.create_virtual_cluster("vc1", spec(fixed(1, 1, policy="STRICT_SPREAD", labels=labels)))
    decision = cluster.submit(make_actor("a", label_selector={"bundle_index": "1"}, vcluster_id="vc1"))
    assert isinstance(decision, Placed)
    assert cluster.virtual_cluster("vc1").nodes[1].node_id == decision.node_id
    missing = cluster.submit(make_actor("b", label_selector={"bundle_index": "7"}, vcluster_id="vc1"))
    assert isinstance(missing, Pending)
    assert "0/2 nodes of virtual cluster vc1 are available" in missing.message
    assert (
        missing.message == "0/2 nodes of virtual cluster vc1 are available: 2 node(s) didn't match the label selector."
    )


def test_taints_on_the_parent_still_need_tolerations_inside_the_cluster() -> None:
    cluster = Cluster()
    cluster.add_node("n1", {"CPU": 4}, taints=[Taint("dedicated", "ml")])
    cluster.create_virtual_cluster("vc1", spec(fixed(2), tolerations={"dedicated": "ml"}))
    refused = cluster.submit(make_actor("plain", vcluster_id="vc1"))
    assert isinstance(refused, Pending) and "untolerated taint {dedicated: ml}" in refused.message
    assert isinstance(cluster.submit(make_actor("ok", vcluster_id="vc1", tolerations={"dedicated": "ml"})), Placed)


def test_actor_anti_affinity_applies_within_the_cluster_only() -> None:
    cluster = make_cluster(2, cpu=8)
    cluster.create_virtual_cluster("vc1", spec(fixed(2, 2, policy="STRICT_SPREAD")))
    cluster.create_virtual_cluster("vc2", spec(fixed(2, 2, policy="STRICT_SPREAD")))
    strategy = affinity("app", "NOT_IN", ["db"], topology_key="corral.io/hostname")
    for vc_id in ("vc1", "vc2"):
        first = cluster.submit(
            make_actor(f"{vc_id}-a", labels={"app": "db"}, scheduling_strategy=strategy, vcluster_id=vc_id)
        )
        second = cluster.submit(
            make_actor(f"{vc_id}-b", labels={"app": "db"}, scheduling_strategy=strategy, vcluster_id=vc_id)
        )
        assert host_of(cluster, vc_id, first) != host_of(cluster, vc_id, second)
    third = cluster.submit(make_actor("vc1-c", labels={"app": "db"}, scheduling_strategy=strategy, vcluster_id="vc1"))
    assert isinstance(third, Pending)


def test_dataflow_require_inherits_within_the_cluster() -> None:
    cluster = make_cluster(3, cpu=4, zones=3)
    cluster.create_virtual_cluster("vc1", spec(fixed(1, 1, 1, policy="STRICT_SPREAD")))
    first = cluster.submit(make_actor("read", vcluster_id="vc1"))
    assert isinstance(first, Placed) and first.node_id is not None
    zone = cluster.view.scope("vc1").nodes[first.node_id].labels["corral.io/availability-zone"]
    after = RunAfter("read", "Require", ["corral.io/availability-zone"])
    second = cluster.submit(make_actor("map", vcluster_id="vc1", run_after=after))
    assert isinstance(second, Pending)  # the only virtual node in that zone is full
    cluster.remove_actor("read")
    placed = cluster.decision("map")
    assert isinstance(placed, Placed)
    assert placed.node_id is not None
    assert cluster.view.scope("vc1").nodes[placed.node_id].labels["corral.io/availability-zone"] == zone


def test_a_placement_group_inside_a_cluster_reserves_on_its_virtual_nodes() -> None:
    cluster = make_cluster(3, cpu=4)
    vnodes = admitted(cluster.create_virtual_cluster("vc1", spec(fixed(2, 2, policy="STRICT_SPREAD"))))
    group = cluster.create_placement_group(
        PlacementGroupRequest("pg", [{"CPU": 1}, {"CPU": 1}], "STRICT_SPREAD", vcluster_id="vc1")
    )
    assert isinstance(group, Placed) and sorted(group.bundle_nodes) == sorted(vnodes)
    inside = cluster.submit(
        make_actor("in-pg", scheduling_strategy=PlacementGroupSchedulingStrategy("pg", 0), vcluster_id="vc1")
    )
    assert isinstance(inside, Placed) and inside.node_id == group.bundle_nodes[0]
    assert cluster.placement_groups("vc1") == {"pg": group.bundle_nodes}
    too_big = cluster.create_placement_group(PlacementGroupRequest("pg2", [{"CPU": 3}], vcluster_id="vc1"))
    assert isinstance(too_big, Pending) and "of virtual cluster vc1" in too_big.message


def test_a_placement_group_and_the_equivalent_virtual_cluster_give_the_same_placements() -> None:
    """Proposal 004: a STRICT_SPREAD group of two GPU bundles and a cluster of two labelled fixed-size nodes."""

    def build() -> Cluster:
        cluster = Cluster(seed=7)
        for index in range(4):
            cluster.add_node(f"g{index}", {"CPU": 8, "GPU": 1 if index < 2 else 0} if index < 2 else {"CPU": 8})
        return cluster

    with_group = build()
    group = with_group.create_placement_group(PlacementGroupRequest("pg", [{"GPU": 1}, {"GPU": 1}], "STRICT_SPREAD"))
    by_group = {}
    for index in range(2):
        strategy = PlacementGroupSchedulingStrategy("pg", index)
        decision = with_group.submit(ScheduleRequest(f"actor{index}", {"GPU": 1}, scheduling_strategy=strategy))
        assert isinstance(decision, Placed)
        by_group[f"actor{index}"] = decision.node_id
    assert isinstance(group, Placed)

    with_vc = build()
    labels = [{"bundle_index": "0"}, {"bundle_index": "1"}]
    vc = VirtualCluster(
        fixed_size_nodes=[
            FixedSizeNodes(
                [FixedSizeNode({"GPU": 1}, labels[0]), FixedSizeNode({"GPU": 1}, labels[1])], "STRICT_SPREAD"
            )
        ]
    )
    admitted(with_vc.create_virtual_cluster("vc", vc))
    by_vc = {}
    for index in range(2):
        selector: SelectorSpec = {"bundle_index": In(str(index))}
        request = ScheduleRequest(f"actor{index}", {"GPU": 1}, label_selector=selector, vcluster_id="vc")
        by_vc[f"actor{index}"] = host_of(with_vc, "vc", with_vc.submit(request))
    assert by_vc == by_group
    assert sorted(by_vc.values()) == ["g0", "g1"]


def test_flexible_resources_grow_by_borrowing_up_to_the_maximum_and_shrink_back_to_the_minimum() -> None:
    cluster = make_cluster(2, cpu=4)
    cluster.create_virtual_cluster("vc1", spec(min_cpu=1, max_cpu=6))
    assert cluster.virtual_cluster("vc1").total_resources == {"CPU": 1}
    decisions = [cluster.submit(make_actor(f"a{index}", vcluster_id="vc1")) for index in range(7)]
    assert [type(d).__name__ for d in decisions] == ["Placed"] * 6 + ["Pending"]
    assert "virtual cluster vc1 is at its flexible maximum of CPU (6 of 6 held)" in decisions[6].message  # type: ignore[union-attr]
    hosts = [node.parent_node for node in cluster.virtual_cluster("vc1").nodes]
    assert len(hosts) == len(set(hosts)), "at most one flexible virtual node per parent node"
    assert free_cpu(cluster, "n0") + free_cpu(cluster, "n1") == 2
    for index in range(7):
        cluster.remove_actor(f"a{index}")
    assert cluster.virtual_cluster("vc1").total_resources == {"CPU": 1}, "the minimum is never lent back"
    assert free_cpu(cluster, "n0") + free_cpu(cluster, "n1") == 7


def test_my_cluster_is_full_reads_differently_from_the_cluster_is_full() -> None:
    cluster = make_cluster(1, cpu=4)
    cluster.create_virtual_cluster("vc1", spec(min_cpu=1, max_cpu=8))
    cluster.submit(make_actor("root-hog", 3))
    cluster.submit(make_actor("a", vcluster_id="vc1"))
    waiting = cluster.submit(make_actor("b", vcluster_id="vc1"))
    assert isinstance(waiting, Pending)
    assert "virtual cluster vc1 may grow, but the cluster has no node it may use with that much free" in waiting.message
    cluster.remove_actor("root-hog")
    assert isinstance(cluster.decision("b"), Placed)


@pytest.mark.parametrize("seed", range(3))
def test_scoped_introspection_counts_only_the_cluster(seed: int) -> None:
    cluster = make_cluster(3, cpu=4, seed=seed)
    cluster.create_virtual_cluster("vc1", spec(fixed(2, 1, policy="SPREAD"), min_cpu=1, max_cpu=3))
    cluster.submit(make_actor("in", vcluster_id="vc1"))
    cluster.submit(make_actor("out", 2))
    info = cluster.virtual_cluster("vc1")
    assert info.cluster_id == "vc1" and info.state == "admitted" and info.parent is None and info.children == []
    assert info.total_resources == {"CPU": 4}
    assert info.available_resources == {"CPU": 3}
    assert info.max_resources == {"CPU": 6}
    assert sum(node.used_resources.get("CPU", 0.0) for node in info.nodes) == 1
    assert {node.node_id for node in cluster.nodes("vc1")} == {node.node_id for node in info.nodes}
    assert {node.node_id for node in cluster.nodes()} == {"n0", "n1", "n2"}
    assert set(cluster.placements("vc1")) == {"in"} and set(cluster.placements()) == {"in", "out"}
    assert sorted(actor.request.actor_id for actor in cluster.view.every_actor()) == ["in", "out"]
    assert all(parent_of(cluster, "vc1", node.node_id) in {"n0", "n1", "n2"} for node in info.nodes)


def test_a_node_label_strategy_inside_a_cluster_uses_inherited_labels() -> None:
    cluster = Cluster()
    cluster.add_node("ssd", {"CPU": 4}, {"disk": "ssd"})
    cluster.add_node("hdd", {"CPU": 4}, {"disk": "hdd"})
    cluster.create_virtual_cluster("vc1", spec(min_cpu=0))
    strategy = NodeLabelSchedulingStrategy(hard={"disk": "ssd"})
    decision = cluster.submit(make_actor("a", scheduling_strategy=strategy, vcluster_id="vc1"))
    assert host_of(cluster, "vc1", decision) == "ssd"


def test_a_resource_the_spec_does_not_name_is_capped_and_explained_not_a_crash() -> None:
    cluster = make_cluster(2, cpu=4)
    cluster.create_virtual_cluster("vc1", spec(fixed(2), min_cpu=1))
    waiting = cluster.submit(ScheduleRequest("a", {"CPU": 1, "memory": 1}, vcluster_id="vc1"))
    assert isinstance(waiting, Pending)
    assert "virtual cluster vc1 has only its fixed-size nodes and flexible minimum" in waiting.message
    grows = make_cluster(2, cpu=4)
    grows.create_virtual_cluster("vc2", spec(fixed(1), min_cpu=1, max_cpu=3))
    capped = grows.submit(ScheduleRequest("b", {"CPU": 1, "GPU": 1}, vcluster_id="vc2"))
    assert isinstance(capped, Pending)
    assert "virtual cluster vc2 is at its flexible maximum of GPU (0 of 0 held)" in capped.message


def _anchor_on_a_full_host(cluster: Cluster) -> str:
    """Place `anchor` (app=x) in vc1, then fill its host from the root; the host's id."""
    cluster.create_virtual_cluster("vc1", spec(min_cpu=1, max_cpu=8))
    host = host_of(cluster, "vc1", cluster.submit(make_actor("anchor", labels={"app": "x"}, vcluster_id="vc1")))
    hog = make_actor("hog", free_cpu(cluster, host), scheduling_strategy=NodeAffinitySchedulingStrategy(host))
    assert isinstance(cluster.submit(hog), Placed)
    return host


def test_hard_affinity_to_a_zone_grows_a_new_virtual_node_in_that_zone() -> None:
    cluster = make_cluster(4, cpu=4, zones=2)
    host = _anchor_on_a_full_host(cluster)
    zone = cluster.view.nodes[host].labels[ZONE]
    in_zone = affinity("app", "IN", ["x"], topology_key=ZONE)
    new_host = host_of(
        cluster, "vc1", cluster.submit(make_actor("follower", vcluster_id="vc1", scheduling_strategy=in_zone))
    )
    assert new_host != host and cluster.view.nodes[new_host].labels[ZONE] == zone


def test_hard_affinity_to_actors_on_one_node_waits_for_that_node_without_growing_elsewhere() -> None:
    cluster = make_cluster(4, cpu=4, zones=2)
    host = _anchor_on_a_full_host(cluster)
    vnodes = [node.node_id for node in cluster.virtual_cluster("vc1").nodes]
    waiting = cluster.submit(
        make_actor("follower", vcluster_id="vc1", scheduling_strategy=affinity("app", "IN", ["x"]))
    )
    assert isinstance(waiting, Pending)
    assert [node.node_id for node in cluster.virtual_cluster("vc1").nodes] == vnodes
    cluster.remove_actor("hog")
    assert host_of(cluster, "vc1", cluster.decision("follower")) == host


def test_growth_and_shrink_ride_on_the_placement_and_the_removal_that_caused_them() -> None:
    cluster = make_cluster(2, cpu=4)
    cluster.create_virtual_cluster("vc1", spec(min_cpu=1, max_cpu=6))
    start = len(cluster.events())
    cluster.submit(make_actor("fits", vcluster_id="vc1"))  # within the minimum
    cluster.submit(make_actor("grows", vcluster_id="vc1"))  # borrows one more CPU first
    cluster.remove_actor("grows")  # gives it back
    fits, grows, gone = cluster.events()[start:]
    assert isinstance(fits, ActorPlaced) and fits.request is not None and fits.resized == []
    assert isinstance(grows, ActorPlaced) and grows.request is not None
    assert [size.resources for size in grows.resized] == [{"CPU": 2.0}]  # the node grew from 1 to 2 CPUs
    assert isinstance(gone, ActorRemoved) and [size.resources for size in gone.resized] == [{"CPU": 1.0}]
    events = cluster.events()
    assert [int(event.event_id) for event in events] == list(range(1, len(events) + 1))
    assert all(event.causation_id in {"", *(e.event_id for e in events[:index])} for index, event in enumerate(events))
    assert digest(replay(events)) == digest(cluster.view)
    assert cluster.virtual_cluster("vc1").total_resources == {"CPU": 1.0}


def test_a_growth_rides_on_its_own_placement_when_commands_run_back_to_back_in_process() -> None:
    """No `decided` between the commands: each still merges only with what its own command wrote."""
    cluster = make_cluster(2, cpu=4)
    cluster.create_virtual_cluster("vc1", spec(min_cpu=1, max_cpu=6))
    cluster.submit(make_actor("first", vcluster_id="vc1"))  # within the minimum
    start = len(cluster.events())
    cluster.remove_actor("first")  # nothing to give back: the minimum stays
    cluster.submit(make_actor("big", 2, vcluster_id="vc1"))  # borrows one more CPU first
    gone, big = cluster.events()[start:]
    assert isinstance(gone, ActorRemoved) and gone.resized == []
    assert isinstance(big, ActorPlaced) and [size.resources for size in big.resized] == [{"CPU": 2.0}]
