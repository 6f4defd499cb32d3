"""`corral demo`: an in-process cluster in three zones, a workload using every rule, placements and explanations."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Protocol

from schemas import NodeAffinitySchedulingStrategy, PlacementGroupRequest, ScheduleRequest, Taint
from services.cli.demo import tenants
from services.cli.demo.tenants import TenantDriver
from services.cli.demo.workload import SEED, Step, build_cluster, workload
from services.cli.table import format_table
from services.core import Cluster, Pending
from services.core.labels import ACCELERATOR_TYPE, MARKET_TYPE, REGION, ZONE, user_labels

Snapshot = tuple[dict[str, str], dict[str, list[str]], set[str]]
"""Actor -> node, placement group -> bundle nodes, and the actors that are pending."""


def _amount(value: float) -> str:
    return f"{value:g}"


def nodes_table(cluster: Cluster) -> str:
    """Each node: zone, kind, user labels, taints, used/total CPU and GPU."""
    rows = []
    for node_id, node in sorted(cluster.view.nodes.items()):
        labels = node.labels
        kind = " ".join(v for v in (labels.get(MARKET_TYPE), labels.get(ACCELERATOR_TYPE)) if v)
        usage = []
        for resource in ("CPU", "GPU"):
            total = node.total.get(resource, 0.0)
            used = total - node.free.get(resource, 0.0)
            usage.append(f"{_amount(used)}/{_amount(total)}" if total else "-")
        taints = ", ".join(f"{t.key}={t.value}:{t.effect}" for t in node.taints) or "-"
        user = ",".join(f"{key}={value}" for key, value in user_labels(labels).items())
        zone = f"{labels.get(ZONE, '-')}/{labels.get(REGION, '-')}"
        rows.append([node_id, zone, kind, user, *usage, taints])
    return format_table(["NODE", "ZONE/REGION", "MARKET/GPU", "LABELS", "CPU", "GPU", "TAINTS"], rows)


def snapshot(cluster: Cluster) -> Snapshot:
    """Where everything is now."""
    return cluster.placements(), cluster.placement_groups(), {p.id for p in cluster.pending() if p.kind == "actor"}


def _where(snap: Snapshot, actor_id: str) -> str:
    placements, _, pending = snap
    if actor_id in placements:
        return placements[actor_id]
    return "pending" if actor_id in pending else "gone (no restarts left)"


def changes_table(cluster: Cluster, before: Snapshot) -> str:
    """Every actor or placement group whose placement changed since `before`."""
    after = snapshot(cluster)
    rows = []
    for actor_id in sorted({*before[0], *before[2], *after[0]}):
        was, now = _where(before, actor_id), _where(after, actor_id)
        if was != now and not (was.startswith("gone") and now.startswith("gone")):
            rows.append([actor_id, was, now])
    for pg_id in sorted({*before[1], *after[1]}):
        was_nodes, now_nodes = before[1].get(pg_id), after[1].get(pg_id)
        if was_nodes != now_nodes:
            rows.append([pg_id, ",".join(was_nodes or ["pending"]), ",".join(now_nodes or ["pending"])])
    return format_table(["ACTOR/GROUP", "BEFORE", "AFTER"], rows, indent="  ")


def placements_table(cluster: Cluster, steps: list[Step]) -> str:
    """Each demo actor: its node, zone and the rule that put it there."""
    placements = cluster.placements()
    rows = []
    for step in steps:
        if isinstance(step.request, ScheduleRequest):
            node_id = placements.get(step.request.actor_id)
            zone = cluster.view.nodes[node_id].labels.get(ZONE, "-") if node_id else "-"
            rows.append([step.request.actor_id, node_id or "(pending)", zone, step.why])
    return format_table(["ACTOR", "NODE", "ZONE", "WHY"], rows)


def groups_table(cluster: Cluster, steps: list[Step]) -> str:
    """Each placement group: strategy, a node per bundle, and why."""
    groups = cluster.placement_groups()
    rows = []
    for step in steps:
        if isinstance(step.request, PlacementGroupRequest):
            nodes = groups.get(step.request.pg_id)
            rows.append(
                [step.request.pg_id, step.request.strategy, ",".join(nodes) if nodes else "(pending)", step.why]
            )
    return format_table(["GROUP", "STRATEGY", "BUNDLE NODES", "WHY"], rows)


def describe_pending(pending: Pending, priority: int | None) -> list[str]:
    """A `kubectl describe`-like explanation: the message, then the nodes behind each reason."""
    kind = "placement group" if pending.kind == "placement_group" else "actor"
    title = f"{kind} {pending.id}" + (f" (priority {priority})" if priority else "")
    lines = [f"{title}:", textwrap.fill(pending.message, 118, initial_indent="  ", subsequent_indent="    ")]
    width = max(len(reason) for reason in pending.nodes_by_reason)
    for reason, node_ids in pending.nodes_by_reason.items():
        lines.append(f"    - {reason.ljust(width)}  {' '.join(node_ids)}")
    return lines


class Driver(TenantDriver, Protocol):
    """Where the demo runs: an in-process `Cluster`, or the mesh through its client."""

    def submit(self, request: ScheduleRequest) -> object:
        """Schedule an actor."""

    def create_placement_group(self, request: PlacementGroupRequest) -> object:
        """Reserve a placement group."""

    def remove_node(self, node_id: str) -> object:
        """A node dies."""

    def add_taints(self, node_id: str, taints: list[Taint]) -> object:
        """Taint a node."""

    def remove_taints(self, node_id: str, keys: list[str]) -> object:
        """Untaint a node."""


class InProcess:
    """The demo on an in-process `Cluster`."""

    def __init__(self) -> None:
        self._cluster = build_cluster()
        self.submit = self._cluster.submit
        self.create_placement_group = self._cluster.create_placement_group
        self.remove_node = self._cluster.remove_node
        self.add_taints = self._cluster.add_taints
        self.remove_taints = self._cluster.remove_taints
        self.create_virtual_cluster = self._cluster.create_virtual_cluster
        self.destroy_virtual_cluster = self._cluster.destroy_virtual_cluster

    def cluster(self) -> Cluster:
        """The cluster itself."""
        return self._cluster


def event(driver: Driver, title: str, action: Callable[[], object]) -> None:
    """Run one event and print what moved."""
    before = snapshot(driver.cluster())
    action()
    print(f"\n* {title}")
    print(changes_table(driver.cluster(), before))


def run(driver: Driver | None = None, where: str = "in-process") -> int:
    """Run the workload and the events on `driver` (default: in-process) and print the tables; 0 when done."""
    driver = driver or InProcess()
    steps = workload()
    for step in steps:
        if isinstance(step.request, PlacementGroupRequest):
            driver.create_placement_group(step.request)
        else:
            driver.submit(step.request)
    cluster = driver.cluster()
    exclusive_node = cluster.placements().get("exclusive", "cpu-1c")
    intruder = ScheduleRequest(
        "intruder",
        {"CPU": 1},
        labels={"app": "intruder"},
        scheduling_strategy=NodeAffinitySchedulingStrategy(exclusive_node),
    )
    steps.append(Step(intruder, f"NodeAffinity hard {exclusive_node} (exclusive's)"))
    driver.submit(intruder)
    cluster = driver.cluster()

    nodes = len(cluster.view.nodes)
    print(f"corral demo ({where}): {nodes} nodes in 3 zones, seed {SEED}, GPU is a rare resource\n")
    print("NODES (after the workload)")
    print(nodes_table(cluster))
    print("\nPLACEMENTS")
    print(placements_table(cluster, steps))
    print("\nPLACEMENT GROUPS")
    print(groups_table(cluster, steps))

    print("\nEVENTS")
    cache_node = cluster.placements()["cache"]
    event(
        driver,
        f"node {cache_node} dies (cache and cache-sidecar restart together)",
        lambda: driver.remove_node(cache_node),
    )
    web_node = driver.cluster().placements()["web-2"]
    maintenance = Taint("maintenance", "now", "NoExecute")
    event(
        driver,
        f"NoExecute taint maintenance=now on {web_node} (evicts web-2 and the rest)",
        lambda: driver.add_taints(web_node, [maintenance]),
    )
    event(
        driver,
        "taint quarantine removed from cpu-3c (batch-high wins on priority, batch-report follows it)",
        lambda: driver.remove_taints("cpu-3c", ["quarantine"]),
    )
    cluster = driver.cluster()

    print("\nPENDING (why each is waiting)")
    priorities = {
        step.request.actor_id
        if isinstance(step.request, ScheduleRequest)
        else step.request.pg_id: step.request.priority
        for step in steps
    }
    for pending in cluster.pending():
        print("\n".join(describe_pending(pending, priorities.get(pending.id))))
    print("\nNODES (at the end)")
    print(nodes_table(cluster))
    tenants.run(driver)
    return 0
