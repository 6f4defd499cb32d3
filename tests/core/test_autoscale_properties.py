"""Properties of the autoscaler's planner: the scheduler places the demand each launch was for, no maximum is ever
exceeded, planning changes nothing in the view, and the order the planner sees pending work in does not change
the plan (the order work arrived in does not change the demand either)."""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

import msgspec
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from schemas import (
    FixedSizeNode,
    FixedSizeNodes,
    NodesLaunchRequested,
    PlacementGroupRequest,
    PlacementStrategy,
    Prefer,
    RunAfter,
    ScheduleRequest,
    SelectorSpec,
    VirtualCluster,
)
from services.autoscaler.handlers import Decider, node_id_of
from services.core import Cluster
from services.core.autoscale import Fleet, ScalePlan, launched_node, plan
from services.core.labels import NODE_ID, NODE_TYPE
from services.core.state import ClusterView, give
from services.core.state.snapshot import digest
from tests.core.autoscale_builders import RARE, SPARE, TYPES, config
from tests.core.builders import affinity
from tests.support.examples import examples

SETTINGS = settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
SCALING = config(TYPES + SPARE)
ROOMY = Fleet(running={"spare": tuple(f"spare{i}" for i in range(100))})
"""100 running spare nodes: a budget of 100 launches, so every demand a type can serve is counted (work the round
leaves waiting would compete with the counted work for the new nodes)."""

SELECTORS: list[SelectorSpec] = [
    {},
    {"type": "4c8g"},
    {"zone": "usa-2"},
    {"type": "nope"},
    {"accelerator-type": "A100"},
]
FALLBACKS = [[], [{"label_selector": {}}], [{"label_selector": {"type": "16c32g"}}]]
TOLERATIONS: list[SelectorSpec] = [{}, {"gpu_node": "exists()"}]


@dataclass(frozen=True)
class Ask:
    """`count` identical actors, or one placement group when `strategy` is set, of `priority`."""

    cpu: int
    gpu: int
    selector: int
    fallback: int
    toleration: int
    count: int
    strategy: PlacementStrategy | None
    bundles: int
    apart: bool = False
    """Actors with hard anti-affinity to their own label (one per node)."""
    priority: int = 0


ASKS = st.builds(
    Ask,
    cpu=st.integers(1, 4),
    gpu=st.integers(0, 1),
    selector=st.integers(0, len(SELECTORS) - 1),
    fallback=st.integers(0, len(FALLBACKS) - 1),
    toleration=st.integers(0, len(TOLERATIONS) - 1),
    count=st.integers(1, 4),
    strategy=st.sampled_from([None, None, "PACK", "STRICT_PACK", "STRICT_SPREAD", "SPREAD"]),
    bundles=st.integers(1, 3),
    apart=st.booleans(),
)

SMALL_GANGS = st.builds(
    Ask,
    cpu=st.integers(1, 2),
    gpu=st.just(0),
    selector=st.integers(0, 1),
    fallback=st.just(0),
    toleration=st.just(0),
    count=st.just(1),
    strategy=st.sampled_from(["PACK", "STRICT_PACK", "STRICT_SPREAD", "SPREAD"]),
    bundles=st.integers(2, 3),
)
"""Placement groups of small CPU bundles that existing 4c8g nodes' free room can hold in part."""


def prioritised(asks: st.SearchStrategy[Ask]) -> st.SearchStrategy[Ask]:
    """The asks, each of a priority 0 to 2."""
    return st.tuples(asks, st.integers(0, 2)).map(lambda pair: replace(pair[0], priority=pair[1]))


WORK = st.lists(prioritised(st.one_of(ASKS, SMALL_GANGS)), min_size=1, max_size=6)
"""What a round's properties draw: any work, of priorities 0 to 2, with placement groups that can mix existing free
room and new nodes."""
CLUSTER_WORK = st.lists(prioritised(ASKS), min_size=1, max_size=5)
"""What virtual clusters' properties draw: `ASKS` of priorities 0 to 2 (their placement groups are left out)."""


def requests(asks: list[Ask]) -> list[ScheduleRequest | PlacementGroupRequest]:
    """The pending work the asks describe, with ids by position."""
    found: list[ScheduleRequest | PlacementGroupRequest] = []
    for number, ask in enumerate(asks):
        resources = {"CPU": float(ask.cpu), **({"GPU": float(ask.gpu)} if ask.gpu else {})}
        tolerations = TOLERATIONS[ask.toleration]
        if ask.strategy:
            selectors = [SELECTORS[ask.selector]] * ask.bundles
            found.append(
                PlacementGroupRequest(
                    f"pg{number}",
                    [resources] * ask.bundles,
                    ask.strategy,
                    selectors,
                    tolerations,
                    priority=ask.priority,
                )
            )
            continue
        apart = {"labels": {"app": f"s{number}"}, "scheduling_strategy": affinity("app", "NOT_IN", [f"s{number}"])}
        for copy in range(ask.count):
            found.append(
                ScheduleRequest(
                    f"a{number}-{copy}",
                    resources,
                    label_selector=SELECTORS[ask.selector],
                    fallback_strategy=FALLBACKS[ask.fallback],  # type: ignore[arg-type]
                    tolerations=tolerations,
                    priority=ask.priority,
                    **(apart if ask.apart else {}),  # type: ignore[arg-type]
                )
            )
    return found


def submitted(work: list[ScheduleRequest | PlacementGroupRequest], busy: int, roomy: int = 0) -> Cluster:
    """A cluster of `busy` full 2-CPU nodes and `roomy` 4-CPU nodes with 2 CPUs free (a placement group can mix their
    free room with new nodes), with the work submitted in this order."""
    cluster = Cluster(rare_resources=RARE)
    for index in range(busy):
        cluster.add_node(f"busy{index}", {"CPU": 2}, {"type": "4c8g"})
        cluster.submit(ScheduleRequest(f"filler{index}", {"CPU": 2}))
    for index in range(roomy):
        cluster.add_node(f"roomy{index}", {"CPU": 4}, {"type": "4c8g", "zone": "usa-1"})
        cluster.submit(ScheduleRequest(f"half{index}", {"CPU": 2}, label_selector={NODE_ID: f"roomy{index}"}))
    for request in work:
        if isinstance(request, PlacementGroupRequest):
            cluster.create_placement_group(request)
        else:
            cluster.submit(request)
    return cluster


def fold_launch_requests(cluster: Cluster, result: ScalePlan) -> list[tuple[str, str]]:
    """Fold the launch requests the autoscaler writes for the plan; each planned node's type and launch id."""
    launches = []
    decider = Decider(SCALING, RARE, 1.0)
    existing = decider.existing(cluster.view, result)  # decided on the same view, folded after the launches
    for request in decider.launches(cluster.view, result, 0.0):
        assert isinstance(request, NodesLaunchRequested)
        cluster.fold(request, react=False)
        launches += [(request.node_type, launch_id) for launch_id in request.launch_ids]
    for held in existing:
        cluster.fold(held, react=False)
    return launches


def register_launches(cluster: Cluster, result: ScalePlan, *, one_by_one: random.Random | None = None) -> list[str]:
    """Fold the launch requests the autoscaler makes of the plan, register every planned node under the id and
    launch id the `local` provider gives it (the type's labels and taints, as a launched node does), and let the
    scheduler re-try its pending work once over all of them, or (`one_by_one`) after each registration, the nodes
    registering in an order that generator draws; the ids of the new nodes."""
    launches = fold_launch_requests(cluster, result)
    if one_by_one is not None:
        one_by_one.shuffle(launches)
    node_ids = []
    for type_name, launch_id in launches:
        node_id = node_id_of(type_name, launch_id)
        cluster.fold(launched_node(SCALING.node_types[type_name], node_id, launch_id, RARE), react=False)
        node_ids.append(node_id)
        if one_by_one is not None:
            cluster.reconcile()
    cluster.reconcile()
    return node_ids


def placed(cluster: Cluster, work_id: str) -> bool:
    """Whether an actor or placement group is placed."""
    scope = cluster.view.scope_of(work_id)
    work = scope.actors.get(work_id) or scope.groups.get(work_id)
    return work is not None and work.status == "placed"


PACKS = [
    Ask(1, 0, 1, 0, 0, 1, "PACK", 3),
    Ask(3, 0, 2, 0, 0, 1, None, 1),
    Ask(2, 0, 0, 0, 0, 1, "PACK", 3),
    Ask(1, 0, 0, 0, 0, 1, "PACK", 3),
    Ask(1, 0, 1, 0, 0, 1, "PACK", 3),
]
"""A round where, before nominated nodes, the scheduler broke a tie between new nodes otherwise than the replay and
left a counted group waiting (found by Hypothesis with 3,000 random rounds)."""
STRANDED_CPU_4 = [
    Ask(1, 0, 0, 0, 0, 1, "PACK", 2),
    Ask(3, 0, 0, 0, 1, 1, None, 1),
    Ask(3, 0, 0, 0, 1, 3, None, 1),
    Ask(1, 0, 1, 0, 0, 1, "PACK", 2),
]
"""A round where, before nominated nodes, the scheduler left a planned cpu-4 empty (found alike)."""


@SETTINGS
@example(asks=PACKS, busy=0, roomy=0)
@given(asks=WORK, busy=st.integers(0, 3), roomy=st.integers(0, 3))
def test_the_scheduler_places_the_demand_each_launch_was_for(asks: list[Ask], busy: int, roomy: int) -> None:
    """The claim: each launched node is nominated for the work the plan put on it, so the scheduler places
    that work there (ties between equally good nodes no longer decide it)."""
    cluster = submitted(requests(asks), busy, roomy)
    result = plan(cluster.view, SCALING, ROOMY, RARE)
    register_launches(cluster, result)
    counted = {work_id for launch in result.launches for work_id in launch.work_ids}
    assert {work_id for work_id in counted if not placed(cluster, work_id)} == set()


SPARE_CPU_4 = [
    Ask(2, 0, 0, 0, 0, 3, None, 1),
    Ask(2, 0, 0, 0, 0, 1, "STRICT_PACK", 3),
    Ask(2, 0, 0, 0, 0, 2, None, 1),
    Ask(1, 0, 0, 0, 0, 1, "STRICT_PACK", 3),
]
"""A round whose replay put one actor on a cpu-4 beside two cpu-16s with room for it, where the scheduler put it on
a cpu-16 and left the cpu-4 empty (found by Hypothesis in CI; the plan now tries each lightly loaded node away)."""


TIE = [
    Ask(1, 0, 0, 0, 0, 1, None, 1),
    Ask(2, 0, 0, 0, 0, 2, None, 1),
    Ask(2, 0, 0, 0, 0, 2, None, 1),
    Ask(4, 0, 0, 0, 0, 1, "PACK", 2),
    Ask(1, 0, 2, 0, 0, 1, None, 1),
]
"""A round where the scheduler may break a tie between a half-full cpu-16 and an empty cpu-4 otherwise than the
replay did, and leave a zone usa-2 actor without room on the cpu-16."""
MIXED = [
    Ask(1, 0, 0, 0, 0, 1, "STRICT_SPREAD", 3),
    Ask(1, 0, 0, 0, 0, 1, "STRICT_SPREAD", 3),
    Ask(2, 0, 1, 0, 0, 1, "PACK", 3, priority=2),
    Ask(2, 0, 1, 0, 0, 1, "STRICT_SPREAD", 3, priority=1),
    Ask(1, 0, 2, 0, 0, 1, None, 1),
    Ask(1, 0, 2, 0, 0, 1, None, 1, priority=2),
]
"""A round whose plan put a placement group's 2-CPU bundle on an existing half-free node and its other bundles on
new nodes: registering one at a time, other groups took that existing room first (found by Hypothesis)."""


@SETTINGS
@example(asks=SPARE_CPU_4, busy=0, roomy=0)
@example(asks=STRANDED_CPU_4, busy=0, roomy=1)
@given(asks=WORK, busy=st.integers(0, 3), roomy=st.integers(0, 3))
def test_every_node_the_planner_launches_is_used_by_the_scheduler(asks: list[Ask], busy: int, roomy: int) -> None:
    """No launch is wasted: once the planned nodes register, the scheduler puts work on every one of them."""
    cluster = submitted(requests(asks), busy, roomy)
    new = register_launches(cluster, plan(cluster.view, SCALING, ROOMY, RARE))
    assert empty(cluster, new) == []


@SETTINGS
@example(asks=SPARE_CPU_4, busy=0, roomy=0, order=random.Random(0))
@example(asks=TIE, busy=0, roomy=0, order=random.Random(0))
@example(asks=MIXED, busy=0, roomy=2, order=random.Random(101))
@given(asks=WORK, busy=st.integers(0, 3), roomy=st.integers(0, 3), order=st.randoms(use_true_random=False))
def test_nodes_registering_one_at_a_time_get_the_work_they_were_launched_for(
    asks: list[Ask], busy: int, roomy: int, order: random.Random
) -> None:
    """As in a real cluster, the planned nodes register one by one, in any order, and the scheduler re-tries after
    each (greedy on the first): the demand the plan counted is all placed, and no planned node is left empty."""
    cluster = submitted(requests(asks), busy, roomy)
    result = plan(cluster.view, SCALING, ROOMY, RARE)
    new = register_launches(cluster, result, one_by_one=order)
    counted = {work_id for launch in result.launches for work_id in launch.work_ids}
    assert {work_id for work_id in counted if not placed(cluster, work_id)} == set()
    assert empty(cluster, new) == []


def empty(cluster: Cluster, node_ids: list[str]) -> list[str]:
    """Those of the nodes that hold no actor and no bundle."""
    nodes = cluster.view.nodes
    return [node_id for node_id in node_ids if not nodes[node_id].actors | nodes[node_id].bundles]


@SETTINGS
@example(asks=TIE, busy=0, roomy=0)
@given(asks=WORK, busy=st.integers(0, 3), roomy=st.integers(0, 3))
def test_work_a_launch_was_for_and_still_waits_is_counted_again_by_the_next_round(
    asks: list[Ask], busy: int, roomy: int
) -> None:
    cluster = submitted(requests(asks), busy, roomy)
    result = plan(cluster.view, SCALING, ROOMY, RARE)
    new = register_launches(cluster, result)
    counted = {work_id for launch in result.launches for work_id in launch.work_ids}
    stranded = {work_id for work_id in counted if not placed(cluster, work_id)}
    again = plan(cluster.view, SCALING, running_with(cluster, new), RARE)
    recounted = {work_id for launch in again.launches for work_id in launch.work_ids}
    assert stranded <= recounted


def running_with(cluster: Cluster, new: list[str]) -> Fleet:
    """`ROOMY`'s fleet with the registered new nodes running too (under their types)."""
    running = dict(ROOMY.running)
    for node_id in new:
        node_type = cluster.view.nodes[node_id].labels[NODE_TYPE]
        running[node_type] = (*running.get(node_type, ()), node_id)
    return Fleet(running=running)


@SETTINGS
@given(
    asks=WORK,
    running=st.lists(st.integers(0, 12), min_size=3, max_size=3),
    launching=st.lists(st.integers(0, 3), min_size=3, max_size=3),
    speed=st.sampled_from([0.1, 0.5, 1.0, 3.0]),
)
def test_no_maximum_and_no_round_budget_is_ever_exceeded(
    asks: list[Ask], running: list[int], launching: list[int], speed: float
) -> None:
    names = list(config(TYPES).node_types)
    fleet = Fleet(
        running={name: tuple(f"{name}-r{i}" for i in range(count)) for name, count in zip(names, running, strict=True)},
        launching={name: tuple(f"{name}-l{i}" for i in range(n)) for name, n in zip(names, launching, strict=True)},
    )
    scaling = config(TYPES.replace("upscaling_speed: 1.0", f"upscaling_speed: {speed}"))
    result = plan(submitted(requests(asks), 0).view, scaling, fleet, RARE)
    budget = max(5, int(speed * sum(running)))
    assert sum(launch.count for launch in result.launches) <= budget
    for status in result.types:
        if status.running + status.launching <= status.max_workers:
            assert status.running + status.launching + status.planned <= status.max_workers, status


def shuffled_view(cluster: Cluster, rng: random.Random) -> ClusterView:
    """The cluster's view with its pending work, actors and groups held in another (dict) order."""
    view = cluster.view
    for name in ("pending", "actors", "groups"):
        items = list(getattr(view, name).items())
        rng.shuffle(items)
        setattr(view, name, dict(items))
    return view


@SETTINGS
@given(
    asks=WORK,
    busy=st.integers(0, 2),
    roomy=st.integers(0, 2),
    rng=st.randoms(use_true_random=False),
)
def test_the_order_the_planner_sees_pending_work_in_does_not_change_the_plan(
    asks: list[Ask], busy: int, roomy: int, rng: random.Random
) -> None:
    work = requests(asks)
    first = plan(submitted(work, busy, roomy).view, SCALING, ROOMY, RARE)
    second = plan(shuffled_view(submitted(work, busy, roomy), rng), SCALING, ROOMY, RARE)
    assert first == second


@SETTINGS
@given(asks=WORK, busy=st.integers(0, 2), rng=st.randoms(use_true_random=False))
def test_the_order_work_arrived_in_does_not_change_the_demand(asks: list[Ask], busy: int, rng: random.Random) -> None:
    work = requests(asks)
    shuffled = list(work)
    rng.shuffle(shuffled)
    first = plan(submitted(work, busy).view, SCALING, ROOMY, RARE)
    second = plan(submitted(shuffled, busy).view, SCALING, ROOMY, RARE)
    assert first.demand == second.demand


@SETTINGS
@given(asks=WORK, busy=st.integers(0, 2), roomy=st.integers(0, 2))
def test_planning_changes_nothing_in_the_view_and_gives_the_same_plan_again(
    asks: list[Ask], busy: int, roomy: int
) -> None:
    view = submitted(requests(asks), busy, roomy).view
    before = digest(view)
    first = plan(view, SCALING, ROOMY, RARE)
    assert digest(view) == before
    assert plan(view, SCALING, ROOMY, RARE) == first


@SETTINGS
@given(asks=CLUSTER_WORK, cap=st.integers(1, 12))
def test_demand_inside_a_virtual_cluster_never_exceeds_what_it_may_borrow(asks: list[Ask], cap: int) -> None:
    cluster = Cluster(rare_resources=RARE)
    spec = VirtualCluster(flexible_resource_max={"CPU": cap, "GPU": 4}, tolerations={"gpu_node": "exists()"})
    cluster.create_virtual_cluster("vc", spec)
    work = [request for request in requests(asks) if isinstance(request, ScheduleRequest)]
    for request in work:
        cluster.submit(msgspec.structs.replace(request, vcluster_id="vc"))
    result = plan(cluster.view, SCALING, ROOMY, RARE)
    counted = {work_id for launch in result.launches for work_id in launch.work_ids}
    cpu = {request.actor_id: request.resources["CPU"] for request in work}
    assert sum(cpu[work_id] for work_id in counted) <= cap


def in_a_virtual_cluster(asks: list[Ask], cap: int, child: int, *, at_root: bool, busy: int) -> Cluster:
    """`busy` full nodes; the cluster `vc` (at most `cap` CPUs, tolerating GPU nodes) with the asks' actors inside
    (and copies at the root, when `at_root`), and a child `child` queued under it for `child` CPUs (when > 0)."""
    cluster = submitted([], busy)
    spec = VirtualCluster(flexible_resource_max={"CPU": cap, "GPU": 4}, tolerations={"gpu_node": "exists()"})
    cluster.create_virtual_cluster("vc", spec)
    if child:
        cluster.create_virtual_cluster("child", VirtualCluster(flexible_resource_min={"CPU": child}), parent="vc")
    for request in requests(asks):
        if isinstance(request, ScheduleRequest):
            cluster.submit(msgspec.structs.replace(request, vcluster_id="vc"))
            if at_root:
                cluster.submit(msgspec.structs.replace(request, actor_id=f"root-{request.actor_id}"))
    return cluster


def admitted_or_placed(cluster: Cluster, work_id: str) -> bool:
    """Whether an actor or placement group is placed, or a virtual cluster admitted."""
    vc = cluster.view.tree.clusters.get(work_id)
    return vc.status == "admitted" if vc is not None else placed(cluster, work_id)


def stranded(cluster: Cluster, result: ScalePlan) -> set[str]:
    """The work the plan's launches were for that waits still, once they registered."""
    counted = {work_id for launch in result.launches for work_id in launch.work_ids}
    return {work_id for work_id in counted if not admitted_or_placed(cluster, work_id)}


BESIDE_THE_ROOT = [Ask(1, 0, 0, 0, 0, 1, None, 1), Ask(1, 0, 0, 0, 0, 1, "PACK", 1), Ask(3, 0, 0, 0, 0, 1, None, 1)]
"""A round planning a cluster's 3-CPU actor beside a root 1-CPU actor on one new cpu-4, and its 1-CPU actor on
another: before virtual clusters' actors were nominated, the cluster grew for its 1-CPU actor on the first node
and left the 3-CPU one without room (found by Hypothesis with 1,500 random rounds)."""


UNHOSTABLE_AHEAD = [
    Ask(1, 0, 0, 0, 0, 1, None, 1),
    Ask(1, 0, 0, 0, 0, 1, None, 1),
    Ask(1, 0, 0, 0, 0, 1, None, 1),
    Ask(1, 1, 0, 0, 0, 1, None, 1, priority=1),
    Ask(2, 0, 0, 0, 0, 1, None, 1, priority=1),
]
"""The quota of a GPU actor nothing can host went, in the plan, to a launch the scheduler then gave higher priority."""


APART_WITH_FALLBACK = [
    Ask(3, 0, 3, 1, 0, 4, None, 1, apart=True),
    Ask(3, 0, 3, 1, 0, 4, None, 1, apart=True),
    Ask(3, 0, 0, 0, 0, 4, None, 1),
]
"""The replay after dropping the empty nodes of one that placed everything left a cluster's actor unplaced, and the
plan counted it beside another actor on a cpu-4 too small for both (found with 1,500 random rounds, seed 11)."""


@SETTINGS
@example(asks=APART_WITH_FALLBACK, cap=18, at_root=True, busy=0)
@example(asks=BESIDE_THE_ROOT, cap=4, at_root=True, busy=1)
@example(asks=UNHOSTABLE_AHEAD, cap=2, at_root=False, busy=0)
@given(asks=CLUSTER_WORK, cap=st.integers(1, 24), at_root=st.booleans(), busy=st.integers(0, 2))
def test_the_scheduler_places_the_demand_counted_inside_a_virtual_cluster(
    asks: list[Ask], cap: int, at_root: bool, busy: int
) -> None:
    """The same claim inside a top-level virtual cluster that grows onto new nodes (beside the same work at the
    root, when `at_root`): each actor of the cluster is nominated to the node the plan put it on, and the cluster
    grows there for it."""
    cluster = in_a_virtual_cluster(asks, cap, 0, at_root=at_root, busy=busy)
    before = digest(cluster.view)
    result = plan(cluster.view, SCALING, ROOMY, RARE)
    assert digest(cluster.view) == before  # the replay records placements and footprints in copies only
    register_launches(cluster, result)
    assert stranded(cluster, result) == set()


@SETTINGS
@given(cap=st.integers(1, 24), child=st.integers(1, 16), busy=st.integers(0, 2))
def test_a_queued_nested_cluster_counted_as_demand_is_admitted(cap: int, child: int, busy: int) -> None:
    """A child queued under a cluster that may borrow its minimum is admitted once the planned nodes register; one
    its parent may not borrow for launches nothing (a minimum is planned on one node: at most the 16 CPUs of the
    largest type)."""
    cluster = in_a_virtual_cluster([], cap, child, at_root=False, busy=busy)
    result = plan(cluster.view, SCALING, ROOMY, RARE)
    register_launches(cluster, result)
    assert stranded(cluster, result) == set()
    assert bool(result.launches) == (child <= cap)


@SETTINGS
@given(
    pieces=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    policy=st.sampled_from(["PACK", "SPREAD", "STRICT_SPREAD"]),
    minimum=st.integers(0, 3),
    cap=st.integers(1, 24),
    busy=st.integers(0, 2),
)
def test_a_queued_nested_cluster_of_fixed_size_nodes_counted_as_demand_is_admitted(
    pieces: list[int], policy: str, minimum: int, cap: int, busy: int
) -> None:
    """The planner plans a nested child as a gang of whole pieces (each fixed-size node on one node); once the
    planned nodes register, the parent grows per piece and the child is admitted. One the parent may not borrow
    for launches nothing."""
    cluster = submitted([], busy)
    cluster.create_virtual_cluster("vc", VirtualCluster(flexible_resource_max={"CPU": cap}))
    group = FixedSizeNodes([FixedSizeNode({"CPU": float(cpu)}) for cpu in pieces], policy)  # type: ignore[arg-type]
    child = VirtualCluster(flexible_resource_min={"CPU": minimum} if minimum else {}, fixed_size_nodes=[group])
    cluster.create_virtual_cluster("child", child, parent="vc")
    result = plan(cluster.view, SCALING, ROOMY, RARE)
    register_launches(cluster, result)
    assert stranded(cluster, result) == set()
    assert bool(result.launches) == (sum(pieces) + minimum <= cap)


ADMITTED_ONTO_HELD_ROOM = [Ask(3, 0, 1, 0, 0, 1, None, 1), Ask(1, 0, 0, 0, 0, 1, None, 1)]
"""A round planning a child's minimum on a new cpu-16 and the parent's 3-CPU 4c8g actor on a new cpu-4: before
nominated room was held from virtual clusters' admission, the child was carved from both cpu-4s first, the
parent's uncounted 1-CPU actor took the last of its maximum, and the 3-CPU actor waited for quota, which no
round counts (found by Hypothesis with 1,500 random rounds)."""


QUOTA_OF_NOMINATED_WORK = [
    Ask(1, 0, 0, 0, 0, 1, "PACK", 1),
    Ask(1, 1, 0, 0, 0, 1, None, 1),
    Ask(2, 0, 0, 0, 0, 1, None, 1),
    Ask(2, 0, 0, 0, 0, 1, None, 1),
    Ask(1, 0, 0, 0, 0, 2, None, 1),
]
"""Before nominated actors held their quota, an earlier uncounted actor took the quota counted for a launched one."""


OVERTAKEN_BY_PRIORITY = [
    Ask(1, 0, 0, 0, 0, 1, None, 1),
    Ask(4, 0, 0, 0, 0, 3, None, 1),
    Ask(1, 0, 0, 0, 0, 1, None, 1),
    Ask(1, 1, 0, 0, 0, 1, None, 1, priority=1),
    Ask(3, 1, 0, 0, 1, 4, None, 1, priority=1),
]
"""Higher-priority work took the quota counted for launched actors (a GPU actor nothing hosts had some in the plan)."""


@SETTINGS
@example(asks=ADMITTED_ONTO_HELD_ROOM, cap=8, child=5, at_root=True)
@example(asks=QUOTA_OF_NOMINATED_WORK, cap=4, child=2, at_root=True)
@example(asks=OVERTAKEN_BY_PRIORITY, cap=24, child=1, at_root=False)
@given(
    asks=CLUSTER_WORK,
    cap=st.integers(1, 24),
    child=st.integers(1, 8),
    at_root=st.booleans(),
)
def test_work_in_virtual_clusters_a_launch_was_for_and_still_waits_is_counted_again(
    asks: list[Ask], cap: int, child: int, at_root: bool
) -> None:
    """Liveness with a queued child: the child's admission grows its parent over nodes in an order the plan does
    not foresee (never onto room held for nominated work, nor into the quota nominated actors hold), so work a launch
    was for may still wait once the planned nodes register; the next round counts it again."""
    cluster = in_a_virtual_cluster(asks, cap, child, at_root=at_root, busy=0)
    result = plan(cluster.view, SCALING, ROOMY, RARE)
    new = register_launches(cluster, result)
    left = stranded(cluster, result)
    again = plan(cluster.view, SCALING, running_with(cluster, new), RARE)
    assert left <= {work_id for launch in again.launches for work_id in launch.work_ids}


@SETTINGS
@given(
    asks=st.lists(ASKS, min_size=1, max_size=4),
    policy=st.sampled_from(["Require", "Prefer"]),
    key=st.sampled_from(["zone", "type"]),
    busy=st.integers(0, 2),
)
def test_the_scheduler_places_the_dataflow_demand_each_launch_was_for(
    asks: list[Ask], policy: str, key: str, busy: int
) -> None:
    """DataFlow operations: each actor runs after the one before it, requiring or preferring its `key` label (which
    the upstream's selector names, so its footprint carries it); once the planned nodes register, the counted
    demand is placed."""
    cluster = submitted([], busy)
    upstream = ""
    for request in requests(asks):
        if isinstance(request, ScheduleRequest):
            after = RunAfter(upstream, policy, [key], [Prefer(key, 100)]) if upstream else None  # type: ignore[arg-type]
            cluster.submit(msgspec.structs.replace(request, run_after=after))
            upstream = request.actor_id
    before = digest(cluster.view)
    result = plan(cluster.view, SCALING, ROOMY, RARE)
    assert digest(cluster.view) == before  # the replay records placements and footprints in copies only
    register_launches(cluster, result)
    counted = {work_id for launch in result.launches for work_id in launch.work_ids}
    assert {work_id for work_id in counted if not placed(cluster, work_id)} == set()


def register_partly_reconciled(cluster: Cluster, result: ScalePlan, rng: random.Random) -> list[str]:
    """Fold the plan's launch requests and register every planned node one at a time, in an order `rng` draws, the
    scheduler re-trying after some registrations only (never after the last): nominated work may still wait on a
    registered node; the ids of the new nodes."""
    launches = fold_launch_requests(cluster, result)
    rng.shuffle(launches)
    node_ids = []
    for type_name, launch_id in launches:
        node_id = node_id_of(type_name, launch_id)
        cluster.fold(launched_node(SCALING.node_types[type_name], node_id, launch_id, RARE), react=False)
        node_ids.append(node_id)
        if rng.random() < 0.5 and len(node_ids) < len(launches):
            cluster.reconcile()
    return node_ids


TAKEN_BEYOND_ITS_NOMINATED_NODE = [
    Ask(2, 0, 0, 0, 0, 1, "PACK", 2),
    Ask(1, 0, 3, 0, 0, 1, None, 1),
    Ask(2, 0, 0, 0, 0, 1, "STRICT_SPREAD", 2),
    Ask(2, 0, 0, 0, 0, 1, "PACK", 2),
    Ask(1, 0, 0, 0, 0, 1, None, 1),
    Ask(3, 0, 0, 0, 0, 2, None, 1, priority=1),
]
"""The second round counted the second of two identical higher-priority actors on the first free node, not on its
own nominated one (as the scheduler places it), and launched again for the group whose held room that took (found
with 1,500 random rounds, seed 12)."""


ALIKE_NOMINATED_APART = [
    Ask(1, 0, 0, 0, 0, 1, "PACK", 2),
    Ask(1, 0, 0, 0, 0, 1, "PACK", 2),
    Ask(1, 0, 0, 0, 0, 1, "STRICT_SPREAD", 3),
    Ask(1, 0, 0, 0, 0, 1, None, 1),
    Ask(1, 0, 0, 0, 0, 2, None, 1, priority=1),
    Ask(2, 0, 0, 0, 0, 1, None, 1),
]
"""A round nominating two alike priority-1 actors to two of three cpu-4s (each holding room for a bundle of pg2):
the next round counted both on the first node, as if they took room held there for pg2, and launched a node for pg2
(found by Hypothesis with 1,500 random rounds; `random.Random(12)` registers L1, L3, L2 and never re-tries)."""


@SETTINGS
@example(asks=TAKEN_BEYOND_ITS_NOMINATED_NODE, busy=0, roomy=0, rng=random.Random(5441))
@example(asks=ALIKE_NOMINATED_APART, busy=0, roomy=1, rng=random.Random(12))
@given(asks=WORK, busy=st.integers(0, 3), roomy=st.integers(0, 3), rng=st.randoms(use_true_random=False))
def test_a_second_round_launches_nothing_for_work_nominated_to_registered_nodes(
    asks: list[Ask], busy: int, roomy: int, rng: random.Random
) -> None:
    """Once the planned nodes registered (the scheduler not yet re-trying after each), work whose registered
    nominated nodes hold all the room it needs (and no higher-priority work that might displace it lacks such room)
    is counted there by the next round, which launches nothing for it."""
    cluster = submitted(requests(asks), busy, roomy)
    new = register_partly_reconciled(cluster, plan(cluster.view, SCALING, ROOMY, RARE), rng)
    again = plan(cluster.view, SCALING, running_with(cluster, new), RARE)
    assert {work_id for launch in again.launches for work_id in launch.work_ids} & held_whole(cluster.view) == set()


def held_whole(view: ClusterView) -> set[str]:
    """The pending root work whose registered nominated nodes hold all the room it needs, of priorities no pending
    work lacking such room exceeds (such work could displace it)."""
    held: dict[str, dict[str, float]] = {}
    for holds in view.held.values():
        for work_id, (_, amount) in holds.items():
            give(held.setdefault(work_id, {}), amount)
    covered, lacking = set(), []
    for work_id in view.pending:
        work = view.actors.get(work_id) or view.groups.get(work_id)
        assert work is not None
        request = work.request
        need: dict[str, float] = {}
        for amount in request.bundles if isinstance(request, PlacementGroupRequest) else [request.resources]:
            give(need, amount)
        if all(held.get(work_id, {}).get(name, 0.0) >= amount for name, amount in need.items()):
            covered.add((work_id, request.priority))
        else:
            lacking.append(request.priority)
    return {work_id for work_id, priority in covered if all(other <= priority for other in lacking)}
