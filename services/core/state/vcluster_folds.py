"""Folding the virtual-cluster events into a root view: the tree, and the virtual nodes carved for it (pure)."""

from __future__ import annotations

from schemas import (
    VirtualClusterDestroyed,
    VirtualClusterDestroyRequested,
    VirtualClusterQueued,
    VirtualClusterRequested,
    VirtualNodeGrant,
    VirtualNodeResized,
    VirtualNodeSize,
    VirtualNodesReserved,
)
from services.core.prng import stable_hash
from services.core.state.folds import fold_of
from services.core.state.launch_folds import note_work
from services.core.state.model import NodeState, difference, node_footprint
from services.core.state.tree import VNode, positive, vnode_labels
from services.core.state.view import ClusterView, VClusterState, parent_scope
from services.core.state.work_folds import bury


@fold_of(VirtualClusterRequested)
def on_requested(root: ClusterView, event: VirtualClusterRequested) -> None:
    """A new cluster joins its parent's admission queue, with an empty scope."""
    tree = root.tree
    if event.vc_id in tree.clusters:
        return
    tree.arrivals += 1
    scope = root.new_scope(event.vc_id)
    tree.clusters[event.vc_id] = VClusterState(
        event.vc_id, event.spec, event.parent, event.priority, tree.arrivals, scope
    )
    tree.note_admission(tree.clusters[event.vc_id])
    if event.parent in tree.clusters:
        tree.clusters[event.parent].children.append(event.vc_id)


@fold_of(VirtualClusterQueued)
def on_queued(root: ClusterView, event: VirtualClusterQueued) -> None:
    """Record why a cluster waits."""
    vc = root.tree.clusters.get(event.vc_id)
    if vc is not None:
        vc.reason = event.reason


@fold_of(VirtualNodesReserved)
def on_reserved(root: ClusterView, event: VirtualNodesReserved) -> None:
    """Carve the granted virtual nodes; the first grant admits a queued cluster."""
    vc = root.tree.clusters.get(event.vc_id)
    if vc is None:
        return
    for grant in event.vnodes:
        _carve(root, vc, grant)
    if vc.status == "queued":
        vc.status, vc.reason = "admitted", ""
        for waiting in root.tree.queue(vc.parent):
            if waiting.arrival < vc.arrival:
                waiting.overtaken += 1
    root.tree.note_admission(vc)
    root.tree.note_damage(vc)


def _carve(root: ClusterView, vc: VClusterState, grant: VirtualNodeGrant) -> None:
    parent_view = parent_scope(root, vc)
    host = parent_view.node(grant.parent_node)
    assert host is not None, f"virtual node {grant.vnode_id} carved from unknown node {grant.parent_node}"
    scope = vc.scope
    bury(scope, grant.vnode_id)
    base = dict(grant.resources) if grant.slot < 0 else {}
    vnode = VNode(grant.vnode_id, grant.parent_node, dict(grant.labels), grant.slot, base)
    vc.vnodes[grant.vnode_id] = vnode
    labels = vnode_labels(host.labels, vnode, vc.vc_id)
    node = NodeState(grant.vnode_id, stable_hash(scope.seed, grant.vnode_id), grant.resources, labels)
    scope.set_taints(node, list(host.taints))
    node.footprint = node_footprint(node)
    scope.add_live_node(node)
    host.take(node.total)
    parent_view.carved.setdefault(grant.parent_node, {})[grant.vnode_id] = vc.vc_id
    note_work(parent_view, grant.parent_node)


@fold_of(VirtualNodeResized)
def on_resized(root: ClusterView, event: VirtualNodeResized | VirtualNodeSize) -> None:
    """Grow or shrink a flexible node against its parent node; created on first growth, gone when emptied."""
    vc = root.tree.clusters.get(event.vc_id)
    if vc is None:
        return
    node = vc.scope.nodes.get(event.vnode_id)
    if node is None:
        grant = VirtualNodeGrant(event.vnode_id, event.parent_node, positive(event.resources))
        _carve(root, vc, grant)
        vc.vnodes[event.vnode_id].base = {}
        return
    new_total = positive(event.resources)
    if not new_total:
        release_vnode(root, vc, event.vnode_id)
        return
    host = parent_scope(root, vc).node(event.parent_node)
    delta = difference(new_total, node.total)
    if host is not None:
        host.take(delta)
    node.give(delta)
    node.set_total(new_total)


def release_vnode(root: ClusterView, vc: VClusterState, vnode_id: str) -> None:
    """Give a virtual node's resources back to its parent node and forget it."""
    vnode = vc.vnodes.pop(vnode_id, None)
    node = vc.scope.nodes.get(vnode_id) or vc.scope.dead.get(vnode_id)
    if vnode is None or node is None:
        return
    parent_view = parent_scope(root, vc)
    host = parent_view.node(vnode.parent_node)
    if host is not None and vnode_id in vc.scope.nodes:
        host.give(node.total)
    carved = parent_view.carved.get(vnode.parent_node)
    if carved is not None:
        carved.pop(vnode_id, None)
        if not carved:
            del parent_view.carved[vnode.parent_node]
        note_work(parent_view, vnode.parent_node)
    vc.scope.drop_node(vnode_id)


@fold_of(VirtualClusterDestroyRequested)
def on_destroy_requested(root: ClusterView, event: VirtualClusterDestroyRequested) -> None:
    """Mark the cluster and its children as going away (no new work is accepted into them)."""
    if event.vc_id in root.tree.clusters:
        for vc in root.tree.subtree(event.vc_id):
            vc.destroying = True


@fold_of(VirtualClusterDestroyed)
def on_destroyed(root: ClusterView, event: VirtualClusterDestroyed) -> None:
    """Return every virtual node to the parent and drop the cluster from the tree."""
    tree = root.tree
    vc = tree.clusters.get(event.vc_id)
    if vc is None:
        return
    for vnode_id in sorted(vc.vnodes):
        release_vnode(root, vc, vnode_id)
    for work_id in vc.live_work():
        tree.work_scope.pop(work_id, None)
    del tree.clusters[event.vc_id]
    tree.damaged.discard(event.vc_id)
    tree.queued.discard(event.vc_id)
    parent = tree.clusters.get(vc.parent)
    if parent is not None and event.vc_id in parent.children:
        parent.children.remove(event.vc_id)
