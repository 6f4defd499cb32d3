"""Builders for the virtual-cluster tests: specs, and reading where work landed."""

from __future__ import annotations

from typing import Literal

from schemas import Admitted, FixedSizeNode, FixedSizeNodes, Queued, SelectorSpec, VirtualCluster
from services.core import Cluster, Placed

Policy = Literal["PACK", "SPREAD", "STRICT_SPREAD"]


def fixed(*cpus: float, policy: Policy = "PACK", labels: list[dict[str, str]] | None = None) -> FixedSizeNodes:
    """A group of fixed-size nodes with these CPU counts (and labels per node)."""
    labels = labels or [{} for _ in cpus]
    return FixedSizeNodes([FixedSizeNode({"CPU": cpu}, label) for cpu, label in zip(cpus, labels, strict=True)], policy)


def spec(
    *groups: FixedSizeNodes,
    min_cpu: float | None = None,
    max_cpu: float | None = None,
    tolerations: SelectorSpec | None = None,
) -> VirtualCluster:
    """A spec with these fixed-size groups and a flexible CPU range."""
    return VirtualCluster(
        flexible_resource_min={} if min_cpu is None else {"CPU": min_cpu},
        flexible_resource_max={} if max_cpu is None else {"CPU": max_cpu},
        fixed_size_nodes=list(groups),
        tolerations=tolerations or {},
    )


def admitted(outcome: Admitted | Queued) -> list[str]:
    """The virtual node ids of an admitted cluster (fails when it was queued)."""
    assert isinstance(outcome, Admitted), f"expected admission, got {outcome}"
    return outcome.vnode_ids


def parent_of(cluster: Cluster, vc_id: str, vnode_id: str) -> str:
    """The node a virtual node was carved from."""
    return next(node.parent_node for node in cluster.virtual_cluster(vc_id).nodes if node.node_id == vnode_id)


def host_of(cluster: Cluster, vc_id: str, decision: object) -> str:
    """The parent node under the virtual node an actor was placed on."""
    assert isinstance(decision, Placed) and decision.node_id is not None, f"expected a placement, got {decision}"
    return parent_of(cluster, vc_id, decision.node_id)


def free_cpu(cluster: Cluster, node_id: str) -> float:
    """Free CPUs on a physical node."""
    return cluster.view.nodes[node_id].free.get("CPU", 0.0)
