"""A virtual cluster's walk asks `Lender.room_fits`, read from plain fields, whether work fits a node's lent room; it
must answer what `fits(Lender.room(node), need)` answers, whatever the nesting, the nodes' resources (memory or not),
the work placed and removed, and the cluster's maximum."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import ScheduleRequest, VirtualCluster
from services.core import Cluster
from services.core.errors import RejectedError
from services.core.state import NodeState, fits
from services.core.state.tree import flexible_id
from services.core.vclusters.borrowing import Lender
from tests.core.vc_builders import fixed
from tests.support.examples import examples

SETTINGS = settings(max_examples=examples(60), deadline=None)
NEEDS = [(cpu, memory) for cpu in (0.0, 0.5, 1.0, 2.5, 7.0) for memory in (0.0, 0.5, 3.0)]


def _flexible(max_cpu: float, max_memory: float | None, *groups: object) -> VirtualCluster:
    maximum = {"CPU": max_cpu} if max_memory is None else {"CPU": max_cpu, "memory": max_memory}
    return VirtualCluster(flexible_resource_max=maximum, fixed_size_nodes=list(groups))  # type: ignore[arg-type]


def _cluster(seed: int) -> tuple[Cluster, list[str]]:
    """Nodes with and without memory, a top-level flexible cluster, a child of it and a grandchild, work inside each
    (placed, some removed again)."""
    draw = random.Random(seed)
    cluster = Cluster(seed=seed)
    for index in range(draw.randint(2, 7)):
        resources = {"CPU": float(draw.randint(1, 8))}
        if draw.random() < 0.7:
            resources["memory"] = float(draw.randint(1, 16))
        cluster.add_node(f"n{index}", resources, zone=f"z{index % 2}")
    clusters = [("team", None), ("squad", "team"), ("unit", "squad")]
    made = []
    for vc_id, parent in clusters:
        memory = None if draw.random() < 0.3 else float(draw.randint(1, 12))
        groups = [fixed(1.0)] if draw.random() < 0.3 else []
        cluster.create_virtual_cluster(vc_id, _flexible(float(draw.randint(1, 12)), memory, *groups), parent=parent)
        made.append(vc_id)
    held: list[str] = []
    for step in range(draw.randint(0, 25)):
        if held and draw.random() < 0.3:
            cluster.remove_actor(held.pop(draw.randrange(len(held))))
            continue
        resources = {"CPU": draw.choice((0.5, 1.0, 2.0))}
        if draw.random() < 0.5:
            resources["memory"] = draw.choice((0.5, 1.0, 4.0))
        try:
            cluster.submit(ScheduleRequest(f"a{step}", resources, vcluster_id=draw.choice(made)))
        except RejectedError:
            continue
        held.append(f"a{step}")
    return cluster, made


@SETTINGS
@given(st.integers(min_value=0, max_value=2**32))
def test_room_fits_answers_what_the_room_does(seed: int) -> None:
    cluster, made = _cluster(seed)
    root = cluster.view
    for vc_id in made:
        vc = root.tree.clusters[vc_id]
        parent_nodes = root.nodes if not vc.parent else root.tree.clusters[vc.parent].scope.nodes
        standins = {f"new-{host}": host for host in parent_nodes if flexible_id(vc_id, host) not in vc.vnodes}
        lender = Lender(root, cluster.vclusters.spec_of, ("claimant", 0))
        room, room_fits = lender.room(vc, standins), lender.room_fits(vc, standins)
        assert room_fits is not None, "no root node holds room here"
        standin_nodes = [NodeState(standin, 0, {}, {}) for standin in standins]  # empty: all its room is lent
        for node in [*vc.scope.nodes.values(), *standin_nodes]:
            for cpu, memory in NEEDS:
                need = {"CPU": cpu, "memory": memory}
                assert room_fits(node, cpu, memory) == fits(room(node), need), (vc_id, node.node_id, need, room(node))
