"""The taints view: nodes (by id and by address) and their taints, folded from node and taint events."""

from __future__ import annotations

from schemas import NodeDied, NodeLabelsChanged, NodeRegistered, TaintsChanged
from schemas import subjects as s
from schemas.queries import TaintsQuery, TaintsReply
from services.core.errors import NotFoundError, RejectedError
from services.runtime.views import FoldedView

NODE_EVENTS = (NodeRegistered, NodeDied, NodeLabelsChanged, TaintsChanged)
"""The events the taints view folds."""
SUBJECTS = s.aggregate_subjects(s.NODE, s.TAINT)
"""Where those events are appended: the only subjects the taints service reads (the server filters the rest)."""


class TaintsView(FoldedView):
    """Live nodes and their taints, folded from `NODE_EVENTS` (its follower reads only `SUBJECTS`)."""

    def resolve(self, node_id: str, node_address: str) -> str:
        """The node id a command means: given directly, or found by its address."""
        if bool(node_id) == bool(node_address):
            raise RejectedError(f"node_id {node_id!r} / node_address {node_address!r}: give exactly one of the two")
        if node_id:
            return node_id
        found = sorted(n.node_id for n in self.cluster.nodes.values() if n.address == node_address)
        if not found:
            raise NotFoundError(f"node_address {node_address!r}: no live node has this address")
        if len(found) > 1:
            raise RejectedError(f"node_address {node_address!r}: {len(found)} nodes share it ({', '.join(found)})")
        return found[0]

    def taints(self, query: TaintsQuery) -> TaintsReply:
        """Taints per node (one node, or all nodes that have any)."""
        nodes = self.cluster.nodes
        if query.node_id and query.node_id not in nodes:
            raise NotFoundError(f"node_id {query.node_id!r}: no such node")
        chosen = [query.node_id] if query.node_id else sorted(nodes)
        return TaintsReply({n: list(nodes[n].taints) for n in chosen if nodes[n].taints or query.node_id})
