"""Folding actor and placement-group events into the view of the scope the work runs in (pure).

Each fold takes the root view and finds the scope itself: the root's, or the virtual cluster's the work joined.
"""

from __future__ import annotations

from typing import Final

from schemas import (
    ActorFailed,
    ActorPending,
    ActorPlaced,
    ActorRemoved,
    ActorSubmitted,
    NodeLabelSchedulingStrategy,
    PlacementGroupBundlesLost,
    PlacementGroupPending,
    PlacementGroupPlaced,
    PlacementGroupRemoved,
    PlacementGroupSubmitted,
    ScheduleRequest,
    VirtualNodeResized,
)
from services.core.state.folds import FOLDS, fold_of
from services.core.state.launch_folds import note_work
from services.core.state.model import ActorState, GroupState, NodeState, give, take
from services.core.state.nominations import end_if_placed_or_gone
from services.core.state.view import ClusterView
from services.core.type_tests import TypeTest


def _scope(view: ClusterView, work_id: str) -> ClusterView:
    """The scope live work runs in: the root's, unless it joined a virtual cluster."""
    tree = view.tree
    vc_id = tree.work_scope.get(work_id) if tree.clusters else None
    return tree.clusters[vc_id].scope if vc_id else view


def _forget_if_gone(view: ClusterView, scope: ClusterView, work_id: str) -> None:
    """Drop the scope of work that left it."""
    if scope is not view and work_id not in scope.actors and work_id not in scope.groups:
        view.tree.work_scope.pop(work_id, None)


@fold_of(ActorSubmitted)
def on_actor_submitted(view: ClusterView, event: ActorSubmitted) -> None:
    """New work joins its scope's queue."""
    _submitted(view, event.request)


def _submitted(view: ClusterView, request: ScheduleRequest) -> None:
    """An actor joins the queue of the scope it names (the root's when it names none)."""
    scope = _enter(view, request.actor_id, request.vcluster_id)
    scope.arrivals += 1
    scope.actors[request.actor_id] = ActorState(request, scope.arrivals)
    scope.pending[request.actor_id] = None


def _enter(view: ClusterView, work_id: str, vc_id: str | None) -> ClusterView:
    """The scope new work joins (recorded so later events about it find it)."""
    if vc_id and vc_id in view.tree.clusters:
        view.tree.work_scope[work_id] = vc_id
        return view.tree.clusters[vc_id].scope
    return view


@fold_of(ActorPlaced)
def on_actor_placed(root: ClusterView, event: ActorPlaced) -> None:
    """The growth that made room first, then the submission it carries, then the placement."""
    if event.resized:
        resize = FOLDS[VirtualNodeResized]
        for size in event.resized:
            resize(root, size)
    if event.request is not None:
        _submitted(root, event.request)
    actor_id, group_id = event.actor_id, event.placement_group_id  # each read once: a compiled read is a lookup
    view = _scope(root, actor_id)
    actor = view.actors[actor_id]
    request = actor.request
    node = view.node(event.node_id)
    assert node is not None, f"actor {actor_id} placed on never-registered node {event.node_id}"
    actor.status, actor.node_id, actor.explanation = "placed", node.node_id, None
    if group_id:
        group = view.groups[group_id]
        take(group.bundle_free[event.bundle_index], request.resources)
        group.actors.add(actor_id)
        actor.bundle = (group_id, event.bundle_index)
    else:
        node.take(request.resources)
    node.actors.add(actor_id)
    note_work(view, node.node_id)
    view.index_actor(request, node, 1)
    view.footprints[actor_id] = footprint_of(request, node)
    view.ended.pop(actor_id, None)
    view.pending.pop(actor_id, None)
    end_if_placed_or_gone(root, actor_id)


@fold_of(ActorPending)
def on_actor_pending(root: ClusterView, event: ActorPending) -> None:
    """The actor waits, with why."""
    view = _scope(root, event.actor_id)
    actor = view.actors[event.actor_id]
    actor.explanation = event.explanation
    view.pending[event.actor_id] = None


@fold_of(ActorFailed)
def on_actor_failed(root: ClusterView, event: ActorFailed) -> None:
    """The actor leaves its node: it waits to restart, or ends."""
    view = _scope(root, event.actor_id)
    actor = release_actor(view, event.actor_id)
    if event.will_restart:
        actor.restarts += 1
        actor.status = "pending"
        view.pending[event.actor_id] = None
    else:
        del view.actors[event.actor_id]
        _ended(view, event.actor_id)
    _forget_if_gone(root, view, event.actor_id)
    end_if_placed_or_gone(root, event.actor_id)


@fold_of(ActorRemoved)
def on_actor_removed(root: ClusterView, event: ActorRemoved) -> None:
    """The actor ends; then the shrink its leaving allowed."""
    actor_id = event.actor_id
    view = _scope(root, actor_id)
    release_actor(view, actor_id)
    del view.actors[actor_id]
    view.pending.pop(actor_id, None)
    end_if_placed_or_gone(root, actor_id)
    _ended(view, actor_id)
    _forget_if_gone(root, view, actor_id)
    if event.resized:
        resize = FOLDS[VirtualNodeResized]
        for size in event.resized:
            resize(root, size)


def _ended(view: ClusterView, actor_id: str) -> None:
    """Keep an ended actor's footprint for later DataFlow operations, dropping the oldest beyond `footprints_kept`."""
    if actor_id not in view.footprints:
        return
    view.ended[actor_id] = None
    view.ended.move_to_end(actor_id)
    while len(view.ended) > view.footprints_kept:
        oldest, _ = view.ended.popitem(last=False)
        del view.footprints[oldest]


def release_actor(view: ClusterView, actor_id: str) -> ActorState:
    """Detach an actor from its node (and bundle), giving its resources back."""
    actor = view.actors[actor_id]
    node = view.node(actor.node_id) if actor.node_id is not None else None
    if node is None:
        actor.node_id, actor.bundle = None, None
        return actor
    if actor.bundle is not None:
        group = view.groups.get(actor.bundle[0])
        if group is not None:
            give(group.bundle_free[actor.bundle[1]], actor.request.resources)
            group.actors.discard(actor_id)
    else:
        node.give(actor.request.resources)
    node.actors.discard(actor_id)
    note_work(view, node.node_id)
    view.index_actor(actor.request, node, -1)
    actor.node_id, actor.bundle = None, None
    return actor


_NODE_LABELS: Final[TypeTest[NodeLabelSchedulingStrategy]] = TypeTest(NodeLabelSchedulingStrategy)
"""Asked of every placed actor's strategy (see `type_tests`)."""


def footprint_of(request: ScheduleRequest, node: NodeState) -> dict[str, str]:
    """Where an actor ran, as a later DataFlow operation inherits it: the node's footprint, plus the keys the
    request selected on."""
    keys = list(request.label_selector)
    strategy = request.scheduling_strategy
    if _NODE_LABELS.holds(strategy):
        keys += [*strategy.hard, *strategy.soft]
    extra = {key: node.labels[key] for key in keys if key in node.labels and key not in node.footprint}
    return {**node.footprint, **extra} if extra else node.footprint


@fold_of(PlacementGroupSubmitted)
def on_group_submitted(view: ClusterView, event: PlacementGroupSubmitted) -> None:
    """A new placement group joins its scope's queue."""
    scope = _enter(view, event.request.pg_id, event.request.vcluster_id)
    scope.arrivals += 1
    scope.groups[event.request.pg_id] = GroupState(event.request, scope.arrivals)
    scope.pending[event.request.pg_id] = None


@fold_of(PlacementGroupPlaced)
def on_group_placed(root: ClusterView, event: PlacementGroupPlaced) -> None:
    """The group's bundles are reserved (under the option chosen)."""
    view = _scope(root, event.pg_id)
    group = view.groups[event.pg_id]
    if group.option != event.option or len(group.bundles) != len(event.bundle_nodes):
        group.option = event.option
        group.bundles = group.option_bundles(event.option)
        group.bundle_nodes = [None] * len(group.bundles)
        group.bundle_free = [dict(b) for b in group.bundles]
    for index, node_id in enumerate(event.bundle_nodes):
        if group.bundle_nodes[index] is None:
            node = view.node(node_id)
            assert node is not None, f"bundle placed on never-registered node {node_id}"
            node.take(group.bundles[index])
            node.bundles.add((event.pg_id, index))
            note_work(view, node.node_id)
            group.bundle_nodes[index] = node_id
    group.status, group.explanation = "placed", None
    view.pending.pop(event.pg_id, None)
    end_if_placed_or_gone(root, event.pg_id)


@fold_of(PlacementGroupPending)
def on_group_pending(root: ClusterView, event: PlacementGroupPending) -> None:
    """The group waits, with why."""
    view = _scope(root, event.pg_id)
    group = view.groups[event.pg_id]
    group.explanation = event.explanation
    view.pending[event.pg_id] = None


@fold_of(PlacementGroupBundlesLost)
def on_bundles_lost(root: ClusterView, event: PlacementGroupBundlesLost) -> None:
    """Bundles lost their reservation: the group waits to reserve them again."""
    view = _scope(root, event.pg_id)
    group = view.groups[event.pg_id]
    for index in event.bundle_indices:
        release_bundle(view, group, index)
    group.status = "pending"
    view.pending[event.pg_id] = None


@fold_of(PlacementGroupRemoved)
def on_group_removed(root: ClusterView, event: PlacementGroupRemoved) -> None:
    """The group ends: every reservation is given back."""
    view = _scope(root, event.pg_id)
    group = view.groups.pop(event.pg_id)
    for index in range(len(group.bundles)):
        release_bundle(view, group, index)
    view.pending.pop(event.pg_id, None)
    end_if_placed_or_gone(root, event.pg_id)
    _forget_if_gone(root, view, event.pg_id)


def release_bundle(view: ClusterView, group: GroupState, index: int) -> None:
    """Give a bundle's reservation back to its node."""
    node_id = group.bundle_nodes[index]
    if node_id is None:
        return
    node = view.node(node_id)
    if node is not None:
        node.give(group.bundles[index])
        node.bundles.discard((group.request.pg_id, index))
        note_work(view, node.node_id)
    group.bundle_nodes[index] = None
    group.bundle_free[index] = dict(group.bundles[index])


def bury(view: ClusterView, node_id: str) -> None:
    """Forget a dead node for good, detaching whatever the scheduler has not failed yet."""
    node = view.dead.pop(node_id, None)
    if node is None:
        return
    for actor_id in sorted(node.actors):
        release_actor(view, actor_id)
    for pg_id, index in sorted(node.bundles):
        release_bundle(view, view.groups[pg_id], index)
