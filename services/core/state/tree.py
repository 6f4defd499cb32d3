"""The plain data of the virtual-cluster tree: scope ids, admission states, virtual nodes, their ids and labels.

A virtual node is carved out of a node of the parent's scope (a physical node under the root): it holds its
resources there, and inherits that node's labels and taints. The clusters themselves, each with its scope (a
`ClusterView`), are in `view`.
"""

from __future__ import annotations

from typing import Final, Literal

from services.core.labels import NODE_ID, VCLUSTER_ID, VNODE_ID
from services.core.state.model import EPSILON, Resources

ROOT: Final = ""
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
