"""`Cluster`: an in-process cluster; commands become events, events fold into the view, pending work re-tries (pure)."""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any, Final, TypeVar

import msgspec

from schemas import (
    ActorFailed,
    ActorPending,
    ActorPlaced,
    ActorRemoved,
    ActorSubmitted,
    AnyEvent,
    Explanation,
    NodeDeclaredDead,
    NodeDied,
    NodeLabelsChanged,
    NodeLaunchFailed,
    NodeReachable,
    NodeRegistered,
    PlacementGroupBundlesLost,
    PlacementGroupPending,
    PlacementGroupPlaced,
    PlacementGroupRemoved,
    PlacementGroupRequest,
    PlacementGroupSubmitted,
    ScheduleRequest,
    Taint,
    TaintsChanged,
    VirtualCluster,
    VirtualClusterDestroyed,
    VirtualClusterDestroyRequested,
    VirtualClusterInfo,
    VirtualClusterRequested,
    VirtualNodeInfo,
)
from schemas.decisions import Pending, Placed
from schemas.vclusters import Admitted, Destroyed, Queued
from services.core.decide.actor import explain_actor, place_actor, prepared_rules
from services.core.decide.group import decide_group
from services.core.errors import NotFoundError, RejectedError
from services.core.node_events import labels_changed, live_node, node_registered, taints_added, taints_removed
from services.core.plugins.taints import eviction_reason
from services.core.prng import SplitMix64
from services.core.proposals import agrees, choose_node
from services.core.recording import CommandFailedError, Journal, Outcome
from services.core.request import (
    CompiledGroup,
    CompiledRequest,
    check_new_work,
    check_same_request,
)
from services.core.retries import Retrier, scopes
from services.core.state import ActorState, ClusterView, GroupState, NodeState, Resources, replay
from services.core.state.nominations import awaited
from services.core.type_tests import TypeTest
from services.core.vclusters.info import node_infos
from services.core.vclusters.virtual_clusters import ClusterHooks, VirtualClusters

T = TypeVar("T")

DEFAULT_SAMPLE: Final = 16
"""Placeable nodes scored per decision (like kube-scheduler's percentageOfNodesToScore); preferred nodes come on top."""


class Cluster:
    """The fold of events plus the decision pipeline; every call keeps what happened in `events()`.

    In-process, commands write every event. In a service, a command runs through `decided`, which returns its
    result with the events it wrote (to be appended to the log); `fold` folds an event other services wrote and
    returns what it reacted with (failing the actors of a dead node, evicting on NoExecute, re-trying pending work),
    and so does `reconcile`.
    """

    def __init__(
        self,
        seed: int = 0,
        rare_resources: tuple[str, ...] = (),
        *,
        sample_size: int = DEFAULT_SAMPLE,
        keep_history: bool = True,
    ) -> None:
        self.seed = seed
        self.rare_resources = tuple(rare_resources)
        self.sample_size = sample_size
        self.epoch = 0
        self.event_prefix = ""
        self.folded = 0
        """The log sequence this cluster's view has folded (a service sets it); placements record it."""
        self._prng = SplitMix64(seed)
        self._journal = Journal(keep_history=keep_history)
        self._emitted = 0
        self._work: dict[str, CompiledRequest] = {}
        self._groups: dict[str, CompiledGroup] = {}
        self._cause = ""
        self._subject = ""
        self._use_view(ClusterView(seed))

    @classmethod
    def from_events(cls, events: list[AnyEvent], seed: int = 0, rare_resources: tuple[str, ...] = ()) -> Cluster:
        """A cluster whose view is the fold of `events` (replay never re-decides)."""
        cluster = cls.from_view(replay(events, seed), rare_resources)
        cluster._journal = Journal(events)
        cluster._emitted = len(events)
        return cluster

    @classmethod
    def from_view(
        cls, view: ClusterView, rare_resources: tuple[str, ...] = (), *, keep_history: bool = True
    ) -> Cluster:
        """A cluster that goes on from an already folded view (a snapshot plus the log's tail)."""
        cluster = cls(view.seed, rare_resources, keep_history=keep_history)
        cluster._use_view(view)
        return cluster

    def _use_view(self, view: ClusterView) -> None:
        self._view = view
        hooks = ClusterHooks(
            emit=self._emit,
            begin=self._begin,
            stop_work=self._stop_work,
            retry_all=lambda: self.retries.retry_pending(wake_all=True),
            retry_scope=lambda scope: self.retries.retry_scope(scope, wake_all=True),
            freed=lambda scope_id, host, before: self.retries.note_freed(scope_id, host, before),  # noqa: PLW0108 - `retries` comes after
        )
        self.vclusters = VirtualClusters(
            view, self._prng, hooks, rare_resources=self.rare_resources, sample_size=self.sample_size
        )
        """The virtual clusters inside this cluster."""
        self.retries = Retrier(
            view,
            self.vclusters,
            try_actor=lambda actor: self._try_actor(actor, announce=False),
            try_group=lambda group: self._try_group(group, announce=False),
            work_of=self._work_of,
        )
        """The waiting work, filed and re-tried."""

    @property
    def view(self) -> ClusterView:
        """The folded view (read it; change it only through the commands)."""
        return self._view

    # the journal

    def _emit(self, event: AnyEvent) -> None:
        self._emitted += 1
        event_id = f"{self.event_prefix}{self._emitted}"
        event = msgspec.structs.replace(
            event, event_id=event_id, correlation_id=self._subject, causation_id=self._cause, epoch=self.epoch
        )
        self._cause = self._cause or event_id
        self._emitted -= self._journal.write(event)  # merged events give their ids back (see `recording`)
        self._fold_view(event)

    def _fold_view(self, event: AnyEvent) -> None:
        self._view.fold(event)
        work_of = _WORK_OF.get(type(event))
        if work_of is not None:
            self.retries.file(work_of(event))
        if _ACTOR_LEAVES.holds(event) and event.actor_id not in self._scope(event.actor_id).actors:
            self._work.pop(event.actor_id, None)
        elif _GROUP_REMOVED.holds(event):
            self._groups.pop(event.pg_id, None)
        elif _CLUSTER_DESTROYED.holds(event):
            self.vclusters.forget(event.vc_id)
            self.retries.index.forget_scope(event.vc_id)

    def _begin(self, subject: str) -> None:
        self._cause, self._subject = "", subject
        self._journal.begin()

    def events(self) -> list[AnyEvent]:
        """Everything that happened, in order (with `keep_history=False`: only what a command under way wrote)."""
        return self._journal.events()

    def decided(self, command: Callable[[], T]) -> Outcome[T]:
        """Run `command` (calls of this cluster's commands): its result with the events it wrote, in order.

        A command that raises after writing events (a bug: refusals come before any) raises `CommandFailedError` with
        those events, which the view already folded; one that wrote nothing raises its own error.
        """
        self._journal.close()  # a command called outside `decided` (in-process only) is not this one
        try:
            result = command()
        except Exception as error:
            written = self._journal.close()
            if written:
                raise CommandFailedError(written, error) from error
            raise
        return Outcome(result, self._journal.close())

    # events written by other services

    def fold(self, event: AnyEvent, *, react: bool = True) -> list[AnyEvent]:
        """Fold an event another writer appended; with `react`, do what it calls for (fail, evict, re-try) and
        return the events that wrote."""
        node = self._view.nodes.get(event.node_id) if isinstance(event, TaintsChanged) else None
        before = node.taints if node is not None else ()
        self._fold_view(event)  # first: an event that cannot be folded is not kept either
        self._journal.close()  # a command called outside `decided` (in-process only) comes before it in history
        self._journal.folded(event)
        if not react:
            return []
        self._begin(getattr(event, "node_id", ""))
        self._cause = event.event_id
        self._react(event, before)
        return self._journal.close()

    def _react(self, event: AnyEvent, taints_before: tuple[Taint, ...] = ()) -> None:
        if isinstance(event, NodeDied):
            for scope in scopes(self._view):
                for node_id in holding_work(scope.dead):
                    self._fail_dead_node(scope, node_id)
            self.retries.retry_pending(wake_all=True)
        elif isinstance(event, NodeRegistered | NodeLabelsChanged | NodeReachable):
            self.retries.retry_pending(wake_all=True, roomier={event.node_id})
        elif isinstance(event, NodeDeclaredDead):
            self._evict_from_dead(event)
        elif isinstance(event, TaintsChanged):
            evicting = [t for t in event.taints if t.effect == "NoExecute" and t not in taints_before]
            if evicting:
                for scope, node_id in [(self._view, event.node_id), *self._carved_below(self._view, event.node_id)]:
                    self._evict(scope, node_id, evicting)
            removed = any(t not in event.taints for t in taints_before)
            self.retries.retry_pending(wake_all=bool(evicting) or removed, roomier={event.node_id})
        elif isinstance(event, VirtualClusterRequested):
            self.vclusters.try_admit(self._view.tree.clusters[event.vc_id], announce=True)
        elif isinstance(event, VirtualClusterDestroyRequested):
            self.vclusters.destroy(event.vc_id)
        elif isinstance(event, NodeLaunchFailed) or self._view.released:
            self.retries.retry_pending(
                wake_all=True
            )  # a launch ended: the work it was for may go elsewhere, its room is free

    def _evict_from_dead(self, event: NodeDeclaredDead) -> None:
        """A node declared dead: the work on it (and on its virtual nodes) that does not stay under its liveness
        taint fails, as under any NoExecute taint."""
        node = self._view.nodes.get(event.node_id)
        if node is not None and node.unreachable is not None:
            for scope, node_id in [(self._view, event.node_id), *self._carved_below(self._view, event.node_id)]:
                self._evict(scope, node_id, [node.unreachable], event.dead_for)
        self.retries.retry_pending(wake_all=True)

    def _fail_dead_node(self, scope: ClusterView, node_id: str) -> None:
        node = scope.dead.get(node_id)
        if node is None:
            return
        self._fail_actors(sorted(node.actors), f"node {node_id} died")
        self._lose_bundles(sorted(node.bundles), f"node {node_id} died")

    def _carved_below(self, view: ClusterView, node_id: str) -> list[tuple[ClusterView, str]]:
        """Every virtual node carved out of `node_id`, directly or through other virtual nodes."""
        found: list[tuple[ClusterView, str]] = []
        for vnode_id, vc_id in sorted(view.carved.get(node_id, {}).items()):
            scope = self._view.tree.clusters[vc_id].scope
            found += [(scope, vnode_id), *self._carved_below(scope, vnode_id)]
        return found

    def reconcile(self) -> list[AnyEvent]:
        """Catch up on reactions a follower only folded (fail work on dead nodes, evict, re-try everything); the
        events that wrote."""
        self._journal.close()
        self._begin("")
        for vc in sorted(self._view.tree.clusters.values(), key=lambda vc: vc.arrival):
            if vc.destroying:
                self.vclusters.destroy(vc.vc_id)
        for scope in scopes(self._view):
            for node_id in holding_work(scope.dead):
                self._fail_dead_node(scope, node_id)
            for node_id in sorted(scope.nodes):
                node = scope.nodes[node_id]
                evicting = [t for t in node.taints if t.effect == "NoExecute"]
                if evicting:
                    self._evict(scope, node_id, evicting, node.dead_for or 0.0)
        self.retries.retry_pending(wake_all=True)
        return self._journal.close()

    # nodes

    def add_node(
        self,
        node_id: str,
        resources: dict[str, float],
        labels: dict[str, str] | None = None,
        taints: dict[str, str] | list[Taint] | None = None,
        *,
        address: str = "",
        **defaults: str | None,
    ) -> None:
        """Register a node with resources, user labels, static taints and default labels (hostname, zone...)."""
        event = node_registered(
            self._view,
            node_id,
            resources,
            labels,
            taints,
            rare_resources=self.rare_resources,
            address=address,
            defaults=defaults,
        )
        self._command(event)

    def remove_node(self, node_id: str) -> None:
        """The node died: its actors fail (and restart if they may), its bundles are reserved again."""
        live_node(self._view, node_id)
        self._command(NodeDied(node_id=node_id))

    def set_labels(self, node_id: str, labels: dict[str, str]) -> None:
        """Replace the node's user labels; system labels stay."""
        self._command(labels_changed(self._view, node_id, labels))

    def add_taints(self, node_id: str, taints: dict[str, str] | list[Taint]) -> None:
        """Add taints (a taint with the same key and effect is replaced); NoExecute evicts untolerating actors."""
        self._command(taints_added(self._view, node_id, taints))

    def remove_taints(self, node_id: str, keys: list[str], effects: dict[str, list[str]] | None = None) -> None:
        """Remove every taint with one of these keys, and each taint whose key and effect `effects` names."""
        self._command(taints_removed(self._view, node_id, keys, effects))

    def _command(self, event: NodeRegistered | NodeDied | NodeLabelsChanged | TaintsChanged) -> None:
        node = self._view.nodes.get(event.node_id)
        before = node.taints if node is not None else ()
        self._begin(event.node_id)
        self._emit(event)
        self._react(event, before)

    def _node(self, node_id: str) -> NodeState:
        return live_node(self._view, node_id)

    def _evict(self, scope: ClusterView, node_id: str, taints: list[Taint], elapsed: float = 0.0) -> None:
        """Fail the actors and lose the bundles on the node that do not stay under its NoExecute `taints`, in force
        for `elapsed` seconds (`toleration_seconds`)."""
        node = scope.nodes[node_id]
        victims = []
        for actor_id in sorted(node.actors):
            actor = scope.actors[actor_id]
            if actor.bundle is not None:
                continue
            tolerations = self._work_of(actor_id).tolerations
            untolerated = [t for t in taints if not tolerations.stays(t.key, t.value, elapsed)]
            if untolerated:
                victims.append((actor_id, f"evicted: {eviction_reason(untolerated[0], elapsed)}"))
        for actor_id, reason in victims:
            self._fail_actors([actor_id], reason)
        lost = []
        for pg_id, index in sorted(node.bundles):
            tolerations = self._group_of(pg_id).tolerations
            if any(not tolerations.stays(t.key, t.value, elapsed) for t in taints):
                lost.append((pg_id, index))
        self._lose_bundles(lost, f"NoExecute taint on node {node_id}")

    # actors

    def submit(self, request: ScheduleRequest) -> Placed | Pending:
        """Schedule an actor or task; a live id returns its current decision (another request for it: a conflict)."""
        work = CompiledRequest(request, self.rare_resources)
        existing = self._scope(request.actor_id).actors.get(request.actor_id)
        if existing is not None:
            check_same_request("actor_id", request.actor_id, existing.request, request)
            return self._decision_of(existing)
        check_new_work(request)
        self._check_scope("vcluster_id", request.vcluster_id)
        self._work[request.actor_id] = work
        self._begin(request.actor_id)
        if work.group_target is None:
            return self._submit_alone(work)
        self._emit(ActorSubmitted(request=request))
        scope = self._scope(request.actor_id)
        actor = scope.actors[request.actor_id]
        if self._try_actor(actor, announce=True):
            self.retries.retry_pending(wake_all=False, where=scope)
            return self._decision_of(actor)
        assert actor.explanation is not None, "a pending actor was just explained"
        return Pending.of(request.actor_id, actor.explanation)  # explained once: the view has not changed since

    def _submit_alone(self, work: CompiledRequest) -> Placed | Pending:
        """`submit` for an actor outside any placement group, the commonest: placed, it is one `ActorPlaced` carrying
        its request (and, inside a virtual cluster, the growth that made room), folded in one step: the node is
        chosen before the actor joins the view, which no rule looks at while it is on no node, and a new actor holds
        no nomination; else submitted, and pending with why."""
        request, prng = work.request, self._prng.state
        scope = self._view.scope(request.vcluster_id)
        placed = self._place(scope, work)
        if placed is not None:
            node_id = placed[0].node_id
            self._emit(
                ActorPlaced(actor_id=request.actor_id, node_id=node_id, request=request, prng=prng, folded=self.folded)
            )
            self.retries.retry_pending(wake_all=False, where=scope)
            return Placed(request.actor_id, node_id)
        self._prng.state = prng  # a try that places nothing draws nothing (see `_try_actor`)
        self._emit(ActorSubmitted(request=request))
        explanation = self._explain(scope, work)
        self._emit(ActorPending(actor_id=request.actor_id, explanation=explanation))
        return Pending.of(request.actor_id, explanation)

    def _place(self, scope: ClusterView, work: CompiledRequest) -> tuple[NodeState, int] | None:
        """Where an actor goes now (node, bundle index): a node of its scope with room, else, inside a virtual
        cluster, a flexible node grown for it (the growth is emitted); None when neither can take it."""
        rules = prepared_rules(scope, work)
        placed = place_actor(scope, work, self._prng, self.sample_size, rules=rules)
        if placed is None:
            vc = self.vclusters.of_scope(scope)
            if vc is not None:
                placed = self.vclusters.borrow(vc, work, rules)
        return placed

    def propose(self, request: ScheduleRequest, prng: SplitMix64, taken: dict[str, Resources]) -> str | None:
        """The node this view would place a new actor of the root on (`proposals.choose_node`); None to leave the
        request to the allocator (a live id, a virtual cluster, a placement group's bundle, no room here).

        Changes nothing in the view: the allocator checks the proposal against its own (`submit_proposed`).
        """
        if request.vcluster_id or request.actor_id in self._scope(request.actor_id).actors:
            return None
        work = CompiledRequest(request, self.rare_resources)
        check_new_work(request)
        if work.group_target is not None:
            return None
        return choose_node(self._view, work, prng, taken, self.sample_size)

    def submit_proposed(
        self, request: ScheduleRequest, node_id: str, prng: int, folded: int
    ) -> Placed | Pending | None:
        """Place a new actor on the node a proposer chose (`propose`, with generator state `prng`, on a view that had
        folded the log up to `folded`) if this view agrees (`proposals.agrees`): one `ActorPlaced` carrying its
        request, as `_submit_alone` writes. None when it does not, and then nothing changed. A live id (or work
        `propose` leaves to the allocator) is decided as `submit` decides it."""
        if request.vcluster_id or request.actor_id in self._scope(request.actor_id).actors:
            return self.submit(request)
        work = CompiledRequest(request, self.rare_resources)
        check_new_work(request)
        if work.group_target is not None:
            return self.submit(request)
        if not agrees(self._view, work, node_id):
            return None
        self._work[request.actor_id] = work
        self._begin(request.actor_id)
        self._emit(ActorPlaced(actor_id=request.actor_id, node_id=node_id, request=request, prng=prng, folded=folded))
        self.retries.retry_pending(wake_all=False, where=self._view)
        return Placed(request.actor_id, node_id)

    def remove_actor(self, actor_id: str) -> None:
        """The actor or task finished or was removed: free its resources."""
        node_id = self._actor(actor_id).node_id
        scope = self._scope(actor_id)
        self._begin(actor_id)
        self._emit(ActorRemoved(actor_id=actor_id))
        self.retries.free(scope, [node_id])
        self.vclusters.shrink(scope, node_id)
        self.retries.retry_freed()

    def fail_actor(self, actor_id: str) -> None:
        """A running actor failed: it restarts under the same rules while it has restarts left."""
        actor = self._actor(actor_id)
        if actor.status != "placed":
            raise RejectedError(f"actor_id {actor_id!r}: is not running (it is {actor.status}), so it cannot fail")
        self._begin(actor_id)
        self._fail_actors([actor_id], "reported failed")
        self.retries.retry_freed()

    def _scope(self, work_id: str) -> ClusterView:
        """The view an actor or placement group lives in (the root's, or its virtual cluster's)."""
        return self._view.scope_of(work_id)

    def _check_scope(self, field: str, vc_id: str | None) -> None:
        """New work may name a live virtual cluster (None or "" is the root)."""
        if not vc_id:
            return
        vc = self._view.tree.clusters.get(vc_id)
        if vc is None:
            raise NotFoundError(f"{field} {vc_id!r}: no such virtual cluster")
        if vc.destroying:
            raise RejectedError(f"{field} {vc_id!r}: the virtual cluster is being destroyed")

    def _work_of(self, actor_id: str) -> CompiledRequest:
        work = self._work.get(actor_id)
        if work is None:
            request = self._scope(actor_id).actors[actor_id].request
            work = self._work[actor_id] = CompiledRequest(request, self.rare_resources)
        return work

    def _group_of(self, pg_id: str) -> CompiledGroup:
        work = self._groups.get(pg_id)
        if work is None:
            work = self._groups[pg_id] = CompiledGroup(self._scope(pg_id).groups[pg_id].request, self.rare_resources)
        return work

    def _actor(self, actor_id: str) -> ActorState:
        actor = self._scope(actor_id).actors.get(actor_id)
        if actor is None:
            raise NotFoundError(f"actor_id {actor_id!r}: no such live actor")
        return actor

    def _fail_actors(self, actor_ids: list[str], reason: str, *, restart: bool = True) -> None:
        for actor_id in actor_ids:
            scope = self._scope(actor_id)
            actor = scope.actors[actor_id]
            again = restart and actor.restarts_left
            node_id = actor.node_id
            self._emit(ActorFailed(actor_id=actor_id, node_id=node_id or "", reason=reason, will_restart=again))
            self.retries.free(scope, [node_id])
            self.vclusters.shrink(scope, node_id)

    def _try_actor(self, actor: ActorState, *, announce: bool) -> bool:
        """Place the actor now if it can be; otherwise it waits (and a try that places nothing draws nothing from
        the seeded generator, so skipping a try known to fail changes no later choice)."""
        actor_id = actor.request.actor_id
        work = self._work_of(actor_id)
        scope = self._scope(actor_id)
        prng = self._prng.state
        placed = self._place(scope, work)
        if placed is not None:
            node, bundle_index = placed
            target = work.group_target
            group_id = target.placement_group_id if target is not None and bundle_index >= 0 else ""
            self._emit(
                ActorPlaced(
                    actor_id=actor_id,
                    node_id=node.node_id,
                    placement_group_id=group_id,
                    bundle_index=bundle_index,
                    prng=prng,
                    folded=self.folded,
                )
            )
            return True
        self._prng.state = prng
        if announce or actor.explanation is None:
            self._emit(ActorPending(actor_id=actor_id, explanation=self._explain(scope, work)))
        return False

    def _explain(self, scope: ClusterView, work: CompiledRequest) -> Explanation:
        vc = self.vclusters.of_scope(scope)
        if vc is None:
            return explain_actor(scope, work, reason=awaited(scope, work.request.actor_id))
        explanation = explain_actor(scope, work, f"virtual cluster {vc.vc_id}")
        short = not explanation.total or any(reason.startswith("Insufficient") for reason in explanation.reasons)
        reason = self.vclusters.quota_reason(vc, work) if short else ""
        if not reason or explanation.group_reason:
            return explanation
        return msgspec.structs.replace(explanation, message=f"{reason}; {explanation.message}", group_reason=reason)

    def _decision_of(self, actor: ActorState) -> Placed | Pending:
        actor_id = actor.request.actor_id
        if actor.status == "placed" and actor.node_id is not None:
            return Placed(actor_id, actor.node_id, bundle_index=actor.bundle[1] if actor.bundle else -1)
        return Pending.of(actor_id, self._explain(self._scope(actor_id), self._work_of(actor_id)))

    # placement groups

    def create_placement_group(self, request: PlacementGroupRequest) -> Placed | Pending:
        """Reserve all bundles or none; a live id returns its current decision (another request for it: a conflict)."""
        work = CompiledGroup(request, self.rare_resources)
        existing = self._scope(request.pg_id).groups.get(request.pg_id)
        if existing is not None:
            check_same_request("pg_id", request.pg_id, existing.request, request)
            return self._group_decision(existing)
        check_new_work(request)
        self._check_scope("vcluster_id", request.vcluster_id)
        self._groups[request.pg_id] = work
        self._begin(request.pg_id)
        self._emit(PlacementGroupSubmitted(request=request))
        scope = self._scope(request.pg_id)
        group = scope.groups[request.pg_id]
        if self._try_group(group, announce=True):
            self.retries.retry_pending(wake_all=False, where=scope)
        return self._group_decision(group)

    def remove_placement_group(self, pg_id: str) -> None:
        """Release the group's reservations; actors inside it stop for good."""
        group = self._scope(pg_id).groups.get(pg_id)
        if group is None:
            raise NotFoundError(f"pg_id {pg_id!r}: no such placement group")
        self._begin(pg_id)
        self.retries.free(self._scope(pg_id), group.bundle_nodes)
        self._stop_group(pg_id, f"placement group {pg_id} removed")
        self.retries.retry_freed()

    def _stop_work(self, scope: ClusterView, reason: str) -> list[str]:
        """Stop every placement group, then every actor, of `scope` for good; the ids stopped, sorted."""
        pg_ids = sorted(scope.groups)
        for pg_id in pg_ids:
            self._stop_group(pg_id, reason)
        actor_ids = sorted(scope.actors)
        self._fail_actors(actor_ids, reason, restart=False)
        return sorted(pg_ids + actor_ids)

    def _stop_group(self, pg_id: str, reason: str) -> None:
        """Stop the actors inside a placement group for good and release its reservations."""
        group = self._scope(pg_id).groups[pg_id]
        self._fail_actors(sorted(group.actors), reason, restart=False)
        self._emit(PlacementGroupRemoved(pg_id=pg_id))

    def _lose_bundles(self, lost: list[tuple[str, int]], reason: str) -> None:
        by_group: dict[str, list[int]] = {}
        for pg_id, index in lost:
            by_group.setdefault(pg_id, []).append(index)
        for pg_id, indices in sorted(by_group.items()):
            group = self._scope(pg_id).groups[pg_id]
            if group.request.strategy == "STRICT_PACK":  # one node holds them all: re-place the whole group
                indices = [i for i, node_id in enumerate(group.bundle_nodes) if node_id is not None]  # noqa: PLW2901
            gone = {(pg_id, i) for i in indices}
            scope = self._scope(pg_id)
            self._fail_actors([a for a in sorted(group.actors) if scope.actors[a].bundle in gone], reason)
            self._emit(PlacementGroupBundlesLost(pg_id=pg_id, bundle_indices=sorted(indices), reason=reason))

    def _try_group(self, group: GroupState, *, announce: bool) -> bool:
        """Reserve the group now if it can be; otherwise it waits (drawing nothing, as `_try_actor`)."""
        pg_id = group.request.pg_id
        drawn = self._prng.state
        kept = {i: node_id for i, node_id in enumerate(group.bundle_nodes) if node_id is not None}
        option = group.option if kept else None
        scope = self._scope(pg_id)
        where = f"virtual cluster {scope.scope_id}" if scope.scope_id else ""
        decision = decide_group(scope, self._group_of(pg_id), self._prng, self.sample_size, kept, option, where)
        if isinstance(decision, tuple):
            index, nodes = decision
            self._emit(PlacementGroupPlaced(pg_id=pg_id, bundle_nodes=nodes, option=index))
            return True
        self._prng.state = drawn
        if announce or group.explanation is None:
            self._emit(PlacementGroupPending(pg_id=pg_id, explanation=decision))
        return False

    def _group_decision(self, group: GroupState) -> Placed | Pending:
        pg_id = group.request.pg_id
        if group.status == "placed":
            return Placed(pg_id, bundle_nodes=[n for n in group.bundle_nodes if n is not None])
        kept = {i: node_id for i, node_id in enumerate(group.bundle_nodes) if node_id is not None}
        scope = self._scope(pg_id)
        decision = decide_group(
            scope,
            self._group_of(pg_id),
            SplitMix64(self.seed),
            self.sample_size,
            kept,
            group.option if kept else None,
            f"virtual cluster {scope.scope_id}" if scope.scope_id else "",
        )
        explanation = decision if not isinstance(decision, tuple) else group.explanation
        assert explanation is not None, "a pending group always has an explanation"
        return Pending.of(pg_id, explanation, kind="placement_group")

    # virtual clusters

    def create_virtual_cluster(
        self, vc_id: str, spec: VirtualCluster, parent: str | None = None, priority: int = 0
    ) -> Admitted | Queued:
        """Reserve the cluster's minimum from `parent` (None: the root) all at once, or queue it until it can be.

        Asking again for a live cluster with the same spec, parent and priority returns where it stands.
        """
        return self.vclusters.create(vc_id, spec, parent, priority)

    def admission(self, vc_id: str) -> Admitted | Queued:
        """Where a cluster stands: admitted with its virtual nodes, or queued with the reason and its position."""
        return self.vclusters.admission(vc_id)

    def destroy_virtual_cluster(self, vc_id: str, force: bool = False) -> Destroyed:
        """Give the cluster's (and its children's) resources back; live work refuses it unless `force` stops it."""
        return self.vclusters.destroy_requested(vc_id, force)

    def virtual_cluster(self, vc_id: str) -> VirtualClusterInfo:
        """The cluster's spec, state, resources (total, max, available), virtual nodes, children and parent."""
        return self.vclusters.info(vc_id)

    def virtual_clusters(self) -> list[VirtualClusterInfo]:
        """Every virtual cluster, parents before children (a queued one with the reason it was queued with)."""
        return self.vclusters.infos()

    # introspection

    def placements(self, vcluster_id: str | None = None) -> dict[str, str]:
        """Actor id -> node id for every live placed actor (with `vcluster_id`: only that cluster's)."""
        return {
            actor_id: actor.node_id
            for scope in self._scopes_of(vcluster_id)
            for actor_id, actor in scope.actors.items()
            if actor.status == "placed" and actor.node_id is not None
        }

    def placement_groups(self, vcluster_id: str | None = None) -> dict[str, list[str]]:
        """Placement group id -> node per bundle, for every placed group (with `vcluster_id`: that cluster's)."""
        return {
            pg_id: [n or "" for n in group.bundle_nodes]
            for scope in self._scopes_of(vcluster_id)
            for pg_id, group in scope.groups.items()
            if group.status == "placed"
        }

    def pending(self, vcluster_id: str | None = None) -> list[Pending]:
        """Every waiting actor and placement group, in queue order, with a fresh explanation."""
        found = []
        for scope in self._scopes_of(vcluster_id):
            for work_id in sorted(scope.pending, key=self.retries.queue_key):
                actor = scope.actors.get(work_id)
                decision = (
                    self._decision_of(actor) if actor is not None else self._group_decision(scope.groups[work_id])
                )
                if isinstance(decision, Pending):
                    found.append(decision)
        return found

    def nodes(self, vcluster_id: str | None = None) -> list[VirtualNodeInfo]:
        """The nodes work can see: physical nodes at the root, the cluster's virtual nodes inside one."""
        if vcluster_id:
            vc = self.vclusters.get(vcluster_id)
            return node_infos(vc.scope, vc)
        return node_infos(self._view, None)

    def _scopes_of(self, vcluster_id: str | None) -> list[ClusterView]:
        if vcluster_id:
            return [self.vclusters.get(vcluster_id).scope]
        return scopes(self._view)

    def decision(self, work_id: str, kind: str = "actor") -> Placed | Pending:
        """The current decision for a live actor (or, with `kind="placement_group"`, a placement group)."""
        if kind == "placement_group":
            group = self._scope(work_id).groups.get(work_id)
            if group is None:
                raise NotFoundError(f"pg_id {work_id!r}: no such placement group")
            return self._group_decision(group)
        return self._decision_of(self._actor(work_id))


_ACTOR_LEAVES: Final[TypeTest[ActorRemoved | ActorFailed]] = TypeTest(ActorRemoved, ActorFailed)
_GROUP_REMOVED: Final[TypeTest[PlacementGroupRemoved]] = TypeTest(PlacementGroupRemoved)
_CLUSTER_DESTROYED: Final[TypeTest[VirtualClusterDestroyed]] = TypeTest(VirtualClusterDestroyed)
"""What `_fold_view` asks of every event (see `type_tests`)."""
_WORK_OF: Final[dict[type, Callable[[Any], str]]] = {
    ActorSubmitted: lambda event: event.request.actor_id,
    PlacementGroupSubmitted: lambda event: event.request.pg_id,
    **dict.fromkeys((ActorPlaced, ActorPending, ActorFailed, ActorRemoved), attrgetter("actor_id")),
    **dict.fromkeys(
        (PlacementGroupPlaced, PlacementGroupPending, PlacementGroupBundlesLost, PlacementGroupRemoved),
        attrgetter("pg_id"),
    ),
}
"""Event type -> the actor or placement group an event of it is about (the waiting index files it again)."""


def holding_work(dead: dict[str, NodeState]) -> list[str]:
    """The tombstones among `dead` that still hold work to fail, in id order: those already emptied are skipped, so a
    cluster that lost thousands of nodes over its life does not walk them all again at each death."""
    return sorted(node_id for node_id, node in dead.items() if node.actors or node.bundles)
