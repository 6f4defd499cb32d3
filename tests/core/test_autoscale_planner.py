"""The autoscaler's planner, rule by rule: what it launches for pending work, and how it explains the demand.

Each case builds a cluster with pending work (the real `Cluster`, so the work is pending for the scheduler's own
reasons), plans against the test node types, and checks the launches and the demand's explanation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from schemas import (
    FixedSizeNode,
    FixedSizeNodes,
    NodeAffinitySchedulingStrategy,
    NodeLabelSchedulingStrategy,
    NodeRegistered,
    NodesLaunchRequested,
    PlacementGroupRequest,
    Prefer,
    RunAfter,
    ScheduleRequest,
    VirtualCluster,
)
from services.core import Cluster
from services.core.autoscale import Fleet, ScalePlan, launched_node
from services.core.labels import NODE_TYPE
from tests.core.autoscale_builders import RARE, TYPES, cluster, config, launched, plan_for
from tests.core.builders import affinity

ONE_TYPE = """
node_types:
  cpu-4:
    resources: {CPU: 4}
    labels: {type: 4c8g}
    min_workers: %(min)d
    max_workers: %(max)d
"""


def one_type(minimum: int = 0, maximum: int = 50) -> str:
    """Only cpu-4, with these bounds."""
    return ONE_TYPE % {"min": minimum, "max": maximum}


def actors(count: int, cpu: float = 1, **options: object) -> Callable[[Cluster], object]:
    """Submit `count` identical actors a0.. asking for `cpu` CPUs."""

    def submit(target: Cluster) -> None:
        for index in range(count):
            target.submit(ScheduleRequest(f"a{index}", {"CPU": cpu}, **options))  # type: ignore[arg-type]

    return submit


def group(strategy: str, bundles: list[dict[str, float]], **options: object) -> Callable[[Cluster], object]:
    """Create the placement group `pg`."""

    def create(target: Cluster) -> None:
        target.create_placement_group(PlacementGroupRequest("pg", bundles, strategy, **options))  # type: ignore[arg-type]

    return create


def both(*steps: Callable[[Cluster], object]) -> Callable[[Cluster], object]:
    """Run the steps in order."""

    def run(target: Cluster) -> None:
        for step in steps:
            step(target)

    return run


def quiet_node(node_id: str, cpu: float, labels: dict[str, str] | None = None) -> Callable[[Cluster], object]:
    """A node folded into the view without the scheduler reacting (pending work has not been re-tried yet)."""

    def register(target: Cluster) -> None:
        target.view.fold(NodeRegistered(node_id=node_id, resources={"CPU": cpu}, labels=labels or {}))

    return register


def node(node_id: str, cpu: float, labels: dict[str, str] | None = None) -> Callable[[Cluster], object]:
    """An existing node with `cpu` CPUs free (the scheduler places what it can there at once)."""

    def add(target: Cluster) -> None:
        target.add_node(node_id, {"CPU": cpu}, labels or {})

    return add


def registered(launch_id: str) -> Callable[[Cluster], object]:
    """The cpu-4 node of launch `launch_id` registered (node id `cpu-4-<launch id>`), empty."""

    def register(target: Cluster) -> None:
        node_type = config().node_types["cpu-4"]
        target.fold(launched_node(node_type, f"cpu-4-{launch_id}", launch_id, RARE))

    return register


def nominated_node(launch_id: str, nominated: dict[str, dict[str, float]]) -> Callable[[Cluster], object]:
    """A cpu-4 launched for `nominated` (work id -> the room it holds) registered quietly: its work is not placed
    yet (node id `cpu-4-<launch id>`)."""

    def register(target: Cluster) -> None:
        node_type = config().node_types["cpu-4"]
        target.fold(
            NodesLaunchRequested(
                node_type="cpu-4", launch_ids=[launch_id], reason="test", work=[], nominated={launch_id: nominated}
            ),
            react=False,
        )
        target.fold(launched_node(node_type, f"cpu-4-{launch_id}", launch_id, RARE), react=False)

    return register


def busy_node(node_id: str, labels: dict[str, str]) -> Callable[[Cluster], object]:
    """A 1-CPU node holding one actor labelled `labels` (so it is full)."""

    def fill(target: Cluster) -> None:
        target.add_node(node_id, {"CPU": 1})
        target.submit(ScheduleRequest(f"on-{node_id}", {"CPU": 1}, labels=labels))

    return fill


def vcluster(vc_id: str, spec: VirtualCluster, parent: str | None = None) -> Callable[[Cluster], object]:
    """Create a virtual cluster at the root (or under `parent`)."""

    def create(target: Cluster) -> None:
        target.create_virtual_cluster(vc_id, spec, parent=parent)

    return create


QUEUED_SQUAD = VirtualCluster(
    flexible_resource_min={"CPU": 2},
    fixed_size_nodes=[FixedSizeNodes([FixedSizeNode({"CPU": 4})] * 2, "STRICT_SPREAD")],
)
"""A cluster whose minimum is two fixed-size nodes of 4 CPUs on distinct nodes and 2 flexible CPUs."""
PREFER_UP_ZONE = RunAfter("up", "Prefer", prefer=[Prefer("zone", 100)])
"""Run after `up`, preferring a node in the zone it ran in."""


@dataclass(frozen=True)
class Case:
    sentence: str
    setup: Callable[[Cluster], object]
    launches: dict[str, int]
    types: str = TYPES
    fleet: Fleet = field(default_factory=Fleet)
    says: str = ""
    """Words `plan.about(work)` or the group's outcome must contain."""
    work: str = "a0"


CASES = [
    Case("a pending CPU actor launches one node of the cheapest type holding it", actors(1), {"cpu-4": 1}),
    Case("identical actors share a node while it has room", actors(4), {"cpu-4": 1}, says="launching 1 cpu-4 for this"),
    Case("many small actors go to the type that serves them cheapest in total", actors(16), {"cpu-16": 1}),
    Case(
        "actors that fit on existing free capacity are not demand",
        both(actors(3), quiet_node("n1", 8)),
        {},
        says="",
    ),
    Case(
        "free capacity on a node the selector rejects does not count",
        both(actors(1, label_selector={"type": "16c32g"}), quiet_node("n1", 8)),
        {"cpu-16": 1},
    ),
    Case(
        "a launching node's room is used before another launch, and the work names that launch",
        actors(3),
        {},
        fleet=Fleet(launching={"cpu-4": ("L1",)}),
        says="autoscaler: waiting for launch L1 to register | launching nodes hold 3 of 3",
    ),
    Case(
        "work inside a virtual cluster that may borrow free room of existing nodes is not demand",
        both(
            vcluster("vc", VirtualCluster(flexible_resource_max={"CPU": 8})),
            actors(2, vcluster_id="vc"),
            quiet_node("n1", 8),
        ),
        {},
        says="fits on existing nodes",
    ),
    Case(
        "a queued virtual cluster that fits on existing free room is not demand",
        both(
            vcluster("vc", VirtualCluster(flexible_resource_min={"CPU": 2}, flexible_resource_max={"CPU": 2})),
            quiet_node("n1", 8),
        ),
        {},
        work="vc",
        says="fits on existing nodes",
    ),
    Case(
        "a label selector picks the type carrying the label",
        actors(1, label_selector={"type": "16c32g"}),
        {"cpu-16": 1},
    ),
    Case(
        "a selector on the system label corral.io/node-type picks that type",
        actors(1, label_selector={NODE_TYPE: "cpu-16"}),
        {"cpu-16": 1},
    ),
    Case(
        "a selector fallback picks the second type when no type matches the primary",
        actors(1, label_selector={"type": "nope"}, fallback_strategy=[{"label_selector": {"zone": "usa-2"}}]),
        {"cpu-16": 1},
    ),
    Case(
        "the primary selector wins over a cheaper type that only the fallback allows",
        actors(1, label_selector={"type": "16c32g"}, fallback_strategy=[{"label_selector": {}}]),
        {"cpu-16": 1},
    ),
    Case(
        "a selector no type matches launches nothing and says why per type",
        actors(1, label_selector={"type": "nope"}),
        {},
        says="no node type can host it: cpu-4 doesn't match the label selector",
    ),
    Case(
        "an untolerated taint keeps the tainted type out",
        lambda c: c.submit(ScheduleRequest("a0", {"CPU": 1, "GPU": 1})),
        {},
        says="gpu-a100 has untolerated taint {gpu_node: true}",
    ),
    Case(
        "a tolerated taint lets a GPU actor launch the GPU type",
        lambda c: c.submit(ScheduleRequest("a0", {"CPU": 1, "GPU": 1}, tolerations={"gpu_node": "exists()"})),
        {"gpu-a100": 1},
    ),
    Case(
        "the automatic rare-resource taint keeps a CPU actor off the GPU type",
        actors(1, tolerations={"gpu_node": "true"}, label_selector={"accelerator-type": "A100"}),
        {},
        says="gpu-a100 has untolerated taint {rare-resource.corral.io/gpu: true}",
    ),
    Case(
        "a hard NodeLabel strategy is judged against the type's labels",
        actors(1, scheduling_strategy=NodeLabelSchedulingStrategy(hard={"zone": "usa-2"})),
        {"cpu-16": 1},
    ),
    Case(
        "hard node affinity to a named node never launches",
        actors(1, scheduling_strategy=NodeAffinitySchedulingStrategy("gone")),
        {},
        says="doesn't match the node affinity",
    ),
    Case(
        "hard affinity to an actor on an existing node never launches",
        both(busy_node("n1", {"app": "db"}), actors(1, scheduling_strategy=affinity("app", "IN", ["db"]))),
        {},
        says="doesn't match actor affinity rules",
    ),
    Case(
        "hard anti-affinity to its own label needs a node per actor",
        actors(3, labels={"app": "web"}, scheduling_strategy=affinity("app", "NOT_IN", ["web"])),
        {"cpu-4": 3},
    ),
    Case(
        "a STRICT_SPREAD group of 3 needs 3 distinct new nodes",
        group("STRICT_SPREAD", [{"CPU": 1}] * 3),
        {"cpu-4": 3},
        work="pg",
        says="launching 3 cpu-4 for this",
    ),
    Case(
        "a STRICT_PACK group gets one node holding the sum of its bundles",
        group("STRICT_PACK", [{"CPU": 2}] * 3),
        {"cpu-16": 1},
        work="pg",
    ),
    Case(
        "a PACK group fills one node before opening another",
        group("PACK", [{"CPU": 2}] * 2),
        {"cpu-4": 1},
        work="pg",
    ),
    Case(
        "each bundle's label selector picks its own type",
        group("PACK", [{"CPU": 1}] * 2, bundle_label_selector=[{"type": "4c8g"}, {"type": "16c32g"}]),
        {"cpu-4": 1, "cpu-16": 1},
        work="pg",
    ),
    Case(
        "a group's fallback bundles are planned when no type serves the primary ones",
        group(
            "PACK",
            [{"CPU": 1}],
            bundle_label_selector=[{"type": "nope"}],
            fallback_strategy=[{"bundle_label_selector": [{"type": "16c32g"}]}],
        ),
        {"cpu-16": 1},
        work="pg",
    ),
    Case(
        "a STRICT_SPREAD group of 3 with 1 existing free node launches 2",
        both(node("n1", 4), group("STRICT_SPREAD", [{"CPU": 1}] * 3)),
        {"cpu-4": 2},
        work="pg",
        says="launching 2 cpu-4 for this",
    ),
    Case(
        "a STRICT_SPREAD of 3 whose first 2 launched nodes registered and the 3rd still launches launches nothing",
        both(registered("L1"), registered("L2"), group("STRICT_SPREAD", [{"CPU": 1}] * 3)),
        {},
        fleet=Fleet(running={"cpu-4": ("cpu-4-L1", "cpu-4-L2")}, launching={"cpu-4": ("L3",)}),
        work="pg",
        says="autoscaler: waiting for launch L3 to register | launching nodes hold 1 of 1",
    ),
    Case(
        "a SPREAD group's bundles use existing free room and new nodes together",
        both(node("n1", 2), group("SPREAD", [{"CPU": 2}] * 3)),
        {"cpu-4": 1},
        work="pg",
    ),
    Case(
        "a bundle whose selector an existing node matches goes there, the other bundle's type is launched",
        both(
            node("n1", 4, {"type": "4c8g"}),
            group("STRICT_SPREAD", [{"CPU": 1}] * 2, bundle_label_selector=[{"type": "4c8g"}, {"type": "16c32g"}]),
        ),
        {"cpu-16": 1},
        work="pg",
    ),
    Case(
        "a STRICT_PACK group never splits between existing free room and a new node",
        both(node("n1", 2), group("STRICT_PACK", [{"CPU": 2}] * 2)),
        {"cpu-4": 1},
        work="pg",
        says="launching 1 cpu-4 for this",
    ),
    Case(
        "a STRICT_PACK group never splits between a launching node and a new one",
        both(group("STRICT_PACK", [{"CPU": 2}] * 2), lambda c: c.submit(ScheduleRequest("big", {"CPU": 2}))),
        {"cpu-4": 1},
        fleet=Fleet(launching={"cpu-4": ("L1",)}),
        work="pg",
        says="launching 1 cpu-4 for this",
    ),
    Case(
        "a group that cannot be launched whole launches nothing (all or nothing)",
        group("STRICT_SPREAD", [{"CPU": 1}] * 3),
        {},
        types=one_type(maximum=2),
        work="pg",
        says="cpu-4 is at max_workers (2)",
    ),
    Case("min_workers are launched with no demand", lambda c: None, {"cpu-4": 2}, types=one_type(minimum=2)),
    Case(
        "min_workers count running and launching nodes",
        lambda c: None,
        {"cpu-4": 1},
        types=one_type(minimum=3),
        fleet=Fleet(running={"cpu-4": ("n1",)}, launching={"cpu-4": ("L1",)}),
    ),
    Case(
        "max_workers is never exceeded and the rest waits with the reason",
        actors(5, cpu=4),
        {"cpu-4": 1},
        types=one_type(maximum=3),
        fleet=Fleet(running={"cpu-4": ("n1", "n2")}),
        says="cpu-4 is at max_workers (3)",
        work="a4",
    ),
    Case(
        "a round launches at most 5 nodes when few run",
        actors(8, cpu=4),
        {"cpu-4": 5},
        types=one_type(),
        says="upscaling budget is spent",
        work="a7",
    ),
    Case(
        "a round launches at most upscaling_speed times the running nodes",
        actors(30, cpu=4),
        {"cpu-4": 12},
        types=one_type().replace("node_types:", "upscaling_speed: 0.5\nnode_types:"),
        fleet=Fleet(running={"cpu-4": tuple(f"n{i}" for i in range(24))}),
    ),
    Case(
        "a backed-off type is skipped for the next cheapest",
        actors(1),
        {"cpu-16": 1},
        fleet=Fleet(backed_off=frozenset({"cpu-4"})),
    ),
    Case(
        "higher-priority work gets the last node a type may launch",
        both(actors(1, cpu=4), lambda c: c.submit(ScheduleRequest("urgent", {"CPU": 4}, priority=5))),
        {"cpu-4": 1},
        types=one_type(maximum=1),
        work="urgent",
        says="launching 1 cpu-4",
    ),
    Case(
        "demand inside a virtual cluster counts only up to its flexible maximum",
        both(vcluster("vc", VirtualCluster(flexible_resource_max={"CPU": 4})), actors(6, vcluster_id="vc")),
        {"cpu-4": 1},
        work="a5",
        says="virtual cluster vc may borrow only CPU 4 more (its flexible maximum): 2 of 6 are not demand",
    ),
    Case(
        "a virtual cluster's maximum goes to its work in the scheduler's order, whatever the shapes",
        both(
            vcluster("vc", VirtualCluster(flexible_resource_max={"CPU": 4})),
            actors(3, vcluster_id="vc"),
            lambda c: c.submit(ScheduleRequest("big", {"CPU": 3}, vcluster_id="vc")),
        ),
        {"cpu-4": 1},
        work="big",
        says="virtual cluster vc may borrow only CPU 4 more (its flexible maximum): 1 of 1 are not demand",
    ),
    Case(
        "a placement group inside a virtual cluster is not demand: the cluster grows for actors only",
        both(
            vcluster("vc", VirtualCluster(flexible_resource_max={"CPU": 8})),
            lambda c: c.create_placement_group(PlacementGroupRequest("pg", [{"CPU": 1}], vcluster_id="vc")),
        ),
        {},
        work="pg",
        says="placement groups in virtual cluster vc reserve only its nodes",
    ),
    Case(
        "work in a virtual cluster of fixed-size nodes only is not demand: the cluster never grows",
        both(
            lambda c: c.add_node("n1", {"CPU": 1}),
            vcluster("vc", VirtualCluster(fixed_size_nodes=[FixedSizeNodes([FixedSizeNode({"CPU": 1})])])),
            actors(2, vcluster_id="vc"),
        ),
        {},
        work="a1",
        says="virtual cluster vc does not grow",
    ),
    Case(
        "a queued virtual cluster's fixed-size nodes and minimum are one gang",
        vcluster(
            "vc",
            VirtualCluster(
                flexible_resource_min={"CPU": 2},
                fixed_size_nodes=[FixedSizeNodes([FixedSizeNode({"CPU": 4})] * 2, "STRICT_SPREAD")],
            ),
        ),
        {"cpu-4": 3},
        work="vc",
    ),
    Case(
        "work inside a queued virtual cluster is not demand: the cluster is",
        both(
            vcluster("vc", VirtualCluster(flexible_resource_min={"CPU": 2}, flexible_resource_max={"CPU": 8})),
            actors(1, vcluster_id="vc"),
        ),
        {"cpu-4": 1},
        says="virtual cluster vc is not admitted yet",
    ),
    Case(
        "placement groups nominated to a registered node take its room first, not other free room: no launch",
        both(
            lambda c: c.create_placement_group(PlacementGroupRequest("pg", [{"CPU": 2}, {"CPU": 1}], "PACK")),
            lambda c: c.create_placement_group(PlacementGroupRequest("sp", [{"CPU": 1}] * 2, "STRICT_SPREAD")),
            nominated_node("L1", {"pg": {"CPU": 3}, "sp": {"CPU": 1}}),
            quiet_node("other", 1),
        ),
        {},
        work="sp",
    ),
    Case(
        "room held for lower-priority nominated work is free to higher-priority work; the displaced work takes other "
        "free room: no launch",
        both(
            lambda c: c.submit(ScheduleRequest("lo", {"CPU": 2})),
            lambda c: c.submit(ScheduleRequest("hi", {"CPU": 4}, priority=1)),
            nominated_node("L1", {"lo": {"CPU": 2}}),
            quiet_node("other", 2),
        ),
        {},
        work="hi",
        says="fits on existing nodes",
    ),
    Case(
        "lower-priority nominated work displaced from its held room by higher-priority work is demand",
        both(
            lambda c: c.submit(ScheduleRequest("lo", {"CPU": 2})),
            lambda c: c.submit(ScheduleRequest("hi", {"CPU": 3}, priority=1)),
            nominated_node("L1", {"lo": {"CPU": 2}}),
        ),
        {"cpu-4": 1},
        work="lo",
        says="launching 1 cpu-4 for this",
    ),
    Case(
        "room held for nominated work of equal priority is not free to other work",
        both(
            lambda c: c.submit(ScheduleRequest("lo", {"CPU": 2}, priority=1)),
            lambda c: c.submit(ScheduleRequest("hi", {"CPU": 4}, priority=1)),
            nominated_node("L1", {"lo": {"CPU": 2}}),
            quiet_node("other", 2),
        ),
        {"cpu-4": 1},
        work="hi",
        says="launching 1 cpu-4 for this",
    ),
    Case(
        "a higher-priority placement group counts on room held for lower-priority nominated work",
        both(
            lambda c: c.submit(ScheduleRequest("lo", {"CPU": 2})),
            lambda c: c.create_placement_group(
                PlacementGroupRequest("pg", [{"CPU": 3}, {"CPU": 1}], "STRICT_PACK", priority=1)
            ),
            nominated_node("L1", {"lo": {"CPU": 2}}),
            quiet_node("other", 2),
        ),
        {},
        work="pg",
        says="fits on existing nodes",
    ),
    Case(
        "a higher-priority group counts on each registered node nominated for it only the room held for it, as the "
        "scheduler places it: no launch",
        both(
            lambda c: c.create_placement_group(PlacementGroupRequest("lo", [{"CPU": 1}] * 2, "STRICT_SPREAD")),
            lambda c: c.create_placement_group(PlacementGroupRequest("hi", [{"CPU": 1}] * 2, "SPREAD", priority=1)),
            lambda c: c.create_placement_group(PlacementGroupRequest("big", [{"CPU": 2}] * 2, "PACK")),
            nominated_node("L1", {"lo": {"CPU": 1}, "hi": {"CPU": 1}, "big": {"CPU": 2}}),
            nominated_node("L2", {"lo": {"CPU": 1}, "hi": {"CPU": 1}, "big": {"CPU": 2}}),
        ),
        {},
        work="big",
    ),
    Case(
        "a nested queued cluster under a parent that may borrow is one gang of new nodes",
        both(
            vcluster("team", VirtualCluster(flexible_resource_max={"CPU": 16})),
            vcluster("squad", QUEUED_SQUAD, parent="team"),
        ),
        {"cpu-4": 3},
        work="squad",
        says="launching 3 cpu-4 for this",
    ),
    Case(
        "a nested queued cluster that fits what its parent may borrow on existing free room is not demand",
        both(
            vcluster("team", VirtualCluster(flexible_resource_max={"CPU": 4})),
            vcluster("squad", VirtualCluster(flexible_resource_min={"CPU": 2}), parent="team"),
            quiet_node("n1", 4),
        ),
        {},
        work="squad",
        says="fits on existing nodes",
    ),
    Case(
        "a nested queued cluster whose parent is at its maximum launches nothing and says so",
        both(
            node("n1", 4),
            vcluster("team", VirtualCluster(flexible_resource_max={"CPU": 4})),
            lambda c: c.submit(ScheduleRequest("busy", {"CPU": 4}, vcluster_id="team")),
            vcluster("squad", VirtualCluster(flexible_resource_min={"CPU": 2}), parent="team"),
        ),
        {},
        work="squad",
        says="virtual cluster team may borrow only CPU 0 more (its flexible maximum)",
    ),
    Case(
        "a nested queued cluster bigger than what its parent may still borrow launches nothing (all or nothing)",
        both(
            vcluster("team", VirtualCluster(flexible_resource_max={"CPU": 8})),
            vcluster("squad", QUEUED_SQUAD, parent="team"),
        ),
        {},
        work="squad",
        says="virtual cluster team may borrow only CPU 8 more (its flexible maximum)",
    ),
    Case(
        "a nested queued cluster under a parent of fixed-size nodes only launches nothing: the parent never grows",
        both(
            node("n1", 2),
            vcluster("team", VirtualCluster(fixed_size_nodes=[FixedSizeNodes([FixedSizeNode({"CPU": 1})])])),
            vcluster("squad", VirtualCluster(flexible_resource_min={"CPU": 2}), parent="team"),
        ),
        {},
        work="squad",
        says="virtual cluster team does not grow (fixed-size nodes and flexible minimum only)",
    ),
    Case(
        "a nested cluster under a queued parent is not demand: the parent is",
        both(
            vcluster("team", VirtualCluster(flexible_resource_min={"CPU": 2}, flexible_resource_max={"CPU": 8})),
            vcluster("squad", VirtualCluster(flexible_resource_min={"CPU": 1}), parent="team"),
        ),
        {"cpu-4": 1},
        work="squad",
        says="virtual cluster team is not admitted yet",
    ),
    Case(
        "a nested queued cluster no type can host leaves its parent's growth to the parent's own work",
        both(
            vcluster("team", VirtualCluster(flexible_resource_max={"CPU": 8, "GPU": 4})),
            vcluster("squad", VirtualCluster(flexible_resource_min={"CPU": 4, "GPU": 1}), parent="team"),
            actors(1, cpu=8, vcluster_id="team"),
        ),
        {"cpu-16": 1},
        says="launching 1 cpu-16 for this",
    ),
    Case(
        "a queued grandchild launches nothing: its parent grows only on nodes the grandparent holds already",
        both(
            vcluster("team", VirtualCluster(flexible_resource_max={"CPU": 16})),
            vcluster("squad", VirtualCluster(flexible_resource_max={"CPU": 8}), parent="team"),
            vcluster("unit", VirtualCluster(flexible_resource_min={"CPU": 2}), parent="squad"),
        ),
        {},
        work="unit",
        says="virtual cluster squad grows only on nodes virtual cluster team holds already",
    ),
    Case(
        "work in a nested cluster launches nothing: the cluster grows only on nodes its parent holds already",
        both(
            vcluster("team", VirtualCluster(flexible_resource_max={"CPU": 16})),
            vcluster("squad", VirtualCluster(flexible_resource_max={"CPU": 8}), parent="team"),
            actors(1, vcluster_id="squad"),
        ),
        {},
        says="virtual cluster squad grows only on nodes virtual cluster team holds already",
    ),
    Case(
        "a DataFlow operation is replayed after its upstream: preferring the upstream's zone, it shares its node",
        both(
            lambda c: c.submit(ScheduleRequest("up", {"CPU": 1}, label_selector={"zone": "usa-2"})),
            lambda c: c.submit(ScheduleRequest("down", {"CPU": 4}, run_after=PREFER_UP_ZONE)),
        ),
        {"cpu-16": 1},
        work="down",
        says="launching 1 cpu-16 for this",
    ),
    Case(
        "work in a virtual cluster is replayed as the cluster grows: its grown flexible node takes the next actor",
        both(
            vcluster("vc", VirtualCluster(flexible_resource_max={"CPU": 32})),
            lambda c: c.submit(ScheduleRequest("up", {"CPU": 1}, label_selector={"zone": "usa-2"}, vcluster_id="vc")),
            lambda c: c.submit(ScheduleRequest("down", {"CPU": 4}, vcluster_id="vc")),
        ),
        {"cpu-16": 1},
        work="down",
        says="launching 1 cpu-16 for this",
    ),
    Case(
        "new nodes for work in a virtual cluster must pass the cluster's tolerations",
        both(
            vcluster("vc", VirtualCluster(flexible_resource_max={"CPU": 16, "GPU": 4})),
            lambda c: c.submit(
                ScheduleRequest("a0", {"CPU": 1, "GPU": 1}, tolerations={"gpu_node": "exists()"}, vcluster_id="vc")
            ),
        ),
        {},
        says="gpu-a100 has untolerated taint {gpu_node: true} (virtual cluster vc's tolerations)",
    ),
]


def _outcome(result: ScalePlan, work: str) -> str:
    group_ = result.group_of(work)
    return f"{result.about(work)} | {group_.outcome() if group_ else ''}"


@pytest.mark.parametrize("case", CASES, ids=[case.sentence for case in CASES])
def test_the_planner(case: Case) -> None:
    target = cluster()
    case.setup(target)
    result = plan_for(target, config(case.types), case.fleet)
    assert launched(result) == case.launches, _outcome(result, case.work)
    assert case.says in _outcome(result, case.work)


def test_the_demand_groups_carry_shape_selectors_tolerations_strategy_and_count() -> None:
    target = cluster()
    for index in range(3):
        target.submit(ScheduleRequest(f"g{index}", {"CPU": 1, "GPU": 1}, tolerations={"gpu_node": "exists()"}))
    target.create_placement_group(PlacementGroupRequest("pg", [{"CPU": 1}], "STRICT_SPREAD", [{"type": "x"}]))
    result = plan_for(target)
    actors_, groups = sorted(result.demand, key=lambda g: g.kind)
    assert (actors_.kind, actors_.shape, actors_.count, actors_.served_by) == (
        "actor",
        ({"CPU": 1.0, "GPU": 1.0},),
        3,
        ("gpu-a100",),
    )
    assert (actors_.tolerations, actors_.strategy) == ({"gpu_node": "exists()"}, "")
    assert (groups.kind, groups.strategy, groups.selectors, groups.served_by) == (
        "placement_group",
        "STRICT_SPREAD",
        (({"type": "x"},),),
        (),
    )
    assert "1 x placement_group {CPU: 1} STRICT_SPREAD" in groups.describe()


def test_requests_alike_but_for_their_labels_are_one_demand_group() -> None:
    target = cluster()
    target.submit(ScheduleRequest("a", {"CPU": 1}, labels={"app": "x"}))
    target.submit(ScheduleRequest("b", {"CPU": 1}, labels={"app": "y"}, namespace="other"))
    result = plan_for(target)
    assert [(group.work_ids, group.unmet, group.launching) for group in result.demand] == [(("a", "b"), 2, 2)]


def test_each_launch_says_which_work_each_node_is_for() -> None:
    target = cluster()
    target.create_placement_group(PlacementGroupRequest("pg", [{"CPU": 1}] * 2, "STRICT_SPREAD"))
    target.submit(ScheduleRequest("big", {"CPU": 4}))
    (launch,) = plan_for(target).launches
    assert (launch.node_type, launch.count, launch.work_ids) == ("cpu-4", 3, ("big", "pg"))
    assert sorted(launch.per_node) == [("big",), ("pg",), ("pg",)]
