"""The indexed pending queue re-tries only what an event could unblock, and decides exactly as a full re-try."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas import ActorAffinitySchedulingStrategy, ScheduleRequest
from services import CORE_BUILD
from services.core import Cluster, Pending
from services.core.labels import ZONE
from services.core.retries import Retrier
from services.core.state import ActorState, ClusterView
from services.core.state.snapshot import decode, dump, encode, restore
from services.core.waiting import WaitingIndex
from tests.core.builders import affinity, make_actor, make_cluster, on_node
from tests.core.test_properties import SETTINGS, NodeSpec, Op, actor_requests, add, apply, node_specs, ops
from tests.core.vc_builders import fixed, spec

SUBCLASSES_THE_CORE = pytest.mark.skipif(
    CORE_BUILD == "compiled", reason="compiled classes take no Python subclass: the reference runs on the sources"
)


class FullRetrier(Retrier):
    """The reference: every re-try walks the whole queue of the scope in order and tries each piece of work."""

    def retry_scope(self, scope: ClusterView, *, wake_all: bool, roomier: set[str] | None = None) -> bool:
        placed_any = False
        for work_id in sorted(scope.pending, key=self.queue_key):
            if work_id not in scope.pending or not (wake_all or self._waits_on_placement(work_id)):
                continue
            actor = scope.actors.get(work_id)
            if actor is not None:
                placed_any |= self.try_actor(actor)
            else:
                placed_any |= self.try_group(scope.groups[work_id])
        return placed_any


class FullRetryCluster(Cluster):
    """A cluster whose waiting work is re-tried by `FullRetrier`."""

    def _use_view(self, view: ClusterView) -> None:
        super()._use_view(view)
        indexed = self.retries
        self.retries = FullRetrier(
            view, self.vclusters, try_actor=indexed.try_actor, try_group=indexed.try_group, work_of=indexed.work_of
        )


TENANTS = {"fixed": spec(fixed(2, 2)), "flex": spec(min_cpu=1, max_cpu=6), "grow": spec(min_cpu=0.5, max_cpu=4)}
"""Virtual clusters the workloads create first: one of fixed-size nodes, two whose flexible nodes borrow (room one
gives back to the root may let the other grow)."""


@st.composite
def bursts(draw: st.DrawFn) -> Op:
    """Several actors of one shape at once (different priorities and restarts), at the root or in a virtual
    cluster: the buckets the index skips."""
    request = draw(actor_requests())
    tenant = draw(st.sampled_from([None, None, "fixed", "flex", "grow"]))
    return Op("burst", draw(st.integers(2, 6)), request=msgspec.structs.replace(request, vcluster_id=tenant))


destroys = st.builds(Op, st.just("destroy"), st.integers(0, len(TENANTS) - 1))


@dataclass(frozen=True)
class Workload:
    seed: int
    nodes: list[NodeSpec]
    ops: list[Op]


workloads = st.builds(
    Workload,
    st.integers(0, 2**32),
    st.lists(node_specs, min_size=1, max_size=6),
    st.lists(st.one_of(ops(), bursts(), bursts(), destroys), min_size=10, max_size=40),
)


def run(cluster: Cluster, op: Op, step: int) -> None:
    if op.kind == "destroy":
        tenant = sorted(TENANTS)[op.pick]
        if tenant in cluster.view.tree.clusters:
            cluster.destroy_virtual_cluster(tenant, force=True)
        return
    if op.kind != "burst":
        apply(cluster, op, step)
        return
    assert isinstance(op.request, ScheduleRequest)
    if op.request.vcluster_id and op.request.vcluster_id not in cluster.view.tree.clusters:
        return
    for copy in range(op.pick):
        request = msgspec.structs.replace(
            op.request, actor_id=f"b{step}-{copy}", priority=copy % 2, max_restarts=copy % 3 - 1
        )
        cluster.submit(request)


@SUBCLASSES_THE_CORE
@SETTINGS
@given(workloads)
def test_the_indexed_queue_decides_exactly_as_a_full_re_try(workload: Workload) -> None:
    indexed: Cluster = Cluster(seed=workload.seed)
    full: Cluster = FullRetryCluster(seed=workload.seed)
    for cluster in (indexed, full):
        for index, node in enumerate(workload.nodes):
            add(cluster, node, f"n{index}")
        for tenant, tenant_spec in TENANTS.items():
            cluster.create_virtual_cluster(tenant, tenant_spec)
    for step, op in enumerate(workload.ops):
        if step == len(workload.ops) // 2:  # both taken over from a snapshot, the index rebuilt from the view
            indexed, full = taken_over(indexed), taken_over(full)
        for cluster in (indexed, full):
            run(cluster, op, step)
        assert indexed.events() == full.events(), f"after step {step} ({op.kind})"
        assert list(indexed.view.pending) == list(full.view.pending)


def taken_over(cluster: Cluster) -> Cluster:
    """A cluster of the same class going on from a snapshot of this one's view, caught up as a new leader is."""
    successor = type(cluster).from_view(restore(decode(encode(dump(cluster.view)))))
    successor.reconcile()
    return successor


def test_a_burst_of_one_shape_is_tried_once_per_freed_room() -> None:
    cluster = make_cluster(nodes=2, cpu=2)
    for index in range(4):
        cluster.submit(make_actor(f"busy{index}"))
    for index in range(50):
        cluster.submit(make_actor(f"wait{index:02d}"))
    tries = count_tries(cluster)
    cluster.remove_actor("busy0")
    assert tries() == 2  # wait00 takes the room freed, wait01 finds none: the 48 others of its shape are not tried
    assert "wait00" in cluster.placements()
    assert sorted(cluster.view.pending) == [f"wait{index:02d}" for index in range(1, 50)]


@SUBCLASSES_THE_CORE
def test_a_burst_of_one_shape_in_a_cluster_at_its_maximum_is_tried_once_per_freed_room() -> None:
    """A virtual cluster that may grow is no exception: a failed try draws nothing from the seeded generator, so
    work of the same shape fails alike there too (a removal tried all 48 before, 25 times the CPU)."""
    decided = []
    for kind in (Cluster, FullRetryCluster):
        cluster = kind(seed=3)
        for index in range(4):
            cluster.add_node(f"n{index}", {"CPU": 8.0})
        cluster.create_virtual_cluster("t", spec(min_cpu=1, max_cpu=2))
        for index in range(52):
            cluster.submit(make_actor(f"w{index:02d}", vcluster_id="t"))
        tries = count_tries(cluster)
        cluster.remove_actor("w00")
        assert "w02" in cluster.placements("t")  # the next in the queue takes the room freed
        if kind is Cluster:
            assert tries() == 2  # w02 placed, w03 finds no room: the 48 others of its shape are not tried
        decided.append(cluster.events())
    assert decided[0] == decided[1]


def test_room_a_shrinking_cluster_gives_back_places_work_another_cluster_could_not_grow_for() -> None:
    cluster = Cluster(seed=5)
    cluster.add_node("n0", {"CPU": 4.0})
    for tenant in ("a", "b"):
        cluster.create_virtual_cluster(tenant, spec(min_cpu=0.5, max_cpu=4))
    cluster.submit(make_actor("big", 3, vcluster_id="a"))
    assert isinstance(cluster.submit(make_actor("waits", 2, vcluster_id="b")), Pending)  # n0 lends b 0.5 more
    cluster.remove_actor("big")  # a's flexible node shrinks: n0 has room again
    assert "waits" in cluster.placements("b")


def test_room_given_back_where_there_was_enough_already_does_not_re_try_another_clusters_work() -> None:
    """Its work waits for another reason (here a label no node has): more room on a node that had enough cannot
    change that, so a removal in one tenant no longer re-tries the waiting work of every other."""
    cluster = Cluster(seed=5)
    cluster.add_node("n0", {"CPU": 16.0})
    for tenant in ("a", "b"):
        cluster.create_virtual_cluster(tenant, spec(min_cpu=0.5, max_cpu=8))
    cluster.submit(make_actor("used", 3, vcluster_id="a"))
    assert isinstance(cluster.submit(make_actor("nvme", 1, vcluster_id="b", label_selector={"disk": "nvme"})), Pending)
    tries = count_tries(cluster)
    cluster.remove_actor("used")
    assert tries() == 0
    assert list(cluster.view.scope("b").pending) == ["nvme"]


def count_tries(cluster: Cluster) -> Callable[[], int]:
    """Count the waiting actors re-tried from now on; the returned function tells how many so far."""
    tried: list[str] = []
    retries = cluster.retries
    original = retries.try_actor

    def counting(actor: ActorState) -> bool:
        tried.append(actor.request.actor_id)
        return original(actor)

    retries.try_actor = counting
    return lambda: len(tried)


def test_an_index_follows_work_in_and_out() -> None:
    index = WaitingIndex()
    for arrival in (3, 1, 2):
        index.file("", f"w{arrival}", arrival, (0, "shape"), same_outcome=True, on_placement=False)
    index.file("", "hi", 9, (1, "shape"), same_outcome=True, on_placement=False)
    assert list(index.walk("", everything=True)) == ["hi", "w1", "w2", "w3"]
    index.unfile("w2")
    assert list(index.walk("", everything=True)) == ["hi", "w1", "w3"]
    assert list(index.walk("", everything=False)) == []


def test_work_kept_out_by_an_anti_affinity_comes_in_when_its_holder_leaves_a_node_too_small_for_it() -> None:
    cluster = make_cluster(nodes=2, cpu=4, zones=1)
    cluster.submit(make_actor("holder", 1, label_selector=on_node("n1"), scheduling_strategy=anti_app_a_in_zone()))
    cluster.submit(make_actor("filler", 3, label_selector=on_node("n1")))
    assert isinstance(cluster.submit(make_actor("app-a", 2, labels={"app": "a"})), Pending)
    cluster.remove_actor("holder")  # n1 has 1 CPU free now, too little; n0, in the same zone, is open again
    assert cluster.placements()["app-a"] == "n0"


def anti_app_a_in_zone() -> ActorAffinitySchedulingStrategy:
    return affinity("app", "NOT_IN", ["a"], topology_key=ZONE)
