"""The view changes only through folds: after decisions, every index is as a replay of the same events builds it."""

from __future__ import annotations

import msgspec

from schemas import ScheduleRequest, Taint
from services.core import Cluster, ClusterView, Placed
from services.core.state import replay
from tests.core.builders import affinity, make_actor, node_of
from tests.core.vc_builders import spec


def indexes(view: ClusterView) -> list[object]:
    """Every index of the root and of each virtual cluster's scope, as plain data."""
    scopes = [view, *(vc.scope for vc in view.tree.clusters.values())]
    return [
        (
            scope.scope_id,
            list(scope.nodes),
            list(scope.ring.ids),
            {
                key: {value: list(ring.ids) for value, ring in values.items()}
                for key, values in scope.labels.by_key.items()
            },
            scope.actor_index.counts,
            scope.anti_index.counts,
            sorted(scope.prefer_tainted),
        )
        for scope in scopes
    ]


def test_deciding_on_a_custom_topology_key_leaves_the_indexes_as_a_replay_builds_them() -> None:
    cluster = Cluster()
    for index in range(4):
        cluster.add_node(f"n{index}", {"CPU": 4}, labels={"rack": f"r{index % 2}"})
    web = node_of(cluster.submit(make_actor("web", 1, labels={"app": "web"})))
    near = cluster.submit(
        make_actor("near", 1, scheduling_strategy=affinity("app", "IN", ["web"], topology_key="rack"))
    )
    far = cluster.submit(
        make_actor("far", 1, scheduling_strategy=affinity("app", "NOT_IN", ["web"], topology_key="rack"))
    )
    rack = cluster.view.nodes[web].labels["rack"]
    assert cluster.view.nodes[node_of(near)].labels["rack"] == rack
    assert cluster.view.nodes[node_of(far)].labels["rack"] != rack
    assert indexes(cluster.view) == indexes(replay(cluster.events()))


def in_vc(actor_id: str, cpu: float) -> ScheduleRequest:
    return msgspec.structs.replace(make_actor(actor_id, cpu), vcluster_id="vc")


def test_trying_new_flexible_nodes_leaves_the_indexes_as_a_replay_builds_them() -> None:
    cluster = Cluster()
    slow = Taint("slow", "true", "PreferNoSchedule")  # stand-ins inherit it: the PreferNoSchedule index too
    for index in range(4):
        cluster.add_node(f"n{index}", {"CPU": 4}, labels={"rack": f"r{index % 2}"}, taints=[slow])
    cluster.create_virtual_cluster("vc", spec(max_cpu=10))
    for index in range(3):  # 3 CPUs each: every one needs a new flexible node, tried on stand-ins
        assert isinstance(cluster.submit(in_vc(f"a{index}", 3)), Placed)
    assert len(cluster.view.tree.clusters["vc"].scope.nodes) == 3
    assert indexes(cluster.view) == indexes(replay(cluster.events()))
