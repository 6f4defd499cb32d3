"""What each event means, in one line, and which events touch an actor, a node or a virtual cluster."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from schemas import events as e
from schemas.events import AnyEvent
from services.core.amounts import format_amounts
from services.core.labels import utc_text


def _placed(event: e.ActorPlaced) -> str:
    bundle = f" in bundle {event.bundle_index} of {event.placement_group_id}" if event.placement_group_id else ""
    asked = f" as submitted ({format_amounts(event.request.resources)})" if event.request is not None else ""
    return f"actor {event.actor_id} placed on {event.node_id}{bundle}{asked}"


def _failed(event: e.ActorFailed) -> str:
    where = f" on {event.node_id}" if event.node_id else ""
    after = "it restarts" if event.will_restart else "for good"
    return f"actor {event.actor_id} failed{where} ({event.reason}): {after}"


def _taints(event: e.TaintsChanged) -> str:
    taints = ", ".join(f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}" for t in event.taints)
    return f"node {event.node_id} taints are now {taints or 'none'}"


def _registered(event: e.NodeRegistered) -> str:
    if event.removed_before is None:
        return f"node {event.node_id} joined with {format_amounts(event.resources)}"
    return (
        f"node {event.node_id} registered again (it was removed {event.removed_before:.0f}s before: its agent still "
        f"ran) with {format_amounts(event.resources)}"
    )


MEANINGS: dict[type[Any], Callable[[Any], str]] = {
    e.NodeRegistered: _registered,
    e.NodeDied: lambda ev: (
        f"node {ev.node_id} "
        + ("removed (the operator's labels and taints forgotten)" if ev.removed else "died")
        + (f": {ev.reason}" if ev.reason else "")
    ),
    e.NodeUnreachable: lambda ev: (
        f"node {ev.node_id} unreachable since {utc_text(ev.last_heard)} (missed heartbeats): no new work lands on it"
    ),
    e.NodeReachable: lambda ev: f"node {ev.node_id} reachable again after {ev.unreachable_for:.1f}s: it keeps its work",
    e.NodeDeclaredDead: lambda ev: (
        f"node {ev.node_id} declared dead after {ev.unreachable_for:.0f}s unreachable: "
        + (
            "work not tolerating corral.io/unreachable fails"
            if ev.dead_for == 0
            else f"tolerations of {ev.dead_for:g}s lapsed"
        )
    ),
    e.NodeLabelsChanged: lambda ev: (
        f"node {ev.node_id} relabelled: " + (", ".join(f"{k}={v}" for k, v in sorted(ev.labels.items())) or "no labels")
    ),
    e.TaintsChanged: _taints,
    e.ActorSubmitted: lambda ev: f"actor {ev.request.actor_id} submitted ({format_amounts(ev.request.resources)})",
    e.ActorPlaced: _placed,
    e.ActorPending: lambda ev: f"actor {ev.actor_id} pending: {ev.explanation.message}",
    e.ActorFailed: _failed,
    e.ActorRemoved: lambda ev: f"actor {ev.actor_id} removed (finished or deleted)",
    e.PlacementGroupSubmitted: lambda ev: (
        f"placement group {ev.request.pg_id} submitted ({len(ev.request.bundles)} bundle(s), {ev.request.strategy})"
    ),
    e.PlacementGroupPlaced: lambda ev: f"placement group {ev.pg_id} placed on {', '.join(ev.bundle_nodes)}",
    e.PlacementGroupPending: lambda ev: f"placement group {ev.pg_id} pending: {ev.explanation.message}",
    e.PlacementGroupBundlesLost: lambda ev: (
        f"placement group {ev.pg_id} lost bundle(s) {', '.join(map(str, ev.bundle_indices))} ({ev.reason})"
    ),
    e.PlacementGroupRemoved: lambda ev: f"placement group {ev.pg_id} removed",
    e.SchedulerElected: lambda ev: f"scheduler {ev.instance} leads (epoch {ev.epoch})",
    e.VirtualClusterRequested: lambda ev: f"virtual cluster {ev.vc_id} requested under {ev.parent or 'the root'}",
    e.VirtualClusterQueued: lambda ev: f"virtual cluster {ev.vc_id} queued: {ev.reason}",
    e.VirtualNodesReserved: lambda ev: (
        f"virtual cluster {ev.vc_id} reserved "
        + (", ".join(f"{g.vnode_id} on {g.parent_node}" for g in ev.vnodes) or "no virtual nodes")
    ),
    e.VirtualNodeResized: lambda ev: (
        f"virtual node {ev.vnode_id} of {ev.vc_id} on {ev.parent_node} now holds "
        f"{format_amounts(ev.resources) if ev.resources else 'nothing (gone)'}"
    ),
    e.VirtualClusterDestroyRequested: lambda ev: (
        f"virtual cluster {ev.vc_id} to be destroyed" + (" (forced)" if ev.force else "")
    ),
    e.VirtualClusterDestroyed: lambda ev: (
        f"virtual cluster {ev.vc_id} destroyed" + (f", stopping {', '.join(ev.stopped)}" if ev.stopped else "")
    ),
    e.AutoscalerElected: lambda ev: f"autoscaler {ev.instance} leads (epoch {ev.epoch})",
    e.NodesLaunchRequested: lambda ev: f"autoscaler launches {len(ev.launch_ids)} {ev.node_type} node(s): {ev.reason}",
    e.LaunchesNominated: lambda ev: (
        f"autoscaler counts {sum(len(work) for work in ev.nominated.values())} more piece(s) of work on launch(es) "
        f"{', '.join(sorted(ev.nominated))}"
        if ev.nominated
        else f"autoscaler holds room on existing node(s) "
        f"{', '.join(sorted({node_id for on in ev.existing.values() for node_id in on}))} "
        f"for work of launch(es) {', '.join(sorted(ev.existing))}"
    ),
    e.NodeLaunchFailed: lambda ev: f"launch {ev.launch_id} failed: {ev.reason}",
    e.NodeDrainStarted: lambda ev: f"node {ev.node_id} drains before scale-down: {ev.reason}",
    e.NodeDrainCancelled: lambda ev: f"node {ev.node_id} stays (drain cancelled): {ev.reason}",
    e.NodeTerminationRequested: lambda ev: f"node {ev.node_id} terminated: {ev.reason}",
}
"""One line per event type: what the event says happened."""


def meaning(event: AnyEvent) -> str:
    """What the event says happened, in one line."""
    return " ".join(MEANINGS[type(event)](event).split())


CAUSES: dict[type[Any], Callable[[Any], str]] = {
    e.NodeRegistered: lambda ev: f"{ev.node_id} was added",
    e.NodeDied: lambda ev: f"{ev.node_id} died",
    e.NodeUnreachable: lambda ev: f"{ev.node_id} became unreachable",
    e.NodeReachable: lambda ev: f"{ev.node_id} was heard again",
    e.NodeDeclaredDead: lambda ev: f"{ev.node_id} was declared dead",
    e.NodeLabelsChanged: lambda ev: f"{ev.node_id} was relabelled",
    e.TaintsChanged: lambda ev: f"the taints of {ev.node_id} changed",
    e.ActorRemoved: lambda ev: f"{ev.actor_id} left",
    e.PlacementGroupRemoved: lambda ev: f"{ev.pg_id} left",
}
"""What other work reacts to, as the clause `placed on n4 after <it>` ends with."""


def cause_phrase(event: AnyEvent) -> str:
    """The clause naming what `event` did, when work placed or failed in reaction to it ("" otherwise)."""
    phrase = CAUSES.get(type(event))
    return phrase(event) if phrase is not None else ""


def work_id(event: AnyEvent) -> str:
    """The actor or placement group an event is about ("" for none)."""
    if isinstance(event, e.ActorSubmitted):
        return event.request.actor_id
    if isinstance(event, e.PlacementGroupSubmitted):
        return event.request.pg_id
    return str(getattr(event, "actor_id", "") or getattr(event, "pg_id", ""))


def _nodes(event: AnyEvent) -> set[str]:
    found = {getattr(event, "node_id", "")}
    if isinstance(event, e.PlacementGroupPlaced):
        found.update(event.bundle_nodes)
    elif isinstance(event, e.VirtualNodesReserved):
        found.update(grant.parent_node for grant in event.vnodes)
    elif isinstance(event, e.VirtualNodeResized):
        found.update((event.parent_node, event.vnode_id))
    elif isinstance(event, e.ActorPlaced):
        found.update(size.parent_node for size in event.resized)
    return found - {""}


def _vcluster_of(event: AnyEvent) -> str:
    request = getattr(event, "request", None)
    if request is not None:
        return str(request.vcluster_id or "")
    return str(getattr(event, "vc_id", ""))


class Touches:
    """Whether an event touches the given actor, node and virtual cluster (all that are given); fed the log in
    order, it remembers the work submitted to the virtual cluster, so their later events count too."""

    def __init__(self, actor_id: str | None = None, node_id: str | None = None, vcluster_id: str | None = None):
        self.actor_id, self.node_id, self.vcluster_id = actor_id, node_id, vcluster_id
        self._vc_work: set[str] = set()

    def __call__(self, event: AnyEvent) -> bool:
        """Whether `event` touches every one of the given ids."""
        work = work_id(event)
        if self.actor_id is not None and self.actor_id != work and not self._names(event, self.actor_id):
            return False
        if self.node_id is not None and self.node_id not in _nodes(event):
            return False
        return self.vcluster_id is None or self._in_vcluster(event, work, self.vcluster_id)

    def _in_vcluster(self, event: AnyEvent, work: str, vc_id: str) -> bool:
        if _vcluster_of(event) == vc_id and work:
            self._vc_work.add(work)
        if isinstance(event, e.VirtualClusterDestroyed) and event.vc_id == vc_id:
            return True
        touched = _vcluster_of(event) == vc_id or work in self._vc_work
        if isinstance(event, e.ActorPlaced):
            touched |= any(size.vc_id == vc_id for size in event.resized)
        gone = isinstance(event, e.ActorRemoved | e.PlacementGroupRemoved)
        if gone or (isinstance(event, e.ActorFailed) and not event.will_restart):
            self._vc_work.discard(work)
        return touched

    @staticmethod
    def _names(event: AnyEvent, work: str) -> bool:
        """Whether an event about several pieces of work lists `work`."""
        if isinstance(event, e.VirtualClusterDestroyed):
            return work in event.stopped
        if isinstance(event, e.NodesLaunchRequested):
            return work in event.work
        if isinstance(event, e.LaunchesNominated):
            held = (put for on in event.existing.values() for put in on.values())
            return any(work in nominated for nominated in (*event.nominated.values(), *held))
        return False
