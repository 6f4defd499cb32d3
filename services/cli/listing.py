"""What `corral get` shows: one read of the mesh (a `Snapshot`), its rows per kind, and the totals under them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import msgspec

from schemas import Pending, Taint, VirtualClusterInfo
from schemas.queries import ActorInfo, NodeInfo
from services.cli.args import format_taint
from services.cli.records import age
from services.client import Client
from services.core.amounts import format_amount
from services.core.errors import NotFoundError
from services.core.labels import CORDON_TAINT, DRAIN_TAINT, ZONE, node_condition, user_labels
from services.core.selectors import LabelSelector

KINDS: dict[str, str] = {
    **dict.fromkeys(("nodes", "node", "no"), "nodes"),
    **dict.fromkeys(("actors", "actor"), "actors"),
    **dict.fromkeys(("pgs", "pg", "placementgroups", "placementgroup"), "pgs"),
    **dict.fromkeys(("vcs", "vc", "virtualclusters", "virtualcluster"), "vcs"),
    "pending": "pending",
}
"""Every spelling `get` takes (kubectl-ish aliases too) -> its kind."""

RECORD_KIND = {"nodes": "node", "actors": "actor", "pgs": "pg", "vcs": "vc"}
"""The log aggregate whose first event gives a row its AGE."""

CORDON = Taint(CORDON_TAINT, "", "NoSchedule")
"""`corral cordon`: no new work on the node."""
DRAIN = Taint(DRAIN_TAINT, "", "NoExecute")
"""`corral drain`: no new work, and the work there is evicted (it restarts elsewhere while it may)."""
NONE = "<none>"


@dataclass
class Snapshot:
    """One read of the mesh: everything `get` and `describe` show, and the log sequence it reflects (when known)."""

    nodes: list[NodeInfo] = field(default_factory=list)
    actors: list[ActorInfo] = field(default_factory=list)
    placement_groups: dict[str, list[str]] = field(default_factory=dict)
    pending: list[Pending] = field(default_factory=list)
    clusters: list[VirtualClusterInfo] = field(default_factory=list)
    sequence: int | None = None


async def read_snapshot(client: Client, kind: str, vc: str | None) -> Snapshot:
    """What `kind` needs, from the scheduler (or, with `vc`, that virtual cluster's views)."""
    if kind == "vcs":
        clusters = await client.virtual_clusters()
        if vc and all(info.cluster_id != vc for info in clusters):
            raise NotFoundError(f"--vc {vc!r}: no such virtual cluster")
        return Snapshot(clusters=subtree(clusters, vc) if vc else clusters)
    if vc:
        work = await client.virtual_cluster_work(vc)
        nodes = await client.nodes(vcluster_id=vc)
        return Snapshot(nodes, work.actors, work.placement_groups, work.pending, sequence=work.sequence)
    status = await client.status()
    return Snapshot(status.nodes, status.actors, status.placement_groups, status.pending, sequence=status.sequence)


def subtree(clusters: list[VirtualClusterInfo], root: str) -> list[VirtualClusterInfo]:
    """`root` and every cluster under it, in the order given."""
    children = {info.cluster_id: info.children for info in clusters}
    inside, todo = set(), [root]
    while todo:
        cluster = todo.pop()
        if cluster in children and cluster not in inside:
            inside.add(cluster)
            todo += children[cluster]
    return [info for info in clusters if info.cluster_id in inside]


@dataclass
class Table:
    """A kind's rows (the first cell of each is its name) and the items `-o json|yaml` prints."""

    headers: list[str]
    rows: list[list[str]]
    items: list[Any]

    def only(self, names: list[str]) -> Table:
        """The rows (and items) of `names` alone, in the order of `names` (all rows when none are given)."""
        if not names:
            return self
        index = {row[0]: position for position, row in enumerate(self.rows)}
        kept = [index[name] for name in dict.fromkeys(names) if name in index]
        return Table(self.headers, [self.rows[i] for i in kept], [self.items[i] for i in kept])


def used_total(name: str, total: float, available: float) -> str:
    """`2/4` (`512Mi/4Gi` for memory)."""
    return f"{format_amount(name, total - available)}/{format_amount(name, total)}"


def node_status(node: NodeInfo) -> str:
    """kubectl's node STATUS: `Ready`, `Ready,SchedulingDisabled` when cordoned, `...,Draining` when drained,
    `Unreachable` when it misses heartbeats, `Dead` once declared dead (while some work still tolerates that)."""
    condition = node_condition(node.taints)
    return {
        "cordoned": "Ready,SchedulingDisabled",
        "draining": "Ready,SchedulingDisabled,Draining",
        "unreachable": "Unreachable",
        "dead": "Dead",
    }.get(condition, "Ready")


def resource_cell(node: NodeInfo, name: str) -> str:
    """Used/total of one resource, `-` when the node has none."""
    return used_total(name, node.resources[name], node.available.get(name, 0.0)) if name in node.resources else "-"


def other_resources(node: NodeInfo) -> str:
    """`GPU 1/4`: used/total of every resource but CPU and memory."""
    names = [name for name in sorted(node.resources) if name not in ("CPU", "memory")]
    return ", ".join(f"{name} {resource_cell(node, name)}" for name in names) or NONE


def labels_text(labels: Mapping[str, str]) -> str:
    """`k=v,k2=v2` sorted, `<none>` when empty."""
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items())) or NONE


def taints_text(taints: list[Taint]) -> str:
    """`key=value:Effect,...`, `<none>` when empty."""
    return ",".join(format_taint(taint) for taint in taints) or NONE


def first_reason(item: Pending) -> str:
    """What blocks it first: the group's reason, else the reason most nodes give, else the message."""
    if item.group_reason:
        return item.group_reason
    if item.reasons:
        return min(item.reasons.items(), key=lambda pair: (-pair[1], pair[0]))[0]
    return item.message


def pending_messages(snapshot: Snapshot) -> dict[str, Pending]:
    """Actor id -> why it waits."""
    return {item.id: item for item in snapshot.pending if item.kind == "actor"}


def _nodes(snapshot: Snapshot, wide: bool, ages: Callable[[str], str]) -> Table:
    headers = ["NAME", "STATUS", "ZONE", "CPU", "MEMORY", "ACTORS", "AGE"]
    if wide:
        headers += ["ADDRESS", "RESOURCES", "LABELS", "TAINTS"]
    rows = []
    for node in snapshot.nodes:
        row = [
            node.node_id,
            node_status(node),
            node.labels.get(ZONE, "-"),
            resource_cell(node, "CPU"),
            resource_cell(node, "memory"),
            str(node.actors),
            ages(node.node_id),
        ]
        if wide:
            row += [node.address or "-", other_resources(node), labels_text(user_labels(node.labels))]
            row.append(taints_text(node.taints))
        rows.append(row)
    return Table(headers, rows, list(snapshot.nodes))


def _actors(snapshot: Snapshot, wide: bool, ages: Callable[[str], str]) -> Table:
    headers = ["NAME", "STATUS", "NODE", "RESTARTS", "AGE"]
    if wide:
        headers += ["NAMESPACE", "LABELS", "MESSAGE"]
    waiting = pending_messages(snapshot)
    rows = []
    for actor in snapshot.actors:
        row = [actor.actor_id, actor.status, actor.node_id or "-", str(actor.restarts), ages(actor.actor_id)]
        if wide:
            message = waiting[actor.actor_id].message if actor.actor_id in waiting else "-"
            row += [actor.namespace, labels_text(actor.labels), message]
        rows.append(row)
    return Table(headers, rows, list(snapshot.actors))


def _pgs(snapshot: Snapshot, wide: bool, ages: Callable[[str], str]) -> Table:
    headers = ["NAME", "STATUS", "BUNDLES", "NODES", "AGE"] + (["MESSAGE"] if wide else [])
    waiting = {item.id: item for item in snapshot.pending if item.kind == "placement_group"}
    items: list[dict[str, Any]] = [
        {"pg_id": pg_id, "status": "placed", "bundle_nodes": nodes, "message": ""}
        for pg_id, nodes in snapshot.placement_groups.items()
    ]
    items += [{"pg_id": i.id, "status": "pending", "bundle_nodes": [], "message": i.message} for i in waiting.values()]
    items.sort(key=lambda item: item["pg_id"])
    rows = []
    for item in items:
        nodes = item["bundle_nodes"]
        row = [item["pg_id"], item["status"], str(len(nodes)) if nodes else "-", ",".join(nodes) or "-"]
        rows.append([*row, ages(item["pg_id"]), *([item["message"] or "-"] if wide else [])])
    return Table(headers, rows, items)


def _vcs(snapshot: Snapshot, wide: bool, ages: Callable[[str], str]) -> Table:
    headers = ["NAME", "STATE", "PARENT", "PRIORITY", "USED/TOTAL", "VNODES", "AGE"]
    if wide:
        headers += ["MAX", "MESSAGE"]
    rows = []
    for info in snapshot.clusters:
        usage = ", ".join(
            f"{name} {used_total(name, total, info.available_resources.get(name, 0.0))}"
            for name, total in sorted(info.total_resources.items())
        )
        row = [info.cluster_id, info.state, info.parent or "-", str(info.priority), usage or NONE]
        row += [str(len(info.nodes)), ages(info.cluster_id)]
        if wide:
            bounds = [
                f"{name} {'unbounded' if bound is None else format_amount(name, bound)}"
                for name, bound in info.max_resources.items()
            ]
            row += [", ".join(bounds) or "unbounded", info.message or "-"]
        rows.append(row)
    return Table(headers, rows, list(snapshot.clusters))


def _pending(snapshot: Snapshot, wide: bool, ages: Callable[[str], str]) -> Table:
    headers = ["NAME", "KIND", "REASON", "AGE"] + (["MESSAGE"] if wide else [])
    rows = []
    for item in snapshot.pending:
        kind = "actor" if item.kind == "actor" else "pg"
        row = [item.id, kind, first_reason(item), ages(item.id)]
        rows.append(row + ([item.message] if wide else []))
    return Table(headers, rows, list(snapshot.pending))


TABLES: dict[str, Callable[[Snapshot, bool, Callable[[str], str]], Table]] = {
    "nodes": _nodes,
    "actors": _actors,
    "pgs": _pgs,
    "vcs": _vcs,
    "pending": _pending,
}


def select(snapshot: Snapshot, selector: LabelSelector, kind: str) -> Snapshot:
    """For `get nodes`, only the nodes whose labels match `selector`; for actors and pending work, only the actors
    (and the pending actors) whose labels match. The totals under the table follow what is kept."""
    if not selector:
        return snapshot
    if kind == "nodes":
        return replace(snapshot, nodes=[node for node in snapshot.nodes if selector.matches(node.labels)])
    actors = [actor for actor in snapshot.actors if selector.matches(actor.labels)]
    kept = {actor.actor_id for actor in actors}
    pending = [item for item in snapshot.pending if item.kind == "actor" and item.id in kept]
    return replace(snapshot, actors=actors, pending=pending)


def table_of(kind: str, snapshot: Snapshot, *, wide: bool, times: Mapping[str, datetime], now: datetime) -> Table:
    """The rows of `kind` (AGE from `times`, object id -> its first event's time)."""
    return TABLES[kind](snapshot, wide, lambda object_id: age(times.get(object_id), now))


def totals(snapshot: Snapshot) -> list[str]:
    """`ray status`-like lines: resources used/total per kind over the nodes, and pending work by first reason."""
    total: Counter[str] = Counter()
    free: Counter[str] = Counter()
    for node in snapshot.nodes:
        total.update(node.resources)
        free.update(node.available)
    names = sorted(total, key=lambda name: (name != "CPU", name))
    usage = ", ".join(f"{name} {used_total(name, total[name], free[name])}" for name in names)
    lines = [f"Resources (used/total): {usage or NONE}"]
    reasons = Counter(first_reason(item) for item in snapshot.pending)
    if reasons:
        by_reason = "; ".join(f"{count} {reason}" for reason, count in sorted(reasons.items(), key=lambda p: -p[1]))
        lines.append(f"Pending: {len(snapshot.pending)} ({by_reason})")
    else:
        lines.append("Pending: 0")
    return lines


def builtins(items: list[Any]) -> Any:
    """Items as plain JSON/YAML values."""
    return msgspec.to_builtins(items, order="sorted")
