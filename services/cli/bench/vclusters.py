"""The `vclusters` case of `corral bench core`: admission, churn and scheduling inside virtual clusters.

It starts from the pre-filled cluster of the other workloads (`nodes` nodes of 64 CPUs, 10 placed actors each),
then, timing every core call one by one:

1. fill: `--tenants` virtual clusters are created. Each has one or two groups of 1 to 4 fixed-size nodes (PACK,
   SPREAD or STRICT_SPREAD, mixed) and a flexible CPU range (min..max); their minima together ask 80% of the
   free CPUs. Size classes by the minimum (fixed-size nodes plus flexible minimum), in numbers 10:7:3: small
   (about 1/3 of the average minimum), medium (about 1x) and large (about 3.3x).
2. decisions: `--decisions` requests (a mix of plain, label-selector, soft-affinity and hard anti-affinity
   requests) are each made inside a tenant's cluster (round robin) and, interleaved, the same request at the
   root of the same cluster: decisions/s inside against decisions/s at the root.
3. queue and churn: `--tenants / 2` more clusters of the same mix are requested (demand is now 1.2x the free
   CPUs, so some wait in the admission queue), then `--churn` rounds each destroy a random admitted cluster
   (with `force`: its actors stop) and request that slot's cluster again, which admits waiting clusters.

Admission wait is measured for the clusters requested after the fill (while there is a queue), in operations
(create/destroy calls from the request to the call that admitted it; 0: its own create) and in core time (the
summed durations of those calls, so the benchmark's own bookkeeping is not counted).
"""

from __future__ import annotations

import gc
import random
import resource
import time
from dataclasses import dataclass, field
from typing import Literal, TypedDict

import msgspec

from schemas import (
    NODE_ID_LABEL,
    ActorAffinityMatchExpression,
    ActorAffinityOperator,
    ActorAffinitySchedulingStrategy,
    Admitted,
    AnyEvent,
    FixedSizeNode,
    FixedSizeNodes,
    ScheduleRequest,
    VirtualCluster,
    VirtualNodesReserved,
)
from schemas.vclusters import VNodePolicy
from services.cli.bench.workloads import (
    ACTORS_PER_NODE,
    NODE_RESOURCES,
    REQUEST,
    SELECTORS,
    WORKLOADS,
    Figures,
    Layout,
    build_events,
    percentile,
)
from services.core import Cluster, Pending

SEED = 42
DEFAULT_TENANTS = 200
DEFAULT_CHURN = 200
FILL = 0.8
"""The tenants' minima together ask this fraction of the free CPUs (all fit)."""
QUEUED_PER_TENANT = 0.5
"""Clusters requested after the tenants, per tenant (same mix): demand becomes (1 + this) * FILL of the free CPUs."""
GROWTH = 0.5
"""A cluster's flexible maximum is its flexible minimum plus this fraction of its whole minimum."""

SizeClass = Literal["small", "medium", "large"]
SIZE_CLASSES: tuple[SizeClass, ...] = ("small", "medium", "large")
CLASS_MIX: dict[SizeClass, tuple[float, float, tuple[int, ...]]] = {
    # share of the clusters, minimum relative to a small one, CPUs of one fixed-size node
    "small": (0.50, 1.0, (1, 2, 4)),
    "medium": (0.35, 3.0, (2, 4, 8)),
    "large": (0.15, 10.0, (4, 8, 16, 32)),
}
POLICIES: tuple[VNodePolicy, ...] = ("PACK", "SPREAD", "STRICT_SPREAD")


class WaitFigures(TypedDict):
    """Time from request to admission for one size class."""

    admitted: int
    waited: int
    """How many of those were queued first (admitted by a later call)."""
    ops_p50: int
    ops_p99: int
    ms_p50: float
    ms_p99: float


class VClusterFigures(Figures):
    """What the `vclusters` case reports (one JSON line): the core benchmark's figures (decisions inside the
    virtual clusters), then its own."""

    tenants: int
    fill_admitted: int
    """Tenants admitted by their own create call in the fill."""
    requested: int
    destroyed: int
    admissions: int
    admitted_from_queue: int
    still_queued: int
    admissions_per_s: float
    """Create calls that ended admitted, over their summed duration (fill, queue and churn)."""
    churn_admissions_per_s: float
    """After the fill: every admission (by its own create or a later call), over the summed duration of every
    create and destroy call."""
    churn_ops_per_s: float
    """After the fill: create and destroy calls, over their summed duration."""
    create_p50_us: float
    create_p99_us: float
    destroy_p50_us: float
    destroy_p99_us: float
    root_decisions_per_s: float
    root_p50_us: float
    root_p99_us: float
    inside_cost_vs_root: float
    """Time per decision inside a virtual cluster over time per decision at the root (target <= 1.5)."""
    pending_inside: int
    pending_root: int
    wait: dict[str, WaitFigures]
    """Per size class, the clusters requested after the fill (while there is a queue)."""


@dataclass(frozen=True)
class Slot:
    """One cluster spec that is requested again each time its cluster is destroyed."""

    index: int
    size_class: SizeClass
    spec: VirtualCluster
    minimum: float


def _group(rng: random.Random, sizes: tuple[int, ...], policy: VNodePolicy, first: bool) -> FixedSizeNodes:
    count = rng.randint(1, 4)
    cpu = float(rng.choice(sizes))
    roles = ["head" if first and position == 0 else "worker" for position in range(count)]
    return FixedSizeNodes([FixedSizeNode({"CPU": cpu}, {"role": role}) for role in roles], policy)


def _size_class(index: int) -> SizeClass:
    """Classes in CLASS_MIX proportions, interleaved (every run of 20 has 10 small, 7 medium and 3 large)."""
    draw = (index * 3 % 20 + 0.5) / 20
    for name in SIZE_CLASSES:
        share = CLASS_MIX[name][0]
        if draw < share:
            return name
        draw -= share
    return SIZE_CLASSES[-1]


def make_slots(count: int, tenants: int, free_cpus: float, seed: int = SEED) -> list[Slot]:
    """`count` cluster specs whose minima average FILL * free_cpus / tenants (classes mixed by CLASS_MIX)."""
    rng = random.Random(seed)
    mean_weight = sum(share * weight for share, weight, _ in CLASS_MIX.values())
    small = FILL * free_cpus / max(1, tenants) / mean_weight
    slots = []
    for index in range(count):
        size_class = _size_class(index)
        _, weight, sizes = CLASS_MIX[size_class]
        target = max(1.0, round(small * weight * rng.uniform(0.8, 1.2)))
        groups = [
            _group(rng, sizes, POLICIES[(index + number) % len(POLICIES)], number == 0)
            for number in range(rng.randint(1, 2))
        ]
        fixed = sum(node.resources["CPU"] for group in groups for node in group.nodes)
        flexible_min = max(0.0, target - fixed)
        flexible_max = flexible_min + round(GROWTH * max(target, fixed))
        spec = VirtualCluster(
            flexible_resource_min={"CPU": flexible_min},
            flexible_resource_max={"CPU": flexible_max},
            fixed_size_nodes=groups,
        )
        slots.append(Slot(index, size_class, spec, fixed + flexible_min))
    return slots


def request_mix(layout: Layout, count: int) -> list[ScheduleRequest]:
    """The timed requests (no virtual cluster yet): plain, label selector, soft affinity, hard anti-affinity."""
    requests = []
    for d in range(count):
        service = layout.app_labels[(d * 7) % layout.services]
        kind = d % 4
        strategy = None
        if kind in (2, 3):
            operator = ActorAffinityOperator.IN if kind == 2 else ActorAffinityOperator.NOT_IN
            expression = ActorAffinityMatchExpression("app", operator, [service["app"]], kind == 2, NODE_ID_LABEL)
            strategy = ActorAffinitySchedulingStrategy([expression])
        requests.append(
            ScheduleRequest(
                f"d-{d}",
                REQUEST,
                labels=service,
                label_selector=SELECTORS[(d // 4) % len(SELECTORS)] if kind == 1 else {},
                scheduling_strategy=strategy,
            )
        )
    return requests


@dataclass
class Admissions:
    """Creates and destroys, timed one by one, and when each requested cluster was admitted."""

    cluster: Cluster
    ops: int = 0
    core_ns: int = 0
    create_admitted_ns: list[int] = field(default_factory=list)
    create_queued_ns: list[int] = field(default_factory=list)
    destroy_ns: list[int] = field(default_factory=list)
    admitted: list[str] = field(default_factory=list)
    admissions: int = 0
    from_queue: int = 0
    slot_of: dict[str, Slot] = field(default_factory=dict)
    waiting: dict[str, tuple[int, int, bool]] = field(default_factory=dict)
    """vc_id -> (ops, core_ns) before its create call, and whether its wait is measured."""
    measure_waits: bool = False
    """Set after the fill: only clusters requested from then on count in `waits`."""
    waits: dict[SizeClass, list[tuple[int, int]]] = field(default_factory=lambda: {name: [] for name in SIZE_CLASSES})
    """Per size class: (operations waited, core ns waited) of every measured admission."""
    generation: dict[int, int] = field(default_factory=dict)

    def create(self, slot: Slot) -> None:
        """Request `slot`'s cluster (a new id each time)."""
        generation = self.generation.get(slot.index, 0)
        self.generation[slot.index] = generation + 1
        vc_id = f"vc-{slot.index}-{generation}"
        self.slot_of[vc_id] = slot
        before = (self.ops, self.core_ns, self.measure_waits)
        begin = time.perf_counter_ns()
        decided = self.cluster.decided(lambda: self.cluster.create_virtual_cluster(vc_id, slot.spec))
        took = time.perf_counter_ns() - begin
        outcome = decided.result
        self._count(took)
        if isinstance(outcome, Admitted):
            self.create_admitted_ns.append(took)
            self.admitted.append(vc_id)
            self.admissions += 1
            if self.measure_waits:
                self.waits[slot.size_class].append((0, took))
        else:
            self.create_queued_ns.append(took)
            self.waiting[vc_id] = before
        self._collect(decided.events)

    def destroy(self, vc_id: str) -> None:
        """Destroy an admitted cluster (stopping its work), which may admit waiting ones."""
        self.admitted.remove(vc_id)
        begin = time.perf_counter_ns()
        decided = self.cluster.decided(lambda: self.cluster.destroy_virtual_cluster(vc_id, force=True))
        took = time.perf_counter_ns() - begin
        self._count(took)
        self.destroy_ns.append(took)
        self._collect(decided.events)

    def _count(self, took: int) -> None:
        self.ops += 1
        self.core_ns += took

    def _collect(self, events: list[AnyEvent]) -> None:
        """Note the waiting clusters a call admitted (from the events it wrote)."""
        for event in events:
            if isinstance(event, VirtualNodesReserved) and event.vc_id in self.waiting:
                ops, core_ns, measured = self.waiting.pop(event.vc_id)
                if measured:
                    wait = (self.ops - ops - 1, self.core_ns - core_ns)
                    self.waits[self.slot_of[event.vc_id].size_class].append(wait)
                self.admitted.append(event.vc_id)
                self.admissions += 1
                self.from_queue += 1


def _time_decisions(
    cluster: Cluster, requests: list[ScheduleRequest], targets: list[str]
) -> tuple[list[int], list[int], int, int]:
    """Each request inside a target cluster (round robin), then the same request at the root."""
    pairs = [
        (
            msgspec.structs.replace(request, actor_id=f"in-{d}", vcluster_id=targets[d % len(targets)]),
            msgspec.structs.replace(request, actor_id=f"root-{d}"),
        )
        for d, request in enumerate(requests)
    ]
    inside_ns: list[int] = []
    root_ns: list[int] = []
    pending_inside = pending_root = 0
    clock = time.perf_counter_ns
    for inside, root in pairs:
        begin = clock()
        decision = cluster.submit(inside)
        inside_ns.append(clock() - begin)
        pending_inside += isinstance(decision, Pending)
        begin = clock()
        decision = cluster.submit(root)
        root_ns.append(clock() - begin)
        pending_root += isinstance(decision, Pending)
    return inside_ns, root_ns, pending_inside, pending_root


def _rate(count: int, total_ns: int) -> float:
    return round(count * 1e9 / (total_ns or 1), 1)


def _us(sorted_ns: list[int], fraction: float) -> float:
    return round(percentile(sorted_ns, fraction) / 1000, 1) if sorted_ns else 0.0


def _wait_figures(waits: list[tuple[int, int]]) -> WaitFigures:
    ops = sorted(w[0] for w in waits)
    ns = sorted(w[1] for w in waits)
    return WaitFigures(
        admitted=len(waits),
        waited=sum(1 for w in waits if w[0] > 0),
        ops_p50=percentile(ops, 0.50) if ops else 0,
        ops_p99=percentile(ops, 0.99) if ops else 0,
        ms_p50=round(percentile(ns, 0.50) / 1e6, 2) if ns else 0.0,
        ms_p99=round(percentile(ns, 0.99) / 1e6, 2) if ns else 0.0,
    )


def run_case(nodes: int, decisions: int, tenants: int = DEFAULT_TENANTS, churn: int = DEFAULT_CHURN) -> VClusterFigures:
    """Build the pre-filled cluster, then time the fill, the decisions inside and at the root, and the churn."""
    layout = Layout(nodes)
    events = build_events(WORKLOADS["plain"], layout, [])
    started = time.perf_counter()
    cluster = Cluster.from_events(events, SEED)
    replay_seconds = time.perf_counter() - started
    placed_before = len(cluster.placements())
    if placed_before != nodes * ACTORS_PER_NODE:
        raise RuntimeError(f"setup folded {placed_before} placed actors, expected {nodes * ACTORS_PER_NODE}")
    folded = len(events)
    del events
    free_cpus = nodes * (NODE_RESOURCES["CPU"] - ACTORS_PER_NODE * REQUEST["CPU"])
    queued = round(tenants * QUEUED_PER_TENANT)
    slots = make_slots(tenants + queued, tenants, free_cpus)
    requests = request_mix(layout, decisions)
    rng = random.Random(SEED)
    gc.collect()
    gc.freeze()  # the pre-filled cluster is long-lived: keep the collector from re-walking it on every cycle
    try:
        book = Admissions(cluster)
        for slot in slots[:tenants]:
            book.create(slot)
        targets = sorted(book.admitted)
        if not targets:
            raise RuntimeError("no tenant cluster was admitted: too many tenants for this many nodes")
        fill_admitted = len(book.create_admitted_ns)
        inside_ns, root_ns, pending_inside, pending_root = _time_decisions(cluster, requests, targets)
        fill_ops, fill_ns, fill_admissions = book.ops, book.core_ns, book.admissions
        book.measure_waits = True
        for slot in slots[tenants:]:
            book.create(slot)
        for _ in range(churn):
            if not book.admitted:
                break
            victim = rng.choice(book.admitted)
            book.destroy(victim)
            book.create(book.slot_of[victim])
    finally:
        gc.unfreeze()
    inside_ns.sort()
    root_ns.sort()
    creates = sorted(book.create_admitted_ns + book.create_queued_ns)
    destroys = sorted(book.destroy_ns)
    churn_ns = book.core_ns - fill_ns
    inside_rate = _rate(len(inside_ns), sum(inside_ns))
    root_rate = _rate(len(root_ns), sum(root_ns))
    return VClusterFigures(
        workload="vclusters",
        nodes=nodes,
        placed_before=placed_before,
        decisions_per_s=inside_rate,
        p50_us=_us(inside_ns, 0.50),
        p99_us=_us(inside_ns, 0.99),
        peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        replay_events_per_s=round(folded / replay_seconds, 1),
        tenants=tenants,
        fill_admitted=fill_admitted,
        requested=len(creates),
        destroyed=len(destroys),
        admissions=book.admissions,
        admitted_from_queue=book.from_queue,
        still_queued=len(book.waiting),
        admissions_per_s=_rate(len(book.create_admitted_ns), sum(book.create_admitted_ns)),
        churn_admissions_per_s=_rate(book.admissions - fill_admissions, churn_ns),
        churn_ops_per_s=_rate(book.ops - fill_ops, churn_ns),
        create_p50_us=_us(creates, 0.50),
        create_p99_us=_us(creates, 0.99),
        destroy_p50_us=_us(destroys, 0.50),
        destroy_p99_us=_us(destroys, 0.99),
        root_decisions_per_s=root_rate,
        root_p50_us=_us(root_ns, 0.50),
        root_p99_us=_us(root_ns, 0.99),
        inside_cost_vs_root=round(root_rate / (inside_rate or 1.0), 2),
        pending_inside=pending_inside,
        pending_root=pending_root,
        wait={name: _wait_figures(book.waits[name]) for name in SIZE_CLASSES},
    )


def summary_lines(figures: VClusterFigures) -> list[str]:
    """The case's own figures, for the table output (indented under its row)."""
    ratio = figures["inside_cost_vs_root"]
    lines = [
        f"  {figures['tenants']} tenants ({figures['fill_admitted']} admitted at once), {figures['requested']:,} "
        f"clusters requested in all, {figures['destroyed']:,} destroyed, {figures['admissions']:,} admitted "
        f"({figures['admitted_from_queue']:,} from the queue), {figures['still_queued']} still queued",
        f"  admissions/s: {figures['admissions_per_s']:,.0f} over the create calls that ended admitted "
        f"(target >= 500); after the fill {figures['churn_admissions_per_s']:,.0f} over all create+destroy calls "
        f"({figures['churn_ops_per_s']:,.0f} calls/s)",
        f"  create p50/p99 {figures['create_p50_us']:,.0f}/{figures['create_p99_us']:,.0f} us, "
        f"destroy p50/p99 {figures['destroy_p50_us']:,.0f}/{figures['destroy_p99_us']:,.0f} us",
        f"  decisions inside {figures['decisions_per_s']:,.0f}/s vs root {figures['root_decisions_per_s']:,.0f}/s: "
        f"inside costs x{ratio:.2f} the root (target <= 1.5)"
        + (
            f"; pending: {figures['pending_inside']} inside, {figures['pending_root']} at the root"
            if figures["pending_inside"] or figures["pending_root"]
            else ""
        ),
        "  request to admission after the fill, p50/p99 in create+destroy calls and in core ms:",
    ]
    for name in SIZE_CLASSES:
        wait = figures["wait"][name]
        lines.append(
            f"    {name:<6} {wait['admitted']:>5} admitted ({wait['waited']} waited): "
            f"{wait['ops_p50']}/{wait['ops_p99']} calls, {wait['ms_p50']:.2f}/{wait['ms_p99']:.2f} ms"
        )
    return lines
