"""Virtual clusters: spec validation, default maximum, gang admission, fixed-size policies, the admission queue."""

from __future__ import annotations

import pytest

from schemas import FixedSizeNode, FixedSizeNodes, Queued, Taint, VirtualCluster
from services.core import Cluster, Pending, Placed
from services.core.state.snapshot import decode, dump, encode, restore
from tests.core.builders import make_actor, make_cluster
from tests.core.vc_builders import admitted, fixed, free_cpu, parent_of, spec


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        (VirtualCluster(flexible_resource_min={"CPU": -1}), ["flexible_resource_min['CPU']", "-1", ">= 0"]),
        (
            VirtualCluster(flexible_resource_min={"CPU": 4}, flexible_resource_max={"CPU": 2}),
            ["flexible_resource_max['CPU']", "2", ">= flexible_resource_min"],
        ),
        (
            VirtualCluster(fixed_size_nodes=[FixedSizeNodes([FixedSizeNode({"CPU": -2})])]),
            ["fixed_size_nodes[0].nodes[0].resources['CPU']", "-2"],
        ),
        (
            VirtualCluster(fixed_size_nodes=[FixedSizeNodes([FixedSizeNode({"CPU": 1}, {"corral.io/x": "y"})])]),
            ["fixed_size_nodes[0].nodes[0].labels", "reserved"],
        ),
        (
            VirtualCluster(fixed_size_nodes=[FixedSizeNodes([FixedSizeNode({"CPU": 1}, {"bad key!": "y"})])]),
            ["fixed_size_nodes[0].nodes[0].labels", "bad key!"],
        ),
        (
            VirtualCluster(fixed_size_nodes=[FixedSizeNodes([FixedSizeNode({"CPU": 1})], "RANDOM")]),  # type: ignore[arg-type]
            ["scheduling_policy", "RANDOM", "PACK, SPREAD, STRICT_SPREAD"],
        ),
        (VirtualCluster(fixed_size_nodes=[FixedSizeNodes([])]), ["fixed_size_nodes[0].nodes", "non-empty"]),
    ],
)
def test_a_bad_spec_is_a_value_error_naming_field_value_and_rule_and_changes_nothing(
    bad: VirtualCluster, words: list[str]
) -> None:
    cluster = make_cluster(2)
    before = len(cluster.events())
    with pytest.raises(ValueError) as caught:
        cluster.create_virtual_cluster("vc1", bad)
    for word in words:
        assert word in str(caught.value)
    assert len(cluster.events()) == before
    assert cluster.view.tree.clusters == {}


def test_an_unknown_parent_or_a_taken_id_is_refused() -> None:
    cluster = make_cluster(2)
    with pytest.raises(ValueError, match="parent 'nope': no such virtual cluster"):
        cluster.create_virtual_cluster("vc1", spec(min_cpu=1), parent="nope")
    cluster.create_virtual_cluster("vc1", spec(min_cpu=1))
    with pytest.raises(ValueError, match="already exists with another spec"):
        cluster.create_virtual_cluster("vc1", spec(min_cpu=2))


def test_asking_again_with_the_same_spec_returns_the_same_admission_without_new_events() -> None:
    cluster = make_cluster(2)
    first = cluster.create_virtual_cluster("vc1", spec(fixed(1, 1)))
    count = len(cluster.events())
    assert cluster.create_virtual_cluster("vc1", spec(fixed(1, 1))) == first
    assert len(cluster.events()) == count


def test_the_walkthrough_two_strict_spread_nodes_and_the_third_task_waits() -> None:
    cluster = Cluster(seed=3)
    cluster.add_node("raylet1", {"CPU": 4})
    cluster.add_node("raylet2", {"CPU": 4})
    vnodes = admitted(cluster.create_virtual_cluster("vcluster1", spec(fixed(1, 1, policy="STRICT_SPREAD"))))
    assert {parent_of(cluster, "vcluster1", v) for v in vnodes} == {"raylet1", "raylet2"}
    assert free_cpu(cluster, "raylet1") == free_cpu(cluster, "raylet2") == 3
    first = cluster.submit(make_actor("t1", vcluster_id="vcluster1"))
    second = cluster.submit(make_actor("t2", vcluster_id="vcluster1"))
    assert isinstance(first, Placed) and isinstance(second, Placed)
    assert {first.node_id, second.node_id} == set(vnodes)
    third = cluster.submit(make_actor("t3", vcluster_id="vcluster1"))
    assert isinstance(third, Pending)
    assert "0/2 nodes of virtual cluster vcluster1 are available: 2 node(s) Insufficient CPU" in third.message
    assert sorted(third.nodes_by_reason["Insufficient CPU"]) == sorted(vnodes)
    cluster.remove_actor("t1")
    assert cluster.placements()["t3"] == first.node_id


def test_without_fixed_nodes_an_omitted_maximum_is_unbounded() -> None:
    cluster = make_cluster(3, cpu=4)
    cluster.create_virtual_cluster("job", spec(min_cpu=1))
    for index in range(12):
        assert isinstance(cluster.submit(make_actor(f"a{index}", vcluster_id="job")), Placed)
    assert cluster.virtual_cluster("job").total_resources == {"CPU": 12}
    assert cluster.virtual_cluster("job").max_resources == {"CPU": None}


def test_with_fixed_nodes_an_omitted_maximum_equals_the_minimum() -> None:
    cluster = make_cluster(3, cpu=4)
    cluster.create_virtual_cluster("job", spec(fixed(1), min_cpu=1))
    placed = [cluster.submit(make_actor(f"a{index}", vcluster_id="job")) for index in range(3)]
    assert [type(d).__name__ for d in placed] == ["Placed", "Placed", "Pending"]
    assert cluster.virtual_cluster("job").max_resources == {"CPU": 2}
    assert "does not grow" in placed[2].message  # type: ignore[union-attr]


@pytest.mark.parametrize("seed", range(4))
def test_pack_puts_a_group_on_one_node_and_strict_spread_on_distinct_nodes(seed: int) -> None:
    cluster = make_cluster(4, cpu=4, seed=seed)
    packed = admitted(cluster.create_virtual_cluster("p", spec(fixed(1, 1, 1))))
    assert len({parent_of(cluster, "p", v) for v in packed}) == 1
    spread = admitted(cluster.create_virtual_cluster("s", spec(fixed(1, 1, 1, policy="STRICT_SPREAD"))))
    assert len({parent_of(cluster, "s", v) for v in spread}) == 3
    loose = admitted(cluster.create_virtual_cluster("l", spec(fixed(1, 1, 1, 1, policy="SPREAD"))))
    assert len({parent_of(cluster, "l", v) for v in loose}) == 4


def test_creation_reserves_everything_or_nothing_and_waits_with_a_reason() -> None:
    cluster = make_cluster(2, cpu=4)
    outcome = cluster.create_virtual_cluster("big", spec(fixed(2, 2, 2, policy="STRICT_SPREAD"), min_cpu=1))
    assert isinstance(outcome, Queued)
    assert outcome.position == 1
    assert "waits in the admission queue of the root cluster (position 1 of 1)" in outcome.message
    assert "STRICT_SPREAD needs 3 distinct nodes" in outcome.message
    assert free_cpu(cluster, "n0") == free_cpu(cluster, "n1") == 4
    assert cluster.virtual_cluster("big").state == "queued"
    cluster.add_node("n2", {"CPU": 4})
    assert cluster.virtual_cluster("big").state == "admitted"
    assert sum(free_cpu(cluster, n) for n in ("n0", "n1", "n2")) == 12 - 7


def test_a_queued_cluster_is_admitted_when_another_finishes() -> None:
    cluster = make_cluster(1, cpu=4)
    admitted(cluster.create_virtual_cluster("a", spec(min_cpu=3, max_cpu=3)))
    waiting = cluster.create_virtual_cluster("b", spec(min_cpu=2, max_cpu=2))
    assert isinstance(waiting, Queued)
    assert "the flexible minimum is CPU 1 more than the cluster has free" in waiting.message
    cluster.destroy_virtual_cluster("a")
    assert cluster.virtual_cluster("b").state == "admitted"
    assert cluster.virtual_cluster("b").total_resources == {"CPU": 2}


def test_a_cluster_queued_in_a_snapshot_is_admitted_after_the_restore_when_room_comes_back() -> None:
    """A view restored from a snapshot knows which clusters wait (a command that frees room looks at the queues only
    when some do): destroying the cluster in the way admits the one queued before the snapshot."""
    cluster = make_cluster(1, cpu=4)
    admitted(cluster.create_virtual_cluster("a", spec(min_cpu=3, max_cpu=3)))
    assert isinstance(cluster.create_virtual_cluster("b", spec(min_cpu=2, max_cpu=2)), Queued)
    restored = Cluster.from_view(restore(decode(encode(dump(cluster.view, sequence=1)))))
    assert restored.view.tree.queued == {"b"}
    restored.destroy_virtual_cluster("a")
    assert restored.virtual_cluster("b").state == "admitted" and not restored.view.tree.queued


def test_the_queue_admits_higher_priority_first_then_arrival() -> None:
    cluster = make_cluster(1, cpu=4)
    cluster.create_virtual_cluster("holder", spec(min_cpu=4, max_cpu=4))
    for vc_id, priority in [("low", 0), ("high", 5), ("low2", 0)]:
        cluster.create_virtual_cluster(vc_id, spec(min_cpu=4, max_cpu=4), priority=priority)
    positions = {vc_id: cluster.admission(vc_id).position for vc_id in ("high", "low", "low2")}  # type: ignore[union-attr]
    assert positions == {"high": 1, "low": 2, "low2": 3}
    cluster.destroy_virtual_cluster("holder")
    assert cluster.virtual_cluster("high").state == "admitted"
    cluster.destroy_virtual_cluster("high")
    assert cluster.virtual_cluster("low").state == "admitted"


def test_a_large_waiting_cluster_is_passed_by_at_most_16_later_ones() -> None:
    cluster = make_cluster(2, cpu=8)
    cluster.create_virtual_cluster("holder", spec(min_cpu=8, max_cpu=8))
    assert isinstance(cluster.create_virtual_cluster("big", spec(min_cpu=16, max_cpu=16)), Queued)
    passed = 0
    for index in range(20):
        outcome = cluster.create_virtual_cluster(f"small{index}", spec(min_cpu=1, max_cpu=1))
        if not isinstance(outcome, Queued):
            passed += 1
            cluster.destroy_virtual_cluster(f"small{index}")
    assert passed == 16
    blocked = cluster.admission("small16")
    assert isinstance(blocked, Queued)
    assert "waits behind virtual cluster big, which 16 later clusters have passed" in blocked.message
    assert free_cpu(cluster, "n0") + free_cpu(cluster, "n1") == 8
    cluster.destroy_virtual_cluster("holder")
    assert cluster.virtual_cluster("big").state == "admitted"
    assert cluster.virtual_cluster("small16").state == "queued"


def test_tolerations_decide_which_tainted_nodes_virtual_nodes_are_carved_from() -> None:
    cluster = Cluster()
    cluster.add_node("gpu", {"CPU": 4}, taints=[Taint("dedicated", "ml")])
    cluster.add_node("plain", {"CPU": 4})
    nodes = admitted(cluster.create_virtual_cluster("a", spec(fixed(3))))
    assert parent_of(cluster, "a", nodes[0]) == "plain"
    queued = cluster.create_virtual_cluster("b", spec(fixed(3)))
    assert isinstance(queued, Queued) and "untolerated taint {dedicated: ml}" in queued.message
    ml = admitted(cluster.create_virtual_cluster("ml", spec(fixed(3), tolerations={"dedicated": "ml"})))
    assert parent_of(cluster, "ml", ml[0]) == "gpu"
