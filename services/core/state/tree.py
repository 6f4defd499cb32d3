"""The virtual-cluster tree a view folds: clusters, their virtual nodes and scopes, and which work runs where (pure).

Every virtual cluster has its own scope: a `ClusterView` whose nodes are its virtual nodes, so every rule of
the core applies inside it unchanged. A virtual node is carved out of a node of the parent's scope (a physical
node under the root): it holds its resources there, and inherits that node's labels and taints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from schemas import VirtualCluster
from services.core.labels import NODE_ID, VCLUSTER_ID, VNODE_ID
from services.core.state.model import EPSILON, Resources

if TYPE_CHECKING:  # the scopes of the tree are views; the view module imports this one
    from services.core.state.view import ClusterView

ROOT = ""
"""The scope id of the root (physical) cluster."""
AdmissionStatus = Literal["queued", "admitted"]
"""Where a virtual cluster stands: waiting for its minimum, or holding it."""


class VNode:
    """What a virtual cluster knows of one of its virtual nodes beyond the node itself."""

    __slots__ = ("base", "own_labels", "parent_node", "slot", "vnode_id")

    def __init__(self, vnode_id: str, parent_node: str, own_labels: dict[str, str], slot: int, base: Resources):
        self.vnode_id = vnode_id
        self.parent_node = parent_node
        self.own_labels = own_labels
        self.slot = slot
        self.base = base
        """Flexible nodes: the share of the flexible minimum they hold (never lent back while the cluster lives)."""

    @property
    def flexible(self) -> bool:
        """Whether this is the cluster's flexible node on its parent node."""
        return self.slot < 0


class VClusterState:
    """One virtual cluster: spec, place in the tree, admission state, virtual nodes and its scope."""

    __slots__ = (
        "arrival",
        "children",
        "destroying",
        "overtaken",
        "parent",
        "priority",
        "reason",
        "scope",
        "spec",
        "status",
        "vc_id",
        "vnodes",
    )

    def __init__(self, vc_id: str, spec: VirtualCluster, parent: str, priority: int, arrival: int, scope: ClusterView):
        self.vc_id = vc_id
        self.spec = spec
        self.parent = parent
        self.priority = priority
        self.arrival = arrival
        self.status: AdmissionStatus = "queued"
        self.reason = ""
        self.overtaken = 0
        """Clusters that arrived later but were admitted first while this one waited (anti-starvation)."""
        self.destroying = False
        self.scope = scope
        self.vnodes: dict[str, VNode] = {}
        self.children: list[str] = []

    @property
    def flexible_total(self) -> Resources:
        """What the flexible nodes hold together."""
        total: Resources = {}
        for vnode in self.vnodes.values():
            if vnode.flexible:
                node = self.scope.nodes.get(vnode.vnode_id)
                for name, amount in (node.total if node is not None else {}).items():
                    total[name] = total.get(name, 0.0) + amount
        return total

    def live_work(self) -> list[str]:
        """The ids of the actors and placement groups living in this cluster (not its children)."""
        return sorted([*self.scope.actors, *self.scope.groups])


class VTree:
    """Every virtual cluster by id, and the scope each live actor or placement group belongs to."""

    __slots__ = ("arrivals", "clusters", "damaged", "work_scope")

    def __init__(self) -> None:
        self.clusters: dict[str, VClusterState] = {}
        self.work_scope: dict[str, str] = {}
        self.arrivals = 0
        self.damaged: set[str] = set()
        """Admitted clusters that lost part of their minimum with a dead node (to be reserved again)."""

    def note_damage(self, vc: VClusterState) -> None:
        """Track whether an admitted cluster still holds its whole minimum."""
        if vc.status == "admitted" and not whole(vc):
            self.damaged.add(vc.vc_id)
        else:
            self.damaged.discard(vc.vc_id)

    def children_of(self, parent: str) -> list[VClusterState]:
        """The clusters directly under `parent` (ROOT for top-level ones), in arrival order."""
        found = [vc for vc in self.clusters.values() if vc.parent == parent]
        return sorted(found, key=lambda vc: vc.arrival)

    def subtree(self, vc_id: str) -> list[VClusterState]:
        """`vc_id` and every cluster under it, children before their parents."""
        vc = self.clusters[vc_id]
        found: list[VClusterState] = []
        for child in vc.children:
            found += self.subtree(child)
        return [*found, vc]

    def queue(self, parent: str) -> list[VClusterState]:
        """The parent's admission queue: higher priority first, then arrival."""
        waiting = [vc for vc in self.clusters.values() if vc.parent == parent and vc.status == "queued"]
        return sorted(waiting, key=lambda vc: (-vc.priority, vc.arrival))


def parent_scope(root: ClusterView, vc: VClusterState) -> ClusterView:
    """The view virtual nodes of `vc` are carved from: the root's, or the parent cluster's scope."""
    return root if vc.parent == ROOT else root.tree.clusters[vc.parent].scope


def whole(vc: VClusterState) -> bool:
    """Whether the cluster holds every fixed-size node of its spec and its whole flexible minimum."""
    slots = sum(len(group.nodes) for group in vc.spec.fixed_size_nodes)
    if sum(1 for vnode in vc.vnodes.values() if not vnode.flexible) < slots:
        return False
    held: Resources = {}
    for vnode in vc.vnodes.values():
        for name, amount in vnode.base.items():
            held[name] = held.get(name, 0.0) + amount
    return all(held.get(name, 0.0) + EPSILON >= amount for name, amount in vc.spec.flexible_resource_min.items())


def fixed_id(vc_id: str, slot: int) -> str:
    """The id of a cluster's fixed-size virtual node `slot`."""
    return f"{vc_id}-{slot}"


def flexible_id(vc_id: str, parent_node: str) -> str:
    """The id of a cluster's flexible virtual node on `parent_node` (there is at most one)."""
    return f"{vc_id}-flex-{parent_node}"


def vnode_labels(parent_labels: dict[str, str], vnode: VNode, vc_id: str) -> dict[str, str]:
    """A virtual node's labels: the parent node's, its own, and its system labels."""
    return {**parent_labels, **vnode.own_labels, NODE_ID: vnode.vnode_id, VNODE_ID: vnode.vnode_id, VCLUSTER_ID: vc_id}


def positive(amount: Resources) -> Resources:
    """The entries of `amount` above zero."""
    return {name: quantity for name, quantity in amount.items() if quantity > EPSILON}
