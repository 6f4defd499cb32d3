"""A deciding view's digest equals a replay's: from the whole log, and from a snapshot the decider took plus the tail.

What a decision keeps for itself (indexes it widens, stand-in nodes it tries) must never reach the folded state,
or a digest check after a fail-over raises a false alarm.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas import AnyEvent, ScheduleRequest
from services.core import Cluster
from services.core.errors import RejectedError
from services.core.state import replay
from services.core.state.snapshot import decode, digest, dump, encode, restore
from tests.core.builders import affinity, make_actor
from tests.core.test_properties import NodeSpec, Op, Workload, add, apply, new_cluster, node_specs, ops
from tests.core.vc_builders import fixed, spec
from tests.support.examples import examples

CUSTOM_KEYS = ["rack", "row", "power-domain"]


@dataclass(frozen=True)
class VcOp:
    """Create a virtual cluster (under the root or a live one), destroy one, submit into one, or bring a removed
    node back under its old id."""

    kind: str
    pick: int
    cpus: tuple[float, ...] = ()
    max_cpu: float | None = None
    request: ScheduleRequest | None = None


@st.composite
def custom_affinity_requests(draw: st.DrawFn) -> ScheduleRequest:
    """Actors with labels and a (soft or hard) affinity on a topology key no node label index tracks at start."""
    operator = draw(st.sampled_from(["IN", "NOT_IN", "EXISTS", "DOES_NOT_EXIST"]))
    return make_actor(
        "placeholder",
        draw(st.sampled_from([0.5, 1.0, 2.0])),
        labels={"app": draw(st.sampled_from(["a", "b"]))},
        scheduling_strategy=affinity(
            "app",
            operator,
            ["a"] if operator in ("IN", "NOT_IN") else [],
            soft=draw(st.booleans()),
            topology_key=draw(st.sampled_from(CUSTOM_KEYS)),
        ),
    )


vc_ops = st.one_of(
    st.builds(
        VcOp,
        st.just("create"),
        st.integers(0, 50),
        st.lists(st.sampled_from([1.0, 2.0]), max_size=2).map(tuple),
        st.sampled_from([None, 2.0, 4.0, 8.0, 8.0]),
    ),
    st.builds(VcOp, st.just("destroy"), st.integers(0, 50)),
    st.builds(VcOp, st.just("revive"), st.integers(0, 50)),
    st.builds(VcOp, st.just("submit"), st.integers(0, 50), request=custom_affinity_requests()),
    st.builds(VcOp, st.just("submit"), st.integers(0, 50), request=st.just(make_actor("placeholder", 1))),
)
any_op = st.one_of(ops(), st.builds(Op, st.just("submit"), request=custom_affinity_requests()), vc_ops, vc_ops)
racked_nodes = node_specs.map(
    lambda node: dataclasses.replace(node, labels={**node.labels, "row": "r0" if node.zone else "r1"})
)


@dataclass(frozen=True)
class Mix:
    seed: int
    nodes: list[NodeSpec]
    ops: list[Op | VcOp]


workloads = st.builds(
    Mix,
    st.integers(0, 2**32),
    st.lists(racked_nodes, min_size=1, max_size=8),
    st.lists(any_op, min_size=5, max_size=40),
)


def run(cluster: Cluster, workload: Mix, op: Op | VcOp, step: int) -> None:
    """One command; one the core refuses (a spec its parent cannot hold, a destroy with live work) changes nothing."""
    if isinstance(op, Op):
        apply(cluster, op, step)
        return
    gone = [index for index in range(len(workload.nodes)) if f"n{index}" not in cluster.view.nodes]
    if op.kind == "revive" and gone:
        index = gone[op.pick % len(gone)]
        add(cluster, workload.nodes[index], f"n{index}")
        return
    live = sorted(vc for vc, state in cluster.view.tree.clusters.items() if state.status == "admitted")
    try:
        if op.kind == "create":
            parent = live[op.pick % len(live)] if live and op.pick % 3 == 0 else None
            groups = [fixed(*op.cpus)] if op.cpus else []
            cluster.create_virtual_cluster(f"vc{step}", spec(*groups, max_cpu=op.max_cpu), parent)
        elif op.kind == "destroy" and live:
            cluster.destroy_virtual_cluster(live[op.pick % len(live)], force=op.pick % 2 == 0)
        elif op.kind == "submit" and live and op.request is not None:
            vc_id = live[op.pick % len(live)]
            cluster.submit(msgspec.structs.replace(op.request, actor_id=f"a{step}", vcluster_id=vc_id))
    except RejectedError:
        pass


SETTINGS = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(workloads, st.integers(0, 40))
def test_the_deciders_digest_equals_a_replay_from_the_log_and_from_its_own_snapshot(
    workload: Mix, snapshot_step: int
) -> None:
    cluster = new_cluster(Workload(workload.seed, workload.nodes, []))
    log: list[AnyEvent] = cluster.events()
    blob, at, next_step = encode(dump(cluster.view, len(log))), len(log), 0
    for step, op in enumerate(workload.ops):
        log += cluster.decided(lambda: run(cluster, workload, op, step)).events  # noqa: B023 - called at once
        if step == snapshot_step:
            blob, at, next_step = encode(dump(cluster.view, len(log))), len(log), step + 1
    live = digest(cluster.view)
    assert digest(replay(log, workload.seed)) == live, "a full replay differs from the decider"
    resumed = restore(decode(blob))
    for event in log[at:]:
        resumed.fold(event)
    assert digest(resumed) == live, "the decider's snapshot plus the tail differs from the decider"
    successor = Cluster.from_view(restore(decode(blob)))  # a decider that takes over from the snapshot
    taken_over = log[:at]
    for step, op in enumerate(workload.ops[next_step:], next_step):
        taken_over += successor.decided(lambda: run(successor, workload, op, step)).events  # noqa: B023
    assert digest(successor.view) == digest(replay(taken_over, workload.seed)), "a successor differs from a replay"


def in_vc(actor_id: str, cpu: float, **kwargs: Any) -> ScheduleRequest:
    return msgspec.structs.replace(make_actor(actor_id, cpu, **kwargs), vcluster_id="vc")


def test_an_affinity_on_a_custom_topology_key_leaves_the_digest_as_a_replay_has_it() -> None:
    """A decision on `rack` (a key outside the actor index) leaves the folded state and digest as a replay has them."""
    cluster = Cluster()
    for index in range(2):
        cluster.add_node(f"n{index}", {"CPU": 4}, labels={"rack": f"r{index}"})
    cluster.submit(make_actor("web", 1, labels={"app": "web"}))
    cluster.submit(make_actor("cache", 1, scheduling_strategy=affinity("app", "IN", ["web"], topology_key="rack")))
    assert digest(cluster.view) == digest(replay(cluster.events()))


def test_stand_in_nodes_leave_the_tombstone_of_a_flexible_node_whose_host_came_back() -> None:
    """A new flexible node tried on a host that died and came back must not drop the old node's tombstone."""
    cluster = Cluster(seed=0)
    for node_id in ("n0", "n1", "n2"):
        cluster.add_node(node_id, {"CPU": 4})
    cluster.create_virtual_cluster("vc", spec(max_cpu=8))
    for index in range(3):
        cluster.submit(in_vc(f"a{index}", 1))
    cluster.remove_node("n0")
    cluster.add_node("n0", {"CPU": 4})
    cluster.submit(in_vc("b", 1))
    cluster.submit(in_vc("c", 3))
    replayed = replay(cluster.events())
    assert sorted(replayed.tree.clusters["vc"].scope.dead) == ["vc-flex-n0"], "the case this test is about"
    assert digest(cluster.view) == digest(replayed)


def test_a_placement_that_a_shrink_in_the_same_event_makes_room_for_folds_on_replay() -> None:
    """A destroy frees a child's virtual node; the flexible node it was carved from shrinks, and the placement that
    shrink makes room for on the physical node carries it: a replay folds that placement, as the decider did."""
    gpu = ScheduleRequest("placeholder", {"CPU": 0.5, "GPU": 1.0})
    nodes = [
        NodeSpec({"CPU": 1.0}, {"row": "r1"}, [], None),
        NodeSpec({"CPU": 1.0, "GPU": 1.0}, {"row": "r1"}, [], None),
    ]
    submit = Op("submit", 0, gpu, None, None, None)
    ops: list[Op | VcOp] = [
        submit,
        Op("remove_actor", 0, None, None, None, {}),
        VcOp("create", 0, (), None, None),
        VcOp("create", 0, (1.0,), None, None),
        submit,
        VcOp("destroy", 1, (), None, None),
    ]
    workload = Mix(0, nodes, ops)
    cluster = new_cluster(Workload(workload.seed, workload.nodes, []))
    for step, op in enumerate(workload.ops):
        run(cluster, workload, op, step)
    assert cluster.view.actors["a4"].status == "placed"
    assert digest(replay(cluster.events(), workload.seed)) == digest(cluster.view)
