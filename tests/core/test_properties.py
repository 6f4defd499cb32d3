"""Properties of random workloads: no over-allocation, node order does not matter, explanations add up, replay."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas import (
    NODE_ID_LABEL,
    ActorAffinityMatchExpression,
    ActorAffinityOperator,
    ActorAffinitySchedulingStrategy,
    NodeAffinitySchedulingStrategy,
    NodeLabelSchedulingStrategy,
    PlacementGroupRequest,
    PlacementGroupSchedulingStrategy,
    Prefer,
    RunAfter,
    ScheduleRequest,
    SchedulingStrategy,
    SelectorSpec,
    Taint,
)
from services.core import Cluster, Pending, replay
from services.core.decide.actor import actor_plans
from services.core.request import CompiledRequest
from services.core.state import ClusterView, fits
from tests.support.examples import examples

ZONE = "corral.io/availability-zone"
EPSILON = 1e-9
MESSAGE = re.compile(r"^(?:.*; )?0/(\d+) nodes are available: (.*)\.$")
SETTINGS = settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass(frozen=True)
class NodeSpec:
    resources: dict[str, float]
    labels: dict[str, str]
    taints: list[Taint]
    zone: str | None


@dataclass(frozen=True)
class Op:
    """One command; `pick` chooses among the ids that make the command valid at the time it runs."""

    kind: str
    pick: int = 0
    request: ScheduleRequest | PlacementGroupRequest | None = None
    node: NodeSpec | None = None
    taint: Taint | None = None
    labels: dict[str, str] | None = None


resources = st.fixed_dictionaries(
    {"CPU": st.sampled_from([1.0, 2.0, 4.0, 8.0])},
    optional={"GPU": st.sampled_from([1.0, 2.0]), "MEM": st.sampled_from([4.0, 16.0])},
)
user_labels = st.fixed_dictionaries(
    {}, optional={"disk": st.sampled_from(["ssd", "hdd"]), "rack": st.sampled_from(["r0", "r1"])}
)
one_taint = st.builds(
    Taint,
    st.sampled_from(["dedicated", "gpu"]),
    st.sampled_from(["ml", "true"]),
    st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
)
taints = st.lists(one_taint, max_size=2, unique_by=lambda taint: (taint.key, taint.effect))


node_specs = st.builds(NodeSpec, resources, user_labels, taints, st.sampled_from([None, "z0", "z1", "z2"]))


OPERATORS = st.sampled_from(list(ActorAffinityOperator))
AFFINITY_KEYS = st.sampled_from(["app", "team"])
AFFINITY_VALUES = st.sampled_from([["a"], ["a", "b"]])
TOPOLOGY_KEYS = st.sampled_from([NODE_ID_LABEL, ZONE, "rack"])


@st.composite
def expressions(draw: st.DrawFn) -> ActorAffinityMatchExpression:
    operator = draw(OPERATORS)
    listed = operator in (ActorAffinityOperator.IN, ActorAffinityOperator.NOT_IN)
    return ActorAffinityMatchExpression(
        draw(AFFINITY_KEYS),
        operator,
        draw(AFFINITY_VALUES) if listed else [],
        draw(st.booleans()),
        draw(TOPOLOGY_KEYS),
    )


selectors: st.SearchStrategy[SelectorSpec] = st.sampled_from(
    [
        {},
        {},
        {},
        {},
        {"disk": "ssd"},
        {"disk": "!in(hdd)"},
        {ZONE: "in(z0, z1)"},
        {"rack": "exists()"},
        {"gpu-type": "a100"},
    ]
)
strategies: st.SearchStrategy[SchedulingStrategy] = st.one_of(
    st.none(),
    st.none(),
    st.none(),
    st.just("SPREAD"),
    st.builds(ActorAffinitySchedulingStrategy, st.lists(expressions(), min_size=1, max_size=3), st.booleans()),
    st.builds(NodeLabelSchedulingStrategy, selectors, selectors),
    st.builds(NodeAffinitySchedulingStrategy, st.sampled_from(["n0", "n1", "n2", "x0"]), st.booleans()),
    st.builds(PlacementGroupSchedulingStrategy, st.sampled_from(["pg0", "pg1", "pg2"]), st.integers(-1, 2)),
)
run_afters = st.one_of(
    st.none(),
    st.builds(
        RunAfter,
        st.sampled_from(["a0", "a1", "a2", "a3", "a4"]),
        st.sampled_from(["", "Require", "Prefer"]),
        st.sampled_from([[], [ZONE], ["rack"]]),
        st.sampled_from([[], [Prefer(ZONE, 50)]]),
    ),
)


CPU_NEEDS = st.sampled_from([0.5, 1.0, 2.0, 3.0])
ONE_IN_FIVE = st.integers(0, 4)
NAMESPACES = st.sampled_from(["default", "default", "other"])
ACTOR_LABELS = st.fixed_dictionaries({}, optional={"app": st.sampled_from(["a", "b"]), "team": st.just("a")})
TOLERATIONS: st.SearchStrategy[SelectorSpec] = st.sampled_from(
    [{}, {"dedicated": "exists()"}, {"gpu": "exists()", "dedicated": "ml"}]
)
MAX_RESTARTS = st.sampled_from([0, 1, -1])
PRIORITIES = st.integers(0, 2)


@st.composite
def actor_requests(draw: st.DrawFn) -> ScheduleRequest:
    """An actor request of every shape the core knows (the strategies it draws from are built once: building one
    per draw cost more than the property it feeds)."""
    needs: dict[str, float] = {"CPU": draw(CPU_NEEDS)}
    if draw(ONE_IN_FIVE) == 0:
        needs["GPU"] = 1.0
    return ScheduleRequest(
        "placeholder",
        needs,
        namespace=draw(NAMESPACES),
        labels=draw(ACTOR_LABELS),
        label_selector=draw(selectors),
        scheduling_strategy=draw(strategies),
        tolerations=draw(TOLERATIONS),
        run_after=draw(run_afters),
        max_restarts=draw(MAX_RESTARTS),
        priority=draw(PRIORITIES),
    )


group_requests = st.builds(
    PlacementGroupRequest,
    st.just("placeholder"),
    st.lists(st.fixed_dictionaries({"CPU": st.sampled_from([1.0, 2.0])}), min_size=1, max_size=3),
    st.sampled_from(["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"]),
    st.just([]),
    st.sampled_from([{}, {"dedicated": "exists()"}]),
)

KINDS = (
    ["submit"] * 8
    + ["group"] * 2
    + [
        "remove_actor",
        "fail_actor",
        "remove_node",
        "add_node",
        "add_taint",
        "remove_taints",
        "set_labels",
        "remove_group",
    ]
)


KIND_CHOICES = st.sampled_from(KINDS)
ACTOR_REQUESTS = actor_requests()
PICKS = st.integers(0, 50)


@st.composite
def ops(draw: st.DrawFn) -> Op:
    kind = draw(KIND_CHOICES)
    if kind == "submit":
        return Op(kind, request=draw(ACTOR_REQUESTS))
    if kind == "group":
        return Op(kind, request=draw(group_requests))
    if kind == "add_node":
        return Op(kind, node=draw(node_specs))
    return Op(kind, draw(PICKS), taint=draw(one_taint), labels=draw(user_labels))


@dataclass(frozen=True)
class Workload:
    seed: int
    nodes: list[NodeSpec]
    ops: list[Op]


workloads = st.builds(
    Workload,
    st.integers(0, 2**32),
    st.lists(node_specs, min_size=1, max_size=8),
    st.lists(ops(), min_size=10, max_size=40),
)
large_workloads = st.builds(
    Workload,
    st.integers(0, 2**32),
    st.lists(node_specs, min_size=20, max_size=40),
    st.lists(ops(), min_size=10, max_size=30),
)
"""More nodes than a decision scores (the core samples 16 placeable nodes), so sampling must not see the order."""


def add(cluster: Cluster, spec: NodeSpec, node_id: str) -> None:
    cluster.add_node(node_id, spec.resources, spec.labels, list(spec.taints), zone=spec.zone, hostname=node_id)


def new_cluster(workload: Workload, order: list[int] | None = None) -> Cluster:
    cluster = Cluster(seed=workload.seed)
    for index in order if order is not None else range(len(workload.nodes)):
        add(cluster, workload.nodes[index], f"n{index}")
    return cluster


def apply(cluster: Cluster, op: Op, step: int) -> None:
    """Run one command, choosing its target among the ids that make it valid now (or skipping it)."""
    view = cluster.view
    if op.kind == "submit":
        assert isinstance(op.request, ScheduleRequest)
        cluster.submit(msgspec.structs.replace(op.request, actor_id=f"a{step}"))
    elif op.kind == "group":
        assert isinstance(op.request, PlacementGroupRequest)
        pg_id = f"pg{step % 3}"
        if pg_id not in view.groups:
            cluster.create_placement_group(msgspec.structs.replace(op.request, pg_id=pg_id))
    elif op.kind == "add_node":
        assert op.node is not None
        add(cluster, op.node, f"late{step}")
    else:
        apply_to_target(cluster, op)


def applied(workload: Workload) -> Iterator[tuple[int, Op, Cluster]]:
    """Run the workload's commands on a new cluster, handing it back after each (with the step and command)."""
    cluster = new_cluster(workload)
    for step, op in enumerate(workload.ops):
        apply(cluster, op, step)
        yield step, op, cluster


def apply_to_target(cluster: Cluster, op: Op) -> None:
    view = cluster.view
    targets = {
        "remove_actor": sorted(view.actors),
        "fail_actor": sorted(a for a, s in view.actors.items() if s.status == "placed"),
        "remove_group": sorted(view.groups),
    }.get(op.kind, sorted(view.nodes))
    if not targets:
        return
    target = targets[op.pick % len(targets)]
    commands: dict[str, Callable[[], None]] = {
        "remove_actor": lambda: cluster.remove_actor(target),
        "fail_actor": lambda: cluster.fail_actor(target),
        "remove_group": lambda: cluster.remove_placement_group(target),
        "remove_node": lambda: cluster.remove_node(target),
        "add_taint": lambda: cluster.add_taints(target, [op.taint] if op.taint else []),
        "remove_taints": lambda: cluster.remove_taints(target, ["dedicated", "gpu"]),
        "set_labels": lambda: cluster.set_labels(target, op.labels or {}),
    }
    commands[op.kind]()


def add_up(total: dict[str, float], amount: dict[str, float]) -> None:
    for name, quantity in amount.items():
        total[name] = total.get(name, 0.0) + quantity


Amounts = dict[str, float]


def loads(view: ClusterView) -> tuple[dict[str, Amounts], dict[tuple[str, int], Amounts]]:
    """What each node holds (its bundles and the actors outside groups) and what each bundle holds (its actors)."""
    used: dict[str, Amounts] = {node_id: {} for node_id in view.nodes}
    inside: dict[tuple[str, int], Amounts] = {}
    for actor in view.actors.values():
        if actor.status == "placed" and actor.node_id is not None:
            held = used[actor.node_id] if actor.bundle is None else inside.setdefault(actor.bundle, {})
            add_up(held, actor.request.resources)
    for group in view.groups.values():
        for index, holder in enumerate(group.bundle_nodes):
            if holder is not None:
                add_up(used[holder], group.bundles[index])
    return used, inside


def over_allocations(view: ClusterView) -> list[str]:
    """Every node and bundle holding more than its size, and every actor outside its bundle's node."""
    used, inside = loads(view)
    found = [
        f"{actor_id} runs on {actor.node_id}, not where bundle {actor.bundle[1]} of {actor.bundle[0]} is"
        for actor_id, actor in view.actors.items()
        if actor.status == "placed"
        and actor.node_id is not None
        and actor.bundle is not None
        and view.groups[actor.bundle[0]].bundle_nodes[actor.bundle[1]] != actor.node_id
    ]
    for node_id, node in view.nodes.items():
        found += [
            f"{node_id} holds {amount} {name} of {node.total}"
            for name, amount in used[node_id].items()
            if amount > node.total.get(name, 0.0) + EPSILON
        ]
        if any(free < -EPSILON for free in node.free.values()):
            found.append(f"{node_id} free {node.free}")
    for (pg_id, index), amounts in inside.items():
        size = view.groups[pg_id].bundles[index]
        found += [
            f"bundle {index} of {pg_id} holds {amount} {name}"
            for name, amount in amounts.items()
            if amount > size.get(name, 0.0) + EPSILON
        ]
    return found


def accounts_for(pending: Pending, node_ids: list[str]) -> bool:
    """Whether `pending` names every node of `node_ids` once: counts, per-reason lists and message agree."""
    listed = sorted(n for nodes in pending.nodes_by_reason.values() for n in nodes)
    match = MESSAGE.match(pending.message)
    return (
        sum(pending.reasons.values()) == len(node_ids)
        and listed == node_ids
        and {r: len(nodes) for r, nodes in pending.nodes_by_reason.items()} == pending.reasons
        and match is not None
        and int(match.group(1)) == len(node_ids)
        and (not node_ids or sum(int(part.split(" ", 1)[0]) for part in match.group(2).split(", ")) == len(node_ids))
    )


def placements_of(view: ClusterView) -> dict[str, str]:
    return {a: s.node_id for a, s in view.actors.items() if s.status == "placed" and s.node_id is not None}


@SETTINGS
@given(workloads)
def test_no_node_is_ever_over_allocated(workload: Workload) -> None:
    cluster = new_cluster(workload)
    assert over_allocations(cluster.view) == []
    for step, op in enumerate(workload.ops):
        apply(cluster, op, step)
        assert over_allocations(cluster.view) == [], f"after step {step}: {op.kind}"


@SETTINGS
@given(workloads, st.randoms(use_true_random=False))
def test_decisions_do_not_depend_on_the_order_nodes_were_added(workload: Workload, rng: random.Random) -> None:
    assert decisions_step_by_step(workload, shuffled(workload, rng)) == decisions_step_by_step(workload)


@settings(
    max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(large_workloads, st.randoms(use_true_random=False))
def test_decisions_do_not_depend_on_the_order_nodes_were_added_when_decisions_sample_nodes(
    workload: Workload, rng: random.Random
) -> None:
    assert decisions_step_by_step(workload, shuffled(workload, rng)) == decisions_step_by_step(workload)


def shuffled(workload: Workload, rng: random.Random) -> list[int]:
    """The workload's node indices in an order drawn from `rng`."""
    order = list(range(len(workload.nodes)))
    rng.shuffle(order)
    return order


def decisions_step_by_step(workload: Workload, order: list[int] | None = None) -> list[object]:
    """What a cluster with its nodes added in `order` decided: placements and groups after each step, then what
    the pending work says at the end."""
    cluster = new_cluster(workload, order)
    decisions: list[object] = []
    for step, op in enumerate(workload.ops):
        apply(cluster, op, step)
        decisions.append((f"after step {step}: {op.kind}", cluster.placements(), cluster.placement_groups()))
    decisions.append([p.message for p in cluster.pending()])
    return decisions


@SETTINGS
@given(workloads)
def test_every_pending_explanation_accounts_for_every_node_once(workload: Workload) -> None:
    for step, op, cluster in applied(workload):
        node_ids = sorted(cluster.view.nodes)
        unaccounted = [pending for pending in cluster.pending() if not accounts_for(pending, node_ids)]
        assert unaccounted == [], f"after step {step}: {op.kind}"


@SETTINGS
@given(workloads)
def test_folding_the_recorded_events_gives_the_same_placements(workload: Workload) -> None:
    cluster = new_cluster(workload)
    for step, op in enumerate(workload.ops):
        apply(cluster, op, step)
    view = replay(cluster.events(), workload.seed)
    assert placements_of(view) == cluster.placements()
    assert {g: [n or "" for n in s.bundle_nodes] for g, s in view.groups.items() if s.status == "placed"} == (
        cluster.placement_groups()
    )
    assert set(view.pending) == {p.id for p in cluster.pending()}


@SETTINGS
@given(workloads)
def test_a_node_whose_room_holds_the_work_is_judged_alike_without_the_rules_on_its_total(workload: Workload) -> None:
    """The pipeline skips the rules on a node's total once its room holds the work (`Plan.rejects_fitting`)."""
    for step, op, cluster in applied(workload):
        if not isinstance(op.request, ScheduleRequest):
            continue
        view = cluster.view
        request = msgspec.structs.replace(op.request, actor_id=f"probe{step}", vcluster_id=None)
        plans, _bundle = actor_plans(view, CompiledRequest(request, ()))
        for plan in plans:
            for node in view.nodes.values():
                if fits(plan.room(node), plan.need):
                    assert plan.rejects_fitting(node) == plan.rejects(node), (step, node.node_id)
