"""A nested cluster's admission grows its parent piece by piece: each fixed-size node whole on one parent node."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas import Queued, VirtualCluster
from services.core import Cluster
from services.core.state.model import EPSILON
from tests.core.builders import make_actor
from tests.core.vc_builders import Policy, admitted, fixed, parent_of, spec
from tests.support.examples import examples

SETTINGS = settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def nodes(*cpus: float) -> Cluster:
    """A cluster of nodes n1.. with these CPU counts."""
    cluster = Cluster(seed=0)
    for index, cpu in enumerate(cpus, start=1):
        cluster.add_node(f"n{index}", {"CPU": cpu})
    return cluster


def grown(cluster: Cluster, vc_id: str) -> dict[str, float]:
    """The CPUs of a cluster's flexible nodes, by the node each was carved from."""
    info = cluster.virtual_cluster(vc_id)
    return {node.parent_node: node.total_resources.get("CPU", 0.0) for node in info.nodes if node.flexible}


@dataclass(frozen=True)
class Case:
    sentence: str
    cluster: Callable[[], Cluster]
    parent: VirtualCluster
    child: VirtualCluster
    growth: dict[str, float]
    """The parent's flexible CPUs per host afterwards."""
    says: str = ""
    """Empty: the child is admitted; else words of the reason it waits."""


CASES = [
    *(
        Case(
            f"a {policy} child of two 3-CPU nodes under a parent that may grow, on two 4-CPU nodes, is admitted: "
            "the parent grows 3 on each",
            lambda: nodes(4, 4),
            VirtualCluster(),
            spec(fixed(3, 3, policy=policy)),
            {"n1": 3, "n2": 3},
        )
        for policy in ("PACK", "SPREAD", "STRICT_SPREAD")
    ),
    Case(
        "a child's 6-CPU node (indivisible, as a STRICT_PACK group of 3 + 3 would be) on two 4-CPU nodes waits "
        "with the reason, and the parent does not grow",
        lambda: nodes(4, 4),
        VirtualCluster(),
        spec(fixed(6)),
        {},
        says="fixed_size_nodes[0].nodes[0] (CPU 6) fits whole on no node of virtual cluster team, free or grown on "
        "one node within its maximum and its ancestors'",
    ),
    Case(
        "fragmented free room in the parent (2 + 2 CPUs) is no room for a 3-CPU node: the parent grows 3 on one host",
        lambda: nodes(4, 8),
        spec(fixed(2, 2, policy="STRICT_SPREAD"), max_cpu=4),
        spec(fixed(3)),
        {"n2": 3},
    ),
    Case(
        "a parent whose maximum allows one 3-CPU node but not two does not grow at all (all or nothing)",
        lambda: nodes(4, 4),
        VirtualCluster(flexible_resource_max={"CPU": 5}),
        spec(fixed(3, 3, policy="STRICT_SPREAD")),
        {},
        says="fixed_size_nodes[0].nodes[1] (CPU 3) fits whole on no node of virtual cluster team apart from the "
        "group's other nodes (STRICT_SPREAD)",
    ),
    Case(
        "a STRICT_SPREAD child of three nodes on two hosts waits: the parent has one flexible node per host",
        lambda: nodes(8, 8),
        VirtualCluster(),
        spec(fixed(1, 1, 1, policy="STRICT_SPREAD")),
        {},
        says="fixed_size_nodes[0].nodes[2] (CPU 1) fits whole on no node of virtual cluster team apart from",
    ),
    Case(
        "the fixed-size nodes take whole hosts' room and the flexible minimum the rest, carved from both hosts",
        lambda: nodes(4, 4),
        VirtualCluster(),
        spec(fixed(3, 3, policy="STRICT_SPREAD"), min_cpu=2),
        {"n1": 4, "n2": 4},
    ),
    Case(
        "a flexible minimum the parent may not grow for waits with the reason",
        lambda: nodes(4, 4),
        VirtualCluster(flexible_resource_max={"CPU": 6}),
        spec(fixed(3, 3, policy="STRICT_SPREAD"), min_cpu=2),
        {},
        says="the flexible minimum is CPU 2 more than virtual cluster team has free or may grow on nodes it may use",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.sentence for case in CASES])
def test_a_parent_grows_per_piece_of_its_childs_admission(case: Case) -> None:
    cluster = case.cluster()
    admitted(cluster.create_virtual_cluster("team", case.parent))
    outcome = cluster.create_virtual_cluster("kid", case.child, parent="team")
    if case.says:
        assert isinstance(outcome, Queued), outcome
        assert case.says in outcome.message
        assert case.says in cluster.virtual_cluster("kid").message
    else:
        admitted(outcome)
        assert_whole(cluster, "kid")
    assert {host: cpu for host, cpu in grown(cluster, "team").items() if cpu} == case.growth


def test_a_child_waiting_for_room_is_admitted_once_the_parent_may_grow_for_each_node() -> None:
    """The reproduction, with a 4-CPU actor holding n2 at first: the child waits, then gets in once it is gone."""
    cluster = nodes(4, 4)
    cluster.submit(make_actor("busy", 4, label_selector={"corral.io/node-id": "n2"}))
    admitted(cluster.create_virtual_cluster("team", VirtualCluster()))
    assert isinstance(cluster.create_virtual_cluster("kid", spec(fixed(3, 3)), parent="team"), Queued)
    assert grown(cluster, "team") == {}
    cluster.remove_actor("busy")
    assert cluster.virtual_cluster("kid").state == "admitted"
    assert_whole(cluster, "kid")
    assert Cluster.from_events(cluster.events(), seed=0).virtual_cluster("team") == cluster.virtual_cluster("team")


@pytest.mark.parametrize(
    ("team_max", "admits"),
    [(None, True), (8, True), (7, False)],
    ids=[
        "a grandchild's nodes grow its parent and the grandparent per piece, on two hosts",
        "the grandparent's maximum is met exactly by the two pieces",
        "the grandparent's maximum allows one piece but not both: nothing grows (it counts every piece, not each)",
    ],
)
def test_a_grandchild_grows_every_ancestor_per_piece_within_each_maximum(team_max: float | None, admits: bool) -> None:
    cluster = Cluster(seed=0)
    cluster.add_node("n1", {"CPU": 8}, {"host": "a"})
    cluster.add_node("n2", {"CPU": 8}, {"host": "b"})
    admitted(cluster.create_virtual_cluster("team", spec(max_cpu=team_max)))
    for host in ("a", "b"):  # the team holds a flexible node of 1 CPU, in use, on each host
        cluster.submit(make_actor(f"on-{host}", 1, vcluster_id="team", label_selector={"host": host}))
    admitted(cluster.create_virtual_cluster("squad", VirtualCluster(), parent="team"))
    outcome = cluster.create_virtual_cluster("unit", spec(fixed(3, 3, policy="STRICT_SPREAD")), parent="squad")
    if admits:
        admitted(outcome)
        assert_whole(cluster, "unit")
        assert grown(cluster, "team") == {"n1": 4, "n2": 4}
        assert sorted(grown(cluster, "squad").values()) == [3, 3]
    else:
        assert isinstance(outcome, Queued)
        assert "fixed_size_nodes[0].nodes[1] (CPU 3) fits whole on no node of virtual cluster squad" in outcome.message
        assert grown(cluster, "team") == {"n1": 1, "n2": 1}
        assert grown(cluster, "squad") == {}


def assert_whole(cluster: Cluster, vc_id: str) -> None:
    """Every fixed-size node of `vc_id` holds exactly its spec's resources, whole on one node of the parent, and no
    node of the parent's scope holds more than it has."""
    info = cluster.virtual_cluster(vc_id)
    sizes = [node.resources for group in info.spec.fixed_size_nodes for node in group.nodes]
    parent = cluster.view.scope(info.parent or "")
    for node in info.nodes:
        if not node.flexible:
            slot = int(node.node_id.rsplit("-", 1)[1])
            assert node.total_resources == sizes[slot]
            assert node.parent_node in parent.nodes
    for parent_node in parent.nodes.values():
        assert all(free > -EPSILON for free in parent_node.free.values()), parent_node.node_id


@st.composite
def fitting(draw: st.DrawFn) -> tuple[list[float], list[float], Policy, float | None]:
    """Host CPUs, a child's fixed-size node CPUs that fit one per host (slack on top), a policy, a parent maximum
    (None: unbounded) at least their sum."""
    pieces = draw(st.lists(st.integers(1, 6), min_size=1, max_size=4))
    slack = draw(st.lists(st.integers(0, 3), min_size=len(pieces), max_size=len(pieces)))
    extra = draw(st.lists(st.integers(1, 8), max_size=2))
    hosts = [piece + more for piece, more in zip(pieces, slack, strict=True)] + extra
    policy: Policy = draw(st.sampled_from(["PACK", "SPREAD", "STRICT_SPREAD"]))
    maximum = draw(st.none() | st.integers(sum(pieces), sum(pieces) + 4))
    return [float(cpu) for cpu in draw(st.permutations(hosts))], [float(p) for p in pieces], policy, maximum


@SETTINGS
@given(fitting(), st.integers(0, 3))
def test_a_child_whose_nodes_fit_one_per_host_is_admitted_each_node_whole_on_one_parent_node(
    drawn: tuple[list[float], list[float], Policy, float | None], seed: int
) -> None:
    hosts, pieces, policy, maximum = drawn
    cluster = Cluster(seed=seed)
    for index, cpu in enumerate(hosts):
        cluster.add_node(f"n{index}", {"CPU": cpu})
    admitted(cluster.create_virtual_cluster("team", spec(max_cpu=maximum)))
    admitted(cluster.create_virtual_cluster("kid", spec(fixed(*pieces, policy=policy)), parent="team"))
    assert_whole(cluster, "kid")
    team = cluster.virtual_cluster("team")
    assert sum(team.total_resources.values()) <= (maximum if maximum is not None else float("inf")) + EPSILON
    if policy == "STRICT_SPREAD":
        vnodes = [node.node_id for node in cluster.virtual_cluster("kid").nodes]
        assert len({parent_of(cluster, "kid", vnode) for vnode in vnodes}) == len(pieces)
