"""Nominated nodes: the node a launch was for holds room for the pending work the plan put on it (pure).

Like kube-scheduler's NominatedNodeName. `NodesLaunchRequested.nominated` names, per launch, the pending work of the
root scope and the pending actors of top-level virtual clusters the plan put on that node, and the resources it put
there; `LaunchesNominated` adds work a later round counted on launches asked for earlier. Once the node registers
(and while it lives), that work is tried there first (an actor of a virtual cluster: its cluster's flexible node
there, grown for it), and the room is held: other work of lower or equal priority cannot take it, nor can a virtual
cluster's admission, nor its growth for other work. A nominated actor of a virtual cluster also holds its share of
the cluster's flexible maximum (`held_quota`, from the nomination on, its node registered or not): the cluster's
actors after it in `quota_order` cannot grow into it, nor can a child cluster's admission. A nomination ends when
the work is placed (anywhere) or gone, or when the launch ends (failed, terminated, its node died).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Final

from services.core.state.model import EPSILON, Launch, NodeState, Resources
from services.core.state.view import ClusterView, VClusterState

Held = dict[str, tuple[int, Resources]]
"""Work id -> (its priority, the room held for it) on one node."""


def nominate(view: ClusterView, launches: Iterable[Launch], nominated: Mapping[str, Mapping[str, Resources]]) -> None:
    """Launches' nominations: the nominable pending work each names, added to what each is nominated and launched for
    (a work may be nominated to several launches: a placement group spread over nodes, or work a later round
    counted again; it holds room on each; naming it again on the same launch sets the room held)."""
    named = {
        launch.launch_id: {
            work_id: room_to_hold(amount)
            for work_id, amount in sorted(nominated.get(launch.launch_id, {}).items())
            if nominable(view, work_id)
        }
        for launch in launches
    }
    for launch_id, work in named.items():
        launch = view.launches[launch_id]
        for work_id, amount in work.items():
            launch.nominated[work_id] = amount
            ids = view.nominations.setdefault(work_id, [])
            if launch_id not in ids:
                ids.append(launch_id)
                ids.sort()
        known = set(launch.work)
        launch.work += tuple(work_id for work_id in work if work_id not in known)
        hold(view, launch)


def nominate_existing(view: ClusterView, launch: Launch, existing: Mapping[str, Mapping[str, Resources]]) -> None:
    """Existing nodes' room the plan put work of `launch` on (existing node id -> work id -> resources): held there
    for that work, as the launch's own node holds room, for the nominable work the launch is nominated for (on live
    nodes only)."""
    for node_id, put in sorted(existing.items()):
        if node_id not in view.nodes:
            continue
        for work_id, amount in sorted(put.items()):
            room = room_to_hold(amount)
            if room and work_id in launch.nominated and nominable(view, work_id):
                launch.existing.setdefault(node_id, {})[work_id] = room
    hold(view, launch)


def nominable(view: ClusterView, work_id: str) -> bool:
    """Whether `work_id` is pending work a launch can be nominated for: at the root, or an actor of a top-level
    virtual cluster (whose flexible node may grow onto any node; a nested cluster grows only on its parent's)."""
    if work_id in view.pending:
        return True
    scope = view.scope_of(work_id)
    vc = view.tree.clusters.get(scope.scope_id) if scope.scope_id else None
    return vc is not None and not vc.parent and work_id in scope.pending and work_id in scope.actors


def priority_of(view: ClusterView, work_id: str) -> int:
    """The priority of the actor or placement group `work_id` (in its scope; 0 when gone)."""
    scope = view.scope_of(work_id)
    work = scope.actors.get(work_id) or scope.groups.get(work_id)
    return work.request.priority if work is not None else 0


def room_to_hold(amount: Mapping[str, float]) -> Resources:
    """The room to hold: positive, finite amounts only (anything else holds nothing)."""
    return {name: float(quantity) for name, quantity in amount.items() if math.isfinite(quantity) and quantity > 0}


def hold(view: ClusterView, launch: Launch) -> None:
    """Hold the room of a launch's nominations on its node, once that node is registered and live, and on the
    existing nodes it holds room on (while they live)."""
    for node_id, put in _holdings(launch):
        if node_id in view.nodes:
            for work_id, amount in put.items():
                view.held.setdefault(node_id, {})[work_id] = (priority_of(view, work_id), amount)


def _holdings(launch: Launch) -> list[tuple[str, Mapping[str, Resources]]]:
    """The nodes a launch holds room on (its own, once it has one, then existing ones) with the room per work."""
    own: list[tuple[str, Mapping[str, Resources]]] = [(launch.node_id, launch.nominated)] if launch.node_id else []
    return own + sorted(launch.existing.items())


def end_if_placed_or_gone(root: ClusterView, work_id: str) -> None:
    """After an event about `work_id`: its nomination ends once it is no longer pending (placed, or gone)."""
    if work_id in root.nominations and work_id not in root.scope_of(work_id).pending:
        end_work(root, work_id)


def end_work(view: ClusterView, work_id: str) -> None:
    """Every nomination of `work_id` ends."""
    for launch_id in view.nominations.pop(work_id, ()):
        launch = view.launches.get(launch_id)
        if launch is not None:
            launch.nominated.pop(work_id, None)
            _release(view, launch.node_id, work_id)
            for node_id in [node_id for node_id, put in launch.existing.items() if work_id in put]:
                del launch.existing[node_id][work_id]
                if not launch.existing[node_id]:
                    del launch.existing[node_id]
                _release(view, node_id, work_id)


def end_launch(view: ClusterView, launch: Launch) -> None:
    """Every nomination of an ended launch ends."""
    for work_id in launch.nominated:
        ids = view.nominations.get(work_id, [])
        if launch.launch_id in ids:
            ids.remove(launch.launch_id)
        if not ids:
            view.nominations.pop(work_id, None)
        _release(view, launch.node_id, work_id)
    for node_id, put in launch.existing.items():
        for work_id in put:
            _release(view, node_id, work_id)
    launch.nominated, launch.existing = {}, {}


def end_node(view: ClusterView, node_id: str) -> None:
    """A node died: the room launches held on it for work they are nominated for is held no more."""
    for work_id in view.held.pop(node_id, {}):
        for launch_id in view.nominations.get(work_id, ()):
            view.launches[launch_id].existing.pop(node_id, None)


def _release(view: ClusterView, node_id: str, work_id: str) -> None:
    held = view.held.get(node_id)
    if held is not None and held.pop(work_id, None) is not None:
        view.released.add(node_id)
        if not held:
            del view.held[node_id]


def rebuild(view: ClusterView) -> None:
    """The nominations index and the held room, from the launches' nominations (a restored snapshot)."""
    view.nominations, view.held = {}, {}
    for launch_id, launch in sorted(view.launches.items()):
        for work_id in launch.nominated:
            view.nominations.setdefault(work_id, []).append(launch_id)
        hold(view, launch)


def nominated_nodes(view: ClusterView, work_id: str) -> tuple[str, ...]:
    """The live nodes nominated for `work_id`, in launch-id order, each launch's node before the existing nodes it
    holds room on for that work (none for most work)."""
    launch_ids = view.nominations.get(work_id)
    if not launch_ids:
        return ()
    node_ids = (
        node_id
        for launch_id in launch_ids
        for node_id, put in _holdings(view.launches[launch_id])
        if work_id in put and node_id in view.nodes
    )
    return tuple(dict.fromkeys(node_ids))


def launching_for(view: ClusterView, work_id: str) -> list[str]:
    """The launches nominated for `work_id` whose nodes have not registered yet."""
    launch_ids = view.nominations.get(work_id, ())
    return [launch_id for launch_id in launch_ids if view.launches[launch_id].state == "launching"]


LAUNCHING: Final = "the autoscaler is launching"
"""How an explanation of work a launch is for begins: no "no node could ever host it" follows it."""


def awaited(view: ClusterView, work_id: str) -> str:
    """Why pending work waits for its launches, in words: `the autoscaler is launching gpu-a100 for it (launch
    l-3)` ("" when none of them is still coming)."""
    launching = launching_for(view, work_id) if view.nominations else []
    if not launching:
        return ""
    types = ", ".join(sorted({view.launches[launch_id].node_type for launch_id in launching}))
    return f"{LAUNCHING} {types} for it (launch {', '.join(launching)})"


def closed_to(view: ClusterView, work_id: str, own: tuple[str, ...]) -> frozenset[str]:
    """While a launch nominated for `work_id` has not registered, the other nodes launched in the same round or
    later: the plan gave their room to other work, and taking it would leave this work's own node empty when it
    comes (room freed on nodes launched before stays open: the plan did not count on it)."""
    launching = launching_for(view, work_id)
    if not launching:
        return frozenset()
    since = min(view.launches[launch_id].requested_at for launch_id in launching)
    launches = view.launches
    return frozenset(
        node_id
        for node_id, launch_id in view.launched_nodes.items()
        if node_id not in own and launches[launch_id].requested_at >= since
    )


def unheld(view: ClusterView, node: NodeState, work_id: str = "", priority: int | None = None) -> Resources:
    """A root node's free room less what it holds for nominated work: all of it (`priority` None: a virtual
    cluster's admission), or, for `work_id` of `priority`, what it holds for other work of equal or higher
    priority."""
    holds = view.held.get(node.node_id) if view.held and not view.scope_id else None
    if not holds:
        return node.free
    left = dict(node.free)
    for other, (other_priority, amount) in holds.items():
        if other != work_id and (priority is None or other_priority >= priority):
            for name, quantity in amount.items():
                left[name] = left.get(name, 0.0) - quantity
    return left


def held_quota(
    view: ClusterView,
    vc: VClusterState,
    room: Callable[[str], float],
    work_id: str = "",
    priority: int | None = None,
) -> Resources:
    """What the nominated pending actors of `vc` hold of its flexible maximum: in `quota_order`, each holds what it
    needs while `room` (per resource name: how much more the maximum allows) has that left after those before it
    (one that does not fit holds nothing: it cannot have it anyway). All of it (`priority` None: a child cluster's
    admission), or what those ahead of `work_id` of `priority` hold (so nominated actors never block each other)."""
    if not view.nominations or vc.parent:
        return {}
    scope = vc.scope
    own = scope.actors.get(work_id)
    place = None if priority is None else quota_order(view, work_id, priority, own.arrival if own is not None else -1)
    nominated = [
        (quota_order(view, other, actor.request.priority, actor.arrival), actor.request.resources)
        for other in view.nominations
        if other != work_id and other in scope.pending and (actor := scope.actors.get(other)) is not None
    ]
    left: Resources = {}
    held: Resources = {}
    for order, resources in sorted(nominated, key=lambda pair: pair[0]):
        need = room_to_hold(resources)
        for name in need:
            if name not in left:
                left[name] = room(name)
        if place is not None and order > place:
            break
        if all(amount <= left[name] + EPSILON for name, amount in need.items()):
            for name, amount in need.items():
                left[name] -= amount
                held[name] = held.get(name, 0.0) + amount
    return held


def quota_order(view: ClusterView, work_id: str, priority: int, arrival: int) -> tuple[int, bool, int]:
    """The order a virtual cluster's actors have its flexible maximum in: by priority (higher first), nominated
    before the rest, then by arrival."""
    return -priority, work_id not in view.nominations, arrival


def held_room(
    held: dict[str, Held],
    room: Callable[[NodeState], Resources],
    work_id: str,
    priority: int | None,
    closed: frozenset[str] = frozenset(),
) -> Callable[[NodeState], Resources]:
    """`room` less what nodes hold for other nominated work of equal or higher priority (kube-scheduler's
    addNominatedPods; `priority` None: of any priority), and nothing on the `closed` nodes; a node holding nothing
    costs two lookups."""

    def room_of(node: NodeState) -> Resources:
        if node.node_id in closed:
            return {}
        holds = held.get(node.node_id)
        if not holds:
            return room(node)
        left = dict(room(node))
        for other, (other_priority, amount) in holds.items():
            if other != work_id and (priority is None or other_priority >= priority):
                for name, quantity in amount.items():
                    left[name] = left.get(name, 0.0) - quantity
        return left

    return room_of
