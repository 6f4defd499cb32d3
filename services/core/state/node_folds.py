"""Folding node events (registered, died, relabelled, retainted) and the lease's election into a view (pure)."""

from __future__ import annotations

from schemas import (
    NodeDeclaredDead,
    NodeDied,
    NodeLabelsChanged,
    NodeReachable,
    NodeRegistered,
    NodeUnreachable,
    SchedulerElected,
    Taint,
    TaintEffect,
    TaintsChanged,
)
from services.core.labels import UNREACHABLE_TAINT, utc_text
from services.core.prng import stable_hash
from services.core.state.folds import fold_of
from services.core.state.launch_folds import note_died, note_registered
from services.core.state.layers import effective_labels, effective_taints, labels_implied, taints_implied
from services.core.state.model import Layers, NodeState, node_footprint
from services.core.state.tree import vnode_labels
from services.core.state.view import ClusterView
from services.core.state.work_folds import bury


@fold_of(NodeRegistered)
def on_node_registered(view: ClusterView, event: NodeRegistered) -> None:
    """A new node (or one back from the dead, its tombstone buried: its agent's declaration replaced, the operator's
    edits kept); a live node registering again resumes."""
    if event.node_id in view.nodes:
        return
    tombstone = view.dead.get(event.node_id)
    bury(view, event.node_id)
    layers = Layers(event.labels, event.taints)
    if tombstone is not None and tombstone.layers is not None:
        layers.operator_labels, layers.operator_taints = (
            tombstone.layers.operator_labels,
            tombstone.layers.operator_taints,
        )
    node = NodeState(event.node_id, stable_hash(view.seed, event.node_id), event.resources, effective_labels(layers))
    node.address, node.layers = event.address, layers
    show_taints(view, node)
    node.footprint = node_footprint(node)
    view.add_live_node(node)
    note_registered(view, event.node_id, node.labels)


@fold_of(NodeDied)
def on_node_died(view: ClusterView, event: NodeDied) -> None:
    """The node becomes a tombstone (its work stays attached until failed); its virtual nodes die too. A removed
    node's operator edits are forgotten."""
    node = view.remove_live_node(event.node_id)
    if node is None:
        return
    view.dead[node.node_id] = node
    if event.removed:
        node.removed_at = view.log_time
        if node.layers is not None:
            node.layers = Layers(node.layers.agent_labels, node.layers.agent_taints)
    note_died(view, node.node_id)
    carry_down(view, event)


@fold_of(NodeLabelsChanged)
def on_node_labels_changed(view: ClusterView, event: NodeLabelsChanged) -> None:
    """New operator edits (an old event's implied by its labels), re-indexed with the actors on the node; its
    virtual nodes inherit the labels."""
    node = view.nodes.get(event.node_id)
    if node is None:
        return
    if node.layers is None:
        relabel(view, node, event.labels)
    else:
        node.layers.operator_labels = event.operator or labels_implied(node.layers, event.labels)
        show_labels(view, node)
    carry_down(view, event)


@fold_of(TaintsChanged)
def on_taints_changed(view: ClusterView, event: TaintsChanged) -> None:
    """New operator edits (an old event's implied by its taints); its virtual nodes inherit the taints."""
    node = view.nodes.get(event.node_id)
    if node is None:
        return
    if node.layers is None:
        view.set_taints(node, event.taints)
    else:
        node.layers.operator_taints = event.operator or taints_implied(node.layers, event.taints)
        show_taints(view, node)
    carry_taints_down(view, event.node_id)


@fold_of(NodeUnreachable)
def on_node_unreachable(view: ClusterView, event: NodeUnreachable) -> None:
    """Missed heartbeats: the liveness taint, NoSchedule (its work stays)."""
    node = view.nodes.get(event.node_id)
    if node is not None:
        restore_liveness(view, node, event.last_heard, None)
        carry_taints_down(view, node.node_id)


@fold_of(NodeReachable)
def on_node_reachable(view: ClusterView, event: NodeReachable) -> None:
    """Heartbeats again: no liveness taint."""
    node = view.nodes.get(event.node_id)
    if node is not None:
        restore_liveness(view, node, None, None)
        carry_taints_down(view, node.node_id)


@fold_of(NodeDeclaredDead)
def on_node_declared_dead(view: ClusterView, event: NodeDeclaredDead) -> None:
    """Unreachable past the grace: the liveness taint turns NoExecute."""
    node = view.nodes.get(event.node_id)
    if node is not None:
        since = node.unreachable_since if node.unreachable_since is not None else 0.0
        restore_liveness(view, node, since, event.dead_for)
        carry_taints_down(view, node.node_id)


def restore_liveness(view: ClusterView, node: NodeState, since: float | None, dead_for: float | None) -> None:
    """Reachable (`since` None), unreachable since `since`, or declared dead `dead_for` seconds ago."""
    node.unreachable_since, node.dead_for = since, dead_for
    if since is None:
        view.set_unreachable(node, None)
    else:
        effect: TaintEffect = "NoSchedule" if dead_for is None else "NoExecute"
        view.set_unreachable(node, Taint(UNREACHABLE_TAINT, utc_text(since), effect))


def carry_taints_down(view: ClusterView, node_id: str) -> None:
    """A node's liveness changed: its virtual nodes take its taints in force (as when they were carved)."""
    node = view.nodes[node_id]
    if view.carved.get(node_id):
        carry_down(view, TaintsChanged(node_id=node_id, taints=list(node.taints)))


def show_labels(view: ClusterView, node: NodeState) -> None:
    """Give a registered node the labels its layers make (the one place that combines them)."""
    assert node.layers is not None, f"node {node.node_id} has no layers"
    relabel(view, node, effective_labels(node.layers))


def show_taints(view: ClusterView, node: NodeState) -> None:
    """Give a registered node the taints its layers make (the one place that combines them)."""
    assert node.layers is not None, f"node {node.node_id} has no layers"
    view.set_taints(node, effective_taints(node.layers))


def relabel(view: ClusterView, node: NodeState, labels: dict[str, str]) -> None:
    """Replace a live node's labels, re-indexing it and the actors on it."""
    placed = [view.actors[actor_id] for actor_id in sorted(node.actors)]
    for actor in placed:
        view.index_actor(actor.request, node, -1)
    view.labels.remove(node)
    node.labels = dict(labels)
    node.footprint = node_footprint(node)
    view.labels.add(node)
    for actor in placed:
        view.index_actor(actor.request, node, 1)


def carry_down(view: ClusterView, event: NodeDied | NodeLabelsChanged | TaintsChanged) -> None:
    """Apply a node's change to the virtual nodes carved from it (and theirs, recursively)."""
    carved = view.carved.get(event.node_id)
    if not carved:
        return
    host = view.node(event.node_id)
    for vnode_id, vc_id in sorted(carved.items()):
        vc = view.tree.clusters[vc_id]
        scope, vnode = vc.scope, vc.vnodes[vnode_id]
        if isinstance(event, NodeDied):
            del vc.vnodes[vnode_id]
            view.tree.note_damage(vc)
            on_node_died(scope, NodeDied(node_id=vnode_id))
        elif isinstance(event, NodeLabelsChanged):
            labels = host.labels if host is not None else {}
            on_node_labels_changed(
                scope, NodeLabelsChanged(node_id=vnode_id, labels=vnode_labels(labels, vnode, vc_id))
            )
        else:
            on_taints_changed(scope, TaintsChanged(node_id=vnode_id, taints=list(host.taints if host else ())))
            scope.nodes[vnode_id].dead_for = host.dead_for if host is not None else None
    if isinstance(event, NodeDied):
        del view.carved[event.node_id]


@fold_of(SchedulerElected)
def on_scheduler_elected(view: ClusterView, event: SchedulerElected) -> None:
    """A newer lease fences off the scheduler events of older ones."""
    view.epoch = max(view.epoch, event.epoch)
