"""The vclusters view: the whole log folded into a core `Cluster` that never decides, and the scoped answers."""

from __future__ import annotations

from schemas.queries import (
    NodesReply,
    ScopedNodesQuery,
    ScopedWorkQuery,
    ScopedWorkReply,
    VirtualClusterQuery,
    VirtualClusterReply,
    VirtualClustersQuery,
    VirtualClustersReply,
)
from services.core import LabelSelector
from services.core.errors import NotFoundError
from services.core.state.view import VClusterState
from services.runtime.views import FoldedCluster, actor_info, node_info


class VClustersView(FoldedCluster):
    """Every virtual cluster with its tree, admission queue and scope (nodes, work), as the log says.

    The scheduler decides admissions and reservations; this view only folds its facts, so the vclusters service
    can validate requests and answer scoped questions without asking the scheduler.
    """

    def known(self, vc_id: str) -> VClusterState:
        """A live virtual cluster, or an `NotFoundError` naming the id."""
        vc = self.cluster.view.tree.clusters.get(vc_id)
        if vc is None:
            raise NotFoundError(f"vc_id {vc_id!r}: no such virtual cluster")
        return vc

    def queued(self) -> list[tuple[float, dict[str, str]]]:
        """How many virtual clusters wait for admission, by the cluster whose queue they wait in."""
        counts: dict[str, int] = {}
        for vc in self.cluster.view.tree.clusters.values():
            if vc.status == "queued":
                counts[vc.parent or "root"] = counts.get(vc.parent or "root", 0) + 1
        return [(count, {"parent": parent}) for parent, count in counts.items()] or [(0, {"parent": "root"})]

    def subtree(self, vc_id: str) -> list[str]:
        """The cluster and every cluster under it, children before their parents."""
        self.known(vc_id)
        return [vc.vc_id for vc in self.cluster.view.tree.subtree(vc_id)]

    def info(self, query: VirtualClusterQuery) -> VirtualClusterReply:
        """One cluster: info, admission, whether the scheduler decided it yet, and its subtree."""
        vc = self.known(query.vc_id)
        return VirtualClusterReply(
            info=self.cluster.virtual_cluster(query.vc_id),
            admission=self.cluster.admission(query.vc_id),
            decided=vc.status != "queued" or bool(vc.reason),
            subtree=self.subtree(query.vc_id),
            sequence=self.sequence,
        )

    def clusters(self, _query: VirtualClustersQuery) -> VirtualClustersReply:
        """Every cluster, parents before children."""
        return VirtualClustersReply(self.cluster.virtual_clusters(), self.sequence)

    def work(self, query: ScopedWorkQuery) -> ScopedWorkReply:
        """The actors, placements, placement groups and pending work of one cluster."""
        scope = self.known(query.vc_id).scope
        return ScopedWorkReply(
            vc_id=query.vc_id,
            actors=[actor_info(scope.actors[a]) for a in sorted(scope.actors)],
            placements=self.cluster.placements(query.vc_id),
            placement_groups=self.cluster.placement_groups(query.vc_id),
            pending=self.cluster.pending(query.vc_id),
            sequence=self.sequence,
        )

    def nodes(self, query: ScopedNodesQuery) -> NodesReply:
        """The cluster's live virtual nodes whose labels match the selector, by id."""
        vc = self.known(query.vc_id)
        selector = LabelSelector.parse(query.selector) if query.selector else None
        return NodesReply(
            [
                node_info(node, vc.vnodes[node_id].parent_node if node_id in vc.vnodes else "")
                for node_id, node in sorted(vc.scope.nodes.items())
                if selector is None or selector.matches(node.labels)
            ]
        )
