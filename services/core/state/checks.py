"""Whether an event can be folded into a view, decided before the fold changes anything (pure, reads only).

A fold is all or nothing: the checks (in `folds.CHECKS`, run by `ClusterView.fold`) raise `UnfoldableEventError`
for an event whose fold would fail half-way or corrupt the view (it names a node, actor, placement group, bundle
or virtual cluster the view does not hold in the scope the event needs, an amount that does not fit, or a
transition the work's state does not allow), and the view stays exactly as it was. Every reader skips the same
events, since the check depends on the view alone. Events about things a reader may legitimately not know (a
dead node dying again, labels or taints of a node already gone, a virtual cluster already destroyed) stay
defined no-ops of the fold, as before.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from schemas import (
    ActorFailed,
    ActorPending,
    ActorPlaced,
    ActorRemoved,
    ActorSubmitted,
    AnyEvent,
    LaunchesNominated,
    NodeDeclaredDead,
    NodeReachable,
    NodeUnreachable,
    PlacementGroupBundlesLost,
    PlacementGroupPending,
    PlacementGroupPlaced,
    PlacementGroupRemoved,
    PlacementGroupSubmitted,
    VirtualClusterDestroyed,
    VirtualClusterRequested,
    VirtualNodeResized,
    VirtualNodeSize,
    VirtualNodesReserved,
)
from services.core.errors import UnfoldableEventError
from services.core.state.folds import CHECKS
from services.core.state.model import ActorState, GroupState, NodeState, Resources, difference, fits, give, take
from services.core.state.tree import ROOT, positive
from services.core.state.view import ClusterView

Sizes = dict[tuple[str, str], Resources | None]
"""(cluster id, virtual node id) -> the node's total after an event's resizes (None: released)."""
NO_SIZES: Final[Sizes] = {}
"""What an event without resizes does to virtual nodes (read only)."""


def _scope_name(scope: ClusterView) -> str:
    return f"virtual cluster {scope.scope_id!r}" if scope.scope_id else "the root cluster"


def _scope_of(view: ClusterView, work_id: str) -> ClusterView:
    """`view.scope_of(work_id)`, in one call (checks run on every event)."""
    vc_id = view.tree.work_scope.get(work_id)
    return view.tree.clusters[vc_id].scope if vc_id else view


def _new_actor(view: ClusterView, event: AnyEvent, actor_id: str) -> None:
    if actor_id in _scope_of(view, actor_id).actors:
        raise UnfoldableEventError(event, f"actor_id {actor_id!r}: a live actor has this id")


def _new_group(view: ClusterView, event: AnyEvent, pg_id: str) -> None:
    if pg_id in _scope_of(view, pg_id).groups:
        raise UnfoldableEventError(event, f"pg_id {pg_id!r}: a live placement group has this id")


def _actor(view: ClusterView, event: AnyEvent, actor_id: str) -> tuple[ClusterView, ActorState]:
    scope = _scope_of(view, actor_id)
    actor = scope.actors.get(actor_id)
    if actor is None:
        raise UnfoldableEventError(event, f"actor_id {actor_id!r}: no such live actor")
    return scope, actor


def _group(view: ClusterView, event: AnyEvent, pg_id: str) -> GroupState:
    group = _scope_of(view, pg_id).groups.get(pg_id)
    if group is None:
        raise UnfoldableEventError(event, f"pg_id {pg_id!r}: no such live placement group")
    return group


def _node(scope: ClusterView, event: AnyEvent, field: str, node_id: str) -> NodeState:
    node = scope.nodes.get(node_id) or scope.dead.get(node_id)  # `scope.node(node_id)`, in one call
    if node is None:
        raise UnfoldableEventError(event, f"{field} {node_id!r}: not a node of {_scope_name(scope)}")
    return node


def _unplaced(event: AnyEvent, actor: ActorState) -> None:
    if actor.node_id is not None:
        raise UnfoldableEventError(
            event, f"actor_id {actor.request.actor_id!r}: is placed on node {actor.node_id!r} already"
        )


def _misfit(amount: Resources, free: Resources) -> str:
    return f"{amount} does not fit in what is free ({free})"


def _resizes(view: ClusterView, event: AnyEvent, sizes: Iterable[VirtualNodeResized | VirtualNodeSize]) -> Sizes:
    """What `sizes` do to virtual nodes, in order; raises where one would carve from a node that does not exist."""
    after: Sizes = {}
    clusters = view.tree.clusters
    for size in sizes:
        vc = clusters.get(size.vc_id)
        if vc is None:
            continue  # a cluster already destroyed: the fold ignores it
        if vc.parent != ROOT and vc.parent not in clusters:
            raise UnfoldableEventError(event, f"vc_id {size.vc_id!r}: its parent {vc.parent!r} is gone")
        key = (size.vc_id, size.vnode_id)
        exists = after[key] is not None if key in after else size.vnode_id in vc.scope.nodes
        if exists:
            after[key] = positive(size.resources) or None
            continue
        parent = view if vc.parent == ROOT else clusters[vc.parent].scope
        host = (vc.parent, size.parent_node)
        if (after.get(host) is None) if host in after else parent.node(size.parent_node) is None:
            raise UnfoldableEventError(
                event, f"parent_node {size.parent_node!r}: not a node of {_scope_name(parent)} to carve from"
            )
        after[key] = positive(size.resources)
    return after


def _check_placed(view: ClusterView, event: ActorPlaced) -> None:
    sizes = _resizes(view, event, event.resized) if event.resized else NO_SIZES
    request = event.request
    if request is not None:
        _new_actor(view, event, event.actor_id)
        if request.actor_id != event.actor_id:
            raise UnfoldableEventError(event, f"request.actor_id {request.actor_id!r}: differs from the actor_id")
        vc_id = request.vcluster_id
        scope = view.tree.clusters[vc_id].scope if vc_id and vc_id in view.tree.clusters else view
    else:
        scope, actor = _actor(view, event, event.actor_id)
        _unplaced(event, actor)
        request = actor.request
    key = (scope.scope_id, event.node_id)
    if key in sizes:  # the resizes of this event come first
        free = _free_after(event, scope.nodes.get(event.node_id), sizes[key])
    else:
        free = _node(scope, event, "node_id", event.node_id).free
    if sizes:
        free = _give_back(view, event, key, sizes, free)
    if event.placement_group_id:
        _check_bundle(scope, event, request.resources)
    elif not fits(free, request.resources):
        raise UnfoldableEventError(event, f"node_id {event.node_id!r}: {_misfit(request.resources, free)}")


def _give_back(
    view: ClusterView,
    event: ActorPlaced,
    host: tuple[str, str],
    sizes: dict[tuple[str, str], Resources | None],
    free: Resources,
) -> Resources:
    """What is free on `host` (scope id, node id) once the event's resizes grew or shrank the virtual nodes carved
    from it (a shrink applied before the placement gives resources back to the node it is placed on)."""
    free = dict(free)
    for (vc_id, vnode_id), total in sizes.items():
        vc = view.tree.clusters.get(vc_id)
        if vc is None or (vc.parent, event_parent(event, vc_id, vnode_id)) != host:
            continue
        before = vc.scope.nodes.get(vnode_id)
        old = before.total if before is not None else {}
        new = total or {}
        take(free, difference(new, old))
    return free


def event_parent(event: ActorPlaced, vc_id: str, vnode_id: str) -> str:
    """The parent node the event names for a resized virtual node."""
    for size in event.resized:  # a loop, not next() over a generator: no object per call
        if size.vc_id == vc_id and size.vnode_id == vnode_id:
            return size.parent_node
    raise LookupError(f"virtual node {vnode_id!r} of {vc_id!r}: not resized by the event")


def _free_after(event: ActorPlaced, node: NodeState | None, total: Resources | None) -> Resources:
    """What is free on a virtual node once the event's resizes made it `total` (None: released)."""
    if total is None:
        raise UnfoldableEventError(event, f"node_id {event.node_id!r}: its virtual node is released by this event")
    if node is None:
        return dict(total)
    free = dict(node.free)
    give(free, difference(total, node.total))
    return free


def _check_bundle(scope: ClusterView, event: ActorPlaced, amount: Resources) -> None:
    group = scope.groups.get(event.placement_group_id)
    if group is None:
        raise UnfoldableEventError(event, f"placement_group_id {event.placement_group_id!r}: no such live group")
    index = event.bundle_index
    if not 0 <= index < len(group.bundles):
        raise UnfoldableEventError(event, f"bundle_index {index}: the group has {len(group.bundles)}")
    bundle = f"bundle {index} of {event.placement_group_id!r}"
    holder = group.bundle_nodes[index]
    if holder != event.node_id:
        raise UnfoldableEventError(event, f"{bundle}: is held on {holder!r}, not on {event.node_id!r}")
    if not fits(group.bundle_free[index], amount):
        raise UnfoldableEventError(event, f"{bundle}: {_misfit(amount, group.bundle_free[index])}")


def _check_pending(view: ClusterView, event: ActorPending) -> None:
    _unplaced(event, _actor(view, event, event.actor_id)[1])


def _check_removed(view: ClusterView, event: ActorRemoved) -> None:
    _actor(view, event, event.actor_id)
    if event.resized:
        _resizes(view, event, event.resized)


def _check_group_placed(view: ClusterView, event: PlacementGroupPlaced) -> None:
    group = _group(view, event, event.pg_id)
    options = len(group.request.fallback_strategy)
    if not 0 <= event.option <= options:
        raise UnfoldableEventError(event, f"option {event.option}: the group has options 0..{options}")
    same = event.option == group.option
    held = [index for index, node_id in enumerate(group.bundle_nodes) if node_id is not None]
    if not same and held:
        raise UnfoldableEventError(event, f"option {event.option}: bundles {held} of option {group.option} are held")
    bundles = group.bundles if same else group.option_bundles(event.option)
    if len(event.bundle_nodes) != len(bundles):
        raise UnfoldableEventError(event, f"bundle_nodes: {len(event.bundle_nodes)} nodes for {len(bundles)} bundles")
    scope = _scope_of(view, event.pg_id)
    wanted: dict[str, Resources] = {}
    for index, node_id in enumerate(event.bundle_nodes):
        if not same or group.bundle_nodes[index] is None:
            _node(scope, event, f"bundle_nodes[{index}]", node_id)
            give(wanted.setdefault(node_id, {}), bundles[index])
    for node_id, amount in wanted.items():
        free = _node(scope, event, "bundle_nodes", node_id).free
        if not fits(free, amount):
            raise UnfoldableEventError(event, f"node {node_id!r}: {_misfit(amount, free)}")


def _check_bundles_lost(view: ClusterView, event: PlacementGroupBundlesLost) -> None:
    group = _group(view, event, event.pg_id)
    for index in event.bundle_indices:
        if not 0 <= index < len(group.bundles):
            raise UnfoldableEventError(event, f"bundle_indices: no bundle {index} (the group has {len(group.bundles)})")


def _check_cluster_requested(view: ClusterView, event: VirtualClusterRequested) -> None:
    clusters = view.tree.clusters
    if event.vc_id in clusters:
        return  # asked for again: the fold ignores it
    if event.vc_id == ROOT:
        raise UnfoldableEventError(event, "vc_id '': the root cluster cannot be requested")
    if event.parent != ROOT and event.parent not in clusters:
        raise UnfoldableEventError(event, f"parent {event.parent!r}: no such virtual cluster")


def _check_reserved(view: ClusterView, event: VirtualNodesReserved) -> None:
    vc = view.tree.clusters.get(event.vc_id)
    if vc is None:
        return  # destroyed already: the fold ignores it
    if vc.parent != ROOT and vc.parent not in view.tree.clusters:
        raise UnfoldableEventError(event, f"vc_id {event.vc_id!r}: its parent {vc.parent!r} is gone")
    parent = view if vc.parent == ROOT else view.tree.clusters[vc.parent].scope
    carved: set[str] = set()
    for grant in event.vnodes:
        if grant.vnode_id in vc.scope.nodes or grant.vnode_id in carved:
            raise UnfoldableEventError(event, f"vnode_id {grant.vnode_id!r}: a live virtual node has this id")
        carved.add(grant.vnode_id)
        _node(parent, event, "parent_node", grant.parent_node)


def _check_destroyed(view: ClusterView, event: VirtualClusterDestroyed) -> None:
    vc = view.tree.clusters.get(event.vc_id)
    if vc is not None and vc.children:
        raise UnfoldableEventError(event, f"vc_id {event.vc_id!r}: its clusters {vc.children} are not destroyed yet")


def _check_nominated(view: ClusterView, event: LaunchesNominated) -> None:
    for field, launch_ids in (("nominated", event.nominated), ("existing", event.existing)):
        for launch_id in sorted(launch_ids):
            if launch_id not in view.launches:
                raise UnfoldableEventError(
                    event, f"{field}: launch {launch_id!r} was never asked for (or is long over)"
                )


LATEST_UNIX_S: Final = 2**34
"""Past the year 2514: a liveness time beyond it is a forgery."""
LONGEST_SILENCE_S: Final = 10**9


def _check_unreachable(_view: ClusterView, event: NodeUnreachable) -> None:
    if not 0 <= event.last_heard < LATEST_UNIX_S:
        raise UnfoldableEventError(event, f"last_heard {event.last_heard!r}: must be a Unix time from 0 to 2**34")


def _check_silences(_view: ClusterView, event: NodeReachable | NodeDeclaredDead) -> None:
    durations = {"unreachable_for": event.unreachable_for, "dead_for": getattr(event, "dead_for", 0.0)}
    for field, seconds in durations.items():
        if not 0 <= seconds <= LONGEST_SILENCE_S:
            raise UnfoldableEventError(event, f"{field} {seconds!r}: must be seconds from 0 to {LONGEST_SILENCE_S:,}")


CHECKS.update(
    {
        NodeUnreachable: _check_unreachable,
        NodeReachable: _check_silences,
        NodeDeclaredDead: _check_silences,
        ActorSubmitted: lambda view, e: _new_actor(view, e, e.request.actor_id),
        ActorPlaced: _check_placed,
        ActorPending: _check_pending,
        ActorFailed: lambda view, e: _actor(view, e, e.actor_id),
        ActorRemoved: _check_removed,
        PlacementGroupSubmitted: lambda view, e: _new_group(view, e, e.request.pg_id),
        PlacementGroupPlaced: _check_group_placed,
        PlacementGroupPending: lambda view, e: _group(view, e, e.pg_id),
        PlacementGroupBundlesLost: _check_bundles_lost,
        PlacementGroupRemoved: lambda view, e: _group(view, e, e.pg_id),
        VirtualClusterRequested: _check_cluster_requested,
        VirtualNodesReserved: _check_reserved,
        VirtualNodeResized: lambda view, e: _resizes(view, e, [e]),
        VirtualClusterDestroyed: _check_destroyed,
        LaunchesNominated: _check_nominated,
    }
)
