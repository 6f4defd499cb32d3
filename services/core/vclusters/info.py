"""Scoped introspection: what a virtual cluster holds and uses, and why work inside it cannot grow (pure)."""

from __future__ import annotations

from schemas import VirtualClusterInfo, VirtualNodeInfo
from services.core.amounts import format_amount
from services.core.state import ClusterView, Resources
from services.core.state.tree import positive
from services.core.state.view import VClusterState
from services.core.vclusters.admission import degraded_message, queued_message
from services.core.vclusters.borrowing import Lender
from services.core.vclusters.spec import CompiledSpec


def _summed(amounts: list[Resources]) -> Resources:
    total: Resources = {}
    for amount in amounts:
        for name, quantity in amount.items():
            total[name] = total.get(name, 0.0) + quantity
    return total


def node_infos(view: ClusterView, vc: VClusterState | None) -> list[VirtualNodeInfo]:
    """The live nodes of a scope (the root's physical nodes when `vc` is None), by id."""
    infos = []
    for node_id in sorted(view.nodes):
        node = view.nodes[node_id]
        vnode = vc.vnodes.get(node_id) if vc is not None else None
        used = positive({name: total - node.free.get(name, 0.0) for name, total in node.total.items()})
        infos.append(
            VirtualNodeInfo(
                node_id=node_id,
                node_labels=dict(node.labels),
                total_resources=dict(node.total),
                used_resources=used,
                available_resources={name: node.free.get(name, 0.0) for name in node.total},
                parent_node=vnode.parent_node if vnode is not None else "",
                flexible=vnode.flexible if vnode is not None else False,
            )
        )
    return infos


def cluster_info(root: ClusterView, vc: VClusterState, spec: CompiledSpec, reason: str = "") -> VirtualClusterInfo:
    """Everything `corral vc show` prints about one cluster (`reason`: why it waits now, when queued)."""
    nodes = node_infos(vc.scope, vc)
    maximum: dict[str, float | None] = {}
    fixed = _summed([node.resources for node in spec.fixed])
    for name in {*fixed, *spec.maximum}:
        bound = spec.maximum.get(name, 0.0)
        maximum[name] = None if bound is None else fixed.get(name, 0.0) + bound
    if vc.status == "queued":
        state, message = "queued", queued_message(root, vc, reason)
    else:
        message = degraded_message(vc, spec)
        state = "degraded" if message else "admitted"
    return VirtualClusterInfo(
        spec=vc.spec,
        cluster_id=vc.vc_id,
        state=state,  # type: ignore[arg-type]
        total_resources=_summed([node.total_resources for node in nodes]),
        max_resources=dict(sorted(maximum.items())),
        available_resources=_summed([node.available_resources for node in nodes]),
        nodes=nodes,
        children=list(vc.children),
        parent=vc.parent or None,
        priority=vc.priority,
        message=message,
    )


def quota_reason(root: ClusterView, vc: VClusterState, spec: CompiledSpec, lender: Lender, need: Resources) -> str:
    """Why `vc` cannot grow to hold `need` more: not admitted, at its maximum, or nothing to borrow from."""
    if vc.status == "queued":
        return f"virtual cluster {vc.vc_id} is not admitted yet: {queued_message(root, vc, vc.reason)}"
    if not need:
        return ""
    if not spec.grows:
        return f"virtual cluster {vc.vc_id} has only its fixed-size nodes and flexible minimum (it does not grow)"
    headroom = lender.headroom(vc, need)
    held, taken = vc.flexible_total, lender.taken(vc)
    for name, amount in sorted(need.items()):
        if headroom[name] + 1e-9 < amount:
            holds, kept = held.get(name, 0.0), taken.get(name, 0.0) - held.get(name, 0.0)
            nominated = f", {format_amount(name, kept)} more kept for work a launch was for" if kept > 1e-9 else ""
            return (
                f"virtual cluster {vc.vc_id} is at its flexible maximum of {name}"
                f" ({format_amount(name, holds)} of {format_amount(name, holds + kept + headroom[name])} held"
                f"{nominated})"
            )
    if vc.parent:
        parent = root.tree.clusters[vc.parent]
        above = quota_reason(root, parent, lender.specs(parent.vc_id), lender, need)
        if parent.vc_id in above and "may grow" not in above:
            return f"virtual cluster {vc.vc_id} may grow, but {above}"
    where = f"virtual cluster {vc.parent}" if vc.parent else "the cluster"
    return f"virtual cluster {vc.vc_id} may grow, but {where} has no node it may use with that much free"
