"""A node's plain fields (CPU and memory, read by the decision's walk over candidates) stay what its `free` and
`total` dicts say through every kind of change: placements and removals at the root and inside virtual clusters,
flexible nodes growing and shrinking, placement groups, failures, node deaths, snapshots; and the decisions are
those the dicts alone would give (the cross-build digest, `cross_build.py`, did not move)."""

from __future__ import annotations

from services.core import Cluster
from services.core.state import ClusterView, NodeState
from services.core.state.snapshot import decode, dump, encode, restore
from tests.core.cross_build import SEED, workload


def plain_fields(node: NodeState) -> tuple[bool, float, float, float, float]:
    return node.plain, node.total_cpu, node.total_memory, node.free_cpu, node.free_memory


def from_the_dicts(node: NodeState) -> tuple[bool, float, float, float, float]:
    total, free = node.total, node.free
    plain = set(total) <= {"CPU", "memory"}
    return plain, total.get("CPU", 0.0), total.get("memory", 0.0), free.get("CPU", 0.0), free.get("memory", 0.0)


def stale(view: ClusterView) -> list[str]:
    """Every node (live or dead, at the root or in a virtual cluster) whose plain fields differ from its dicts."""
    scopes = [view, *(vc.scope for vc in view.tree.clusters.values())]
    nodes = [node for scope in scopes for node in [*scope.nodes.values(), *scope.dead.values()]]
    return [
        f"{node.node_id}: {plain_fields(node)} != {from_the_dicts(node)}"
        for node in nodes
        if plain_fields(node) != from_the_dicts(node)
    ]


def test_every_node_keeps_its_plain_fields_true_through_a_mixed_workload() -> None:
    cluster = Cluster(seed=SEED)
    checked: list[int] = []

    def check() -> None:
        assert stale(cluster.view) == [], f"after step {len(checked)}"
        checked.append(1)

    workload(cluster, 1_500, check)
    assert len(checked) == 1_500
    flexible = [vc for vc in cluster.view.tree.clusters.values() if any(v.flexible for v in vc.vnodes.values())]
    assert flexible, "the workload grew no flexible node: it no longer covers resizes"


def test_a_view_loaded_from_its_snapshot_has_the_same_plain_fields() -> None:
    cluster = Cluster(seed=SEED)
    workload(cluster, 600)
    loaded = Cluster.from_view(restore(decode(encode(dump(cluster.view)))))
    assert stale(loaded.view) == []
    before = {node.node_id: plain_fields(node) for node in cluster.view.nodes.values()}
    assert {node.node_id: plain_fields(node) for node in loaded.view.nodes.values()} == before
