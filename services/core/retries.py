"""The retry of waiting work: the waiting index kept true after each event, and the waiting work re-tried when an
event or a command may have unblocked it (only the buckets it could unblock), in queue order."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import msgspec

from schemas import ScheduleRequest
from services.core.decide.actor import actor_plans
from services.core.request import CompiledRequest
from services.core.state import ActorState, ClusterView, GroupState, NodeState, Resources, fits
from services.core.state.tree import ROOT
from services.core.state.view import VClusterState
from services.core.vclusters.virtual_clusters import VirtualClusters
from services.core.waiting import BucketKey, WaitingIndex


def scopes(view: ClusterView) -> list[ClusterView]:
    """The root view, then every virtual cluster's scope in arrival order (the tree keeps that order)."""
    return [view, *(vc.scope for vc in view.tree.clusters.values())]


class Retrier:
    """The waiting work of a view and its virtual clusters, filed by what blocks it and re-tried by the tries it is
    given (a `Cluster`'s: they place the work or explain why it waits)."""

    def __init__(
        self,
        view: ClusterView,
        vclusters: VirtualClusters,
        *,
        try_actor: Callable[[ActorState], bool],
        try_group: Callable[[GroupState], bool],
        work_of: Callable[[str], CompiledRequest],
    ) -> None:
        self.view, self.vclusters = view, vclusters
        self.try_actor, self.try_group, self.work_of = try_actor, try_group, work_of
        """A re-try of one waiting actor or group (announcing nothing new); the compiled request of an actor."""
        self.index = WaitingIndex()
        self.freed: set[str] = set()
        """Scopes (ROOT or a cluster id) that got resources back during the current command."""
        self.roomier: set[str] | None = set()
        """Nodes of the root scope that got resources back during the current command (None: not known)."""
        self.lent_back: dict[str, Resources] | None = {}
        """Root nodes that only virtual nodes shrinking gave room back to during the current command, each with
        what it had free before (None: the root got room back otherwise too)."""
        for scope in scopes(view):
            for work_id in scope.pending:
                self.file(work_id)

    def retry_pending(
        self, *, wake_all: bool, where: ClusterView | None = None, roomier: set[str] | None = None
    ) -> None:
        """Re-try waiting work in priority order (higher first), then arrival, until nothing more can be placed.

        `wake_all` is set by events that can unblock any kind of wait (a node added or relabelled, a taint
        removed, resources freed): then waiting virtual clusters are tried too, and degraded ones repaired.
        Otherwise only work that waits on another placement is re-tried, in the scope `where` that placement
        happened (affinity, DataFlow and bundles never reach across a virtual cluster's boundary).
        `roomier`: the only nodes of the root scope the event changed (None: any may have changed).
        """
        self.freed.clear()
        self.roomier, self.lent_back = set(), {}
        tried = scopes(self.view) if wake_all or where is None else [where]
        self._retry(tried, wake_all=wake_all, roomier=roomier)

    def free(self, scope: ClusterView, node_ids: Iterable[str | None]) -> None:
        """Note that `scope` got resources back on these nodes during the current command."""
        self.freed.add(scope.scope_id)
        if scope is self.view:
            self.lent_back = None
            if self.roomier is not None:
                self.roomier.update(node_id for node_id in node_ids if node_id is not None)

    def note_freed(self, scope_id: str, host: str, before: Resources) -> None:
        """Note that a virtual node shrinking gave `scope_id` room back on its node `host`, which had `before`
        free."""
        self.freed.add(scope_id)  # not a bound `add`: `retry_freed` swaps the set
        if scope_id != ROOT:
            return
        if self.roomier is not None:
            self.roomier.add(host)
        if self.lent_back is not None:
            self.lent_back.setdefault(host, before)

    def retry_freed(self) -> None:
        """Re-try what the resources this command freed can unblock: the scopes that got them back, the clusters
        that may still borrow from those, and the admission queues."""
        freed, self.freed = self.freed, set()
        roomier, self.roomier = self.roomier, set()
        lent_back, self.lent_back = self.lent_back, {}
        clusters = self.view.tree.clusters
        waiting = sorted(
            (vc for scope_id in self.index.scopes() if (vc := clusters.get(scope_id)) is not None),
            key=lambda vc: vc.arrival,  # the tree's order (see `scopes`), not the index's
        )
        scopes = [self.view] if ROOT in freed else []
        scopes += [
            vc.scope
            for vc in waiting
            if vc.scope.pending
            and (
                vc.vc_id in freed
                or (vc.parent in freed and self._may_use(vc, lent_back) and self.vclusters.may_grow(vc))
            )
        ]
        self._retry(scopes, wake_all=True, roomier=roomier)

    def _may_use(self, vc: VClusterState, lent_back: dict[str, Resources] | None) -> bool:
        """Whether room its parent got back may let `vc`'s waiting work grow into it. Not when the parent is the
        root, the room came only from virtual nodes shrinking, and each node it came back to had room enough for
        any of that work before: growing onto it was possible then (the work fails for another reason; more
        room on a node never makes a rule refuse it), and no other node changed. Held room counts who the work
        is, so then it may."""
        if vc.parent != ROOT or lent_back is None or self.view.held or vc.scope.groups.keys() & vc.scope.pending:
            return True
        needs = [vc.scope.actors[work_id].request.resources for work_id in vc.scope.pending]
        return any(not fits(before, need) for before in lent_back.values() for need in needs)

    def _retry(self, scopes: list[ClusterView], *, wake_all: bool, roomier: set[str] | None = None) -> None:
        """Re-try the scopes' waiting work until a pass places nothing; a first pass that wakes every kind of wait
        skips, at the root, the buckets `roomier` says no changed node can take (see `_could_take`). Room a
        nominated node stopped holding (its work placed elsewhere or gone) wakes the root's waiting work there."""
        while True:
            while scopes:
                if wake_all and self.view.tree.clusters:
                    self.vclusters.admit_waiting()
                scopes = [
                    scope
                    for scope in scopes
                    if scope.pending and self.retry_scope(scope, wake_all=wake_all, roomier=roomier)
                ]
                wake_all, roomier = False, None
            released = self.view.released
            if not released:
                return
            self.view.released = set()
            scopes, wake_all, roomier = [self.view], True, released

    def retry_scope(self, scope: ClusterView, *, wake_all: bool, roomier: set[str] | None = None) -> bool:
        """Re-try the scope's waiting work in queue order (with `wake_all` all of it, else only work waiting on a
        placement); once a try fails, the rest of its bucket is not tried on the same view (it fails alike),
        unless room is held for nominated work: then who the work is counts, not only its shape (see `_alike`)."""
        placed_any = False
        alike = self._alike(scope)
        nodes = [scope.nodes[n] for n in sorted(roomier) if n in scope.nodes] if roomier is not None else None
        walk = self.index.walk(
            scope.scope_id,
            everything=wake_all,
            skip=None
            if nodes is None or scope is not self.view
            else lambda work_id: not self._could_take(nodes, work_id),
        )
        for work_id in walk:
            if work_id not in scope.pending:
                continue
            actor = scope.actors.get(work_id)
            placed = self.try_actor(actor) if actor is not None else self.try_group(scope.groups[work_id])
            placed_any |= placed
            if not placed and alike and work_id not in scope.nominations:  # nominated work may see less room
                walk.drop_bucket()
        return placed_any

    def _could_take(self, nodes: list[NodeState], work_id: str) -> bool:
        """Whether one of the root nodes an event changed can take the actor now.

        Label-less work waiting for no placement, explained after a failed try, fails on the view it was tried on;
        an event that changed only `nodes` (room given back, a node added, relabelled or untainted) can let it in
        only there, so work none of `nodes` can take need not be tried, nor the rest of its bucket.
        """
        work = self.work_of(work_id)
        plans, _bundle = actor_plans(self.view, work)
        return any(
            fits(node.free, work.resources) and any(plan.rejects(node) is None for plan in plans) for node in nodes
        )

    def _alike(self, scope: ClusterView) -> bool:
        """Whether work of one shape and priority fails alike in `scope` on an unchanged view: a failed try draws
        nothing from the seeded generator, so only room held for nominated work tells two such pieces apart (the
        scope's, or, where the scope may grow, the root's that its growth borrows from)."""
        if scope.held:
            return False
        return not (self._borrows(scope) and (self.view.held or self.view.nominations))

    def _borrows(self, scope: ClusterView) -> bool:
        """Whether work in `scope` may be placed by growing its virtual cluster (see `VirtualClusters.borrow`)."""
        vc = self.vclusters.of_scope(scope)
        return vc is not None and vc.status == "admitted" and self.vclusters.spec_of(vc.vc_id).grows

    def file(self, work_id: str) -> None:
        """Keep the waiting index true for one piece of work after an event about it: filed while it waits, under
        its shape once it has been explained (new or restarted work is filed alone: it is tried, and explained)."""
        scope = self.view.scope_of(work_id)
        actor = scope.actors.get(work_id) if work_id in scope.pending else None
        group = scope.groups.get(work_id) if actor is None and work_id in scope.pending else None
        if group is not None:
            key: BucketKey = (group.request.priority, ("group", work_id))
            self.index.file(scope.scope_id, work_id, group.arrival, key, same_outcome=False, on_placement=False)
            return
        if actor is None:  # not waiting (an id left in the queue by work gone for good waits for nothing either)
            self.index.unfile(work_id)
            return
        on_placement = self._waits_on_placement(work_id)
        alike = not (actor.explanation is None or on_placement)
        key = (actor.request.priority, _shape(actor.request) if alike else ("new", work_id))
        room_only = alike and not actor.request.labels
        self.index.file(
            scope.scope_id,
            work_id,
            actor.arrival,
            key,
            same_outcome=alike,
            on_placement=on_placement,
            room_only=room_only,
        )

    def queue_key(self, work_id: str) -> tuple[int, int]:
        """Where waiting work stands in its scope's queue: higher priority first, then arrival."""
        scope = self.view.scope_of(work_id)
        actor = scope.actors.get(work_id)
        if actor is not None:
            return -actor.request.priority, actor.arrival
        group = scope.groups[work_id]
        return -group.request.priority, group.arrival

    def _waits_on_placement(self, work_id: str) -> bool:
        if work_id not in self.view.scope_of(work_id).actors:
            return False
        work = self.work_of(work_id)
        affinity = work.affinity is not None and any(not e.soft for e in work.affinity.match_expressions)
        dataflow = work.run_after is not None and work.run_after.policy == "Require"
        return affinity or dataflow or work.group_target is not None


def _shape(request: ScheduleRequest) -> bytes:
    """What decides whether an actor can be placed on a view: its request but for the id, priority and restarts."""
    return msgspec.json.encode(msgspec.structs.replace(request, actor_id="", priority=0, max_restarts=0))
