"""Virtual clusters over time: nesting, destroying, node death and repair, and replay that converges."""

from __future__ import annotations

import pytest

from schemas import ActorFailed, PlacementGroupRequest, Queued, VirtualClusterDestroyed
from services.core import Cluster, Pending, Placed, replay
from services.core.state.snapshot import decode, digest, dump, encode, restore
from tests.core.builders import make_actor, make_cluster
from tests.core.vc_builders import admitted, fixed, free_cpu, parent_of, spec


def test_a_child_cluster_is_carved_from_its_parent_and_destroying_it_gives_back_to_the_parent() -> None:
    cluster = make_cluster(2, cpu=8)
    cluster.create_virtual_cluster("job", spec(min_cpu=10, max_cpu=10))
    train = admitted(cluster.create_virtual_cluster("train", spec(min_cpu=8, max_cpu=8), parent="job"))
    assert {parent_of(cluster, "train", v) for v in train} <= {v.node_id for v in cluster.nodes("job")}
    assert cluster.virtual_cluster("job").available_resources == {"CPU": 2}
    assert cluster.virtual_cluster("job").children == ["train"]
    assert cluster.virtual_cluster("train").parent == "job"
    assert isinstance(cluster.create_virtual_cluster("validate", spec(min_cpu=4, max_cpu=4), parent="job"), Queued)
    placed = cluster.submit(make_actor("t", vcluster_id="train"))
    assert isinstance(placed, Placed) and placed.node_id in train
    cluster.destroy_virtual_cluster("train", force=True)
    assert cluster.virtual_cluster("job").children == ["validate"]
    assert cluster.virtual_cluster("validate").state == "admitted"
    assert cluster.virtual_cluster("job").available_resources == {"CPU": 6}


def test_a_child_of_a_growing_cluster_makes_its_parent_borrow() -> None:
    cluster = make_cluster(2, cpu=4)
    cluster.create_virtual_cluster("job", spec(max_cpu=6))
    assert cluster.virtual_cluster("job").total_resources == {}
    admitted(cluster.create_virtual_cluster("sweep", spec(min_cpu=2), parent="job"))
    assert cluster.virtual_cluster("job").total_resources == {"CPU": 2}
    for index in range(4):
        assert isinstance(cluster.submit(make_actor(f"trial{index}", vcluster_id="sweep")), Placed)
    assert cluster.virtual_cluster("job").total_resources == {"CPU": 4}
    capped = cluster.submit(make_actor("big", 3, vcluster_id="sweep"))
    assert isinstance(capped, Pending), "the parent's maximum bounds its children"
    for index in range(4):
        cluster.remove_actor(f"trial{index}")
    assert isinstance(cluster.decision("big"), Placed)
    cluster.remove_actor("big")
    assert cluster.virtual_cluster("sweep").total_resources == {"CPU": 2}
    assert cluster.virtual_cluster("job").total_resources == {"CPU": 2}
    assert free_cpu(cluster, "n0") + free_cpu(cluster, "n1") == 6


def test_destroying_a_cluster_with_live_work_is_refused_unless_forced() -> None:
    cluster = make_cluster(2, cpu=4)
    cluster.create_virtual_cluster("job", spec(min_cpu=4))
    cluster.create_virtual_cluster("child", spec(min_cpu=1), parent="job")
    cluster.submit(make_actor("worker", vcluster_id="child"))
    cluster.create_placement_group(PlacementGroupRequest("pg", [{"CPU": 1}], vcluster_id="job"))
    cluster.submit(make_actor("waiting", 50, vcluster_id="job"))
    before = len(cluster.events())
    with pytest.raises(ValueError, match=r"vc_id 'job': still has live work \(pg, waiting, worker\)"):
        cluster.destroy_virtual_cluster("job")
    assert len(cluster.events()) == before
    result = cluster.destroy_virtual_cluster("job", force=True)
    assert result.destroyed == ["child", "job"]
    assert result.stopped == ["pg", "waiting", "worker"]
    destroyed = [e for e in cluster.events()[before:] if isinstance(e, VirtualClusterDestroyed)]
    assert {e.vc_id: e.stopped for e in destroyed} == {"child": ["worker"], "job": ["pg", "waiting"]}
    failed = [e.actor_id for e in cluster.events()[before:] if isinstance(e, ActorFailed)]
    assert sorted(failed) == ["waiting", "worker"]
    assert cluster.placements() == {} and cluster.pending() == []
    assert free_cpu(cluster, "n0") + free_cpu(cluster, "n1") == 8
    with pytest.raises(ValueError, match="no such virtual cluster"):
        cluster.submit(make_actor("late", vcluster_id="job"))


def test_work_sent_to_a_queued_cluster_waits_and_says_it_is_the_admission_queue() -> None:
    cluster = make_cluster(1, cpu=2)
    cluster.create_virtual_cluster("a", spec(min_cpu=2))
    cluster.create_virtual_cluster("b", spec(min_cpu=2))
    waiting = cluster.submit(make_actor("early", vcluster_id="b"))
    assert isinstance(waiting, Pending)
    assert waiting.message.startswith(
        "virtual cluster b is not admitted yet: virtual cluster b waits in the admission queue of the root cluster"
        " (position 1 of 1)"
    )
    cluster.destroy_virtual_cluster("a")
    assert isinstance(cluster.decision("early"), Placed)


def test_a_queued_cluster_can_be_destroyed_and_leaves_the_queue() -> None:
    cluster = make_cluster(1, cpu=2)
    cluster.create_virtual_cluster("a", spec(min_cpu=2))
    cluster.create_virtual_cluster("b", spec(min_cpu=2))
    cluster.create_virtual_cluster("c", spec(min_cpu=2))
    assert cluster.admission("c").position == 2  # type: ignore[union-attr]
    cluster.destroy_virtual_cluster("b")
    assert cluster.admission("c").position == 1  # type: ignore[union-attr]
    cluster.destroy_virtual_cluster("a")
    assert cluster.virtual_cluster("c").state == "admitted"


def test_when_a_node_dies_its_virtual_nodes_go_fixed_ones_are_reserved_again_and_actors_restart_inside() -> None:
    cluster = make_cluster(3, cpu=4)
    vnodes = admitted(cluster.create_virtual_cluster("vc1", spec(fixed(2, 2, policy="STRICT_SPREAD"))))
    placed = cluster.submit(make_actor("a", vcluster_id="vc1", max_restarts=1))
    assert isinstance(placed, Placed)
    dying = parent_of(cluster, "vc1", placed.node_id)  # type: ignore[arg-type]
    cluster.remove_node(dying)
    info = cluster.virtual_cluster("vc1")
    assert info.state == "admitted"
    assert sorted(node.node_id for node in info.nodes) == sorted(vnodes)
    assert dying not in {node.parent_node for node in info.nodes}
    assert len({node.parent_node for node in info.nodes}) == 2, "still STRICT_SPREAD"
    again = cluster.decision("a")
    assert isinstance(again, Placed) and again.node_id in vnodes


def test_a_cluster_that_cannot_be_repaired_is_degraded_until_capacity_appears() -> None:
    cluster = make_cluster(2, cpu=4)
    admitted(cluster.create_virtual_cluster("vc1", spec(fixed(3, 3, policy="STRICT_SPREAD"))))
    cluster.remove_node("n0")
    info = cluster.virtual_cluster("vc1")
    assert info.state == "degraded"
    assert "lost and not reserved again yet" in info.message
    assert len(info.nodes) == 1
    cluster.add_node("n9", {"CPU": 4})
    repaired = cluster.virtual_cluster("vc1")
    assert repaired.state == "admitted" and len(repaired.nodes) == 2
    assert {node.parent_node for node in repaired.nodes} == {"n1", "n9"}


def test_the_flexible_minimum_lost_with_a_node_is_carved_again_elsewhere() -> None:
    cluster = make_cluster(2, cpu=4)
    cluster.create_virtual_cluster("vc1", spec(min_cpu=2, max_cpu=2))
    host = cluster.virtual_cluster("vc1").nodes[0].parent_node
    cluster.remove_node(host)
    info = cluster.virtual_cluster("vc1")
    assert info.state == "admitted" and info.total_resources == {"CPU": 2}
    assert {node.parent_node for node in info.nodes} == {"n0", "n1"} - {host}


def _busy_cluster(seed: int) -> Cluster:
    cluster = make_cluster(4, cpu=4, seed=seed)
    cluster.create_virtual_cluster("job", spec(fixed(1, 1, policy="SPREAD"), min_cpu=1, max_cpu=5))
    cluster.create_virtual_cluster("child", spec(min_cpu=1), parent="job")
    cluster.create_virtual_cluster("later", spec(min_cpu=12))
    for index in range(6):
        cluster.submit(make_actor(f"a{index}", vcluster_id="job" if index % 2 else "child", max_restarts=2))
    cluster.remove_actor("a1")
    cluster.remove_node("n2")
    cluster.add_node("n5", {"CPU": 4})
    cluster.destroy_virtual_cluster("child", force=True)
    return cluster


@pytest.mark.parametrize("seed", range(3))
def test_replay_and_snapshots_rebuild_the_same_tree(seed: int) -> None:
    cluster = _busy_cluster(seed)
    expected = digest(cluster.view)
    assert digest(replay(cluster.events(), seed)) == expected
    restored = restore(decode(encode(dump(cluster.view))))
    assert digest(restored) == expected
    follower = Cluster.from_view(restored)
    assert follower.virtual_clusters() == cluster.virtual_clusters()
    assert follower.placements() == cluster.placements()


def test_a_cluster_rebuilt_from_its_log_goes_on_exactly_like_the_original() -> None:
    cluster = _busy_cluster(1)
    copy = Cluster.from_events(cluster.events(), seed=1)
    for each in (cluster, copy):
        each.submit(make_actor("next", vcluster_id="job"))
        each.destroy_virtual_cluster("job", force=True)
    assert digest(copy.view) == digest(cluster.view)
    assert copy.virtual_clusters() == cluster.virtual_clusters()
