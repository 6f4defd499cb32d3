"""One round of the autoscaler: the view and the time in, the decisions (events) out.

Launches that did not register in time fail; the planner's launches are asked for; idle launched nodes are drained
(tainted), then terminated once the taint is in the log and they are still idle; a draining node that got work
stays. Only nodes of the autoscaler's own launches are ever drained, never below a type's `min_workers`.

A node's idle time is counted from the log (`Launch.idle_since`, the time the log stored the event after which it
held no work), so an autoscaler started again, or another instance taking over, goes on counting where the last one
was. `now` must be on the same clock: the nats-server's (see `clock.ServerClock`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from schemas import (
    AnyEvent,
    NodeDrainCancelled,
    NodeDrainStarted,
    NodeLaunchFailed,
    NodesLaunchRequested,
    NodeTerminationRequested,
)
from services.autoscaler.split import existing_parts, launch_parts, message_budget, nomination_parts
from services.core.autoscale import Fleet, ScalePlan, ScalingConfig, plan
from services.core.autoscale import Launch as PlannedLaunch
from services.core.labels import SCALE_DOWN_TAINT
from services.core.state import ClusterView, NodeState, Resources
from services.core.state.model import Launch
from services.core.state.nominations import room_to_hold
from services.runtime.codec import MAX_BYTES
from services.runtime.settings import Settings

DRAIN_REASON = "idle for {idle:.0f}s (idle_timeout_s {timeout:g})"
DEFAULT_BUDGET = message_budget(Settings.max_message_bytes, MAX_BYTES)
"""The most bytes one decision encodes to with the default settings and server (see `split.message_budget`)."""


def event_id() -> str:
    """A fresh id for one autoscaler event (its `Nats-Msg-Id`)."""
    return f"autoscaler-{uuid.uuid4().hex}"


def node_id_of(node_type: str, launch_id: str) -> str:
    """The id a node of the `local` provider registers with."""
    return f"{node_type}-{launch_id}"


def busy(view: ClusterView, node: NodeState) -> str:
    """What holds a node ("" when nothing): actors, reserved bundles, virtual nodes carved from it."""
    held = [
        f"{len(node.actors)} actor(s)" if node.actors else "",
        f"{len(node.bundles)} bundle(s)" if node.bundles else "",
        f"{len(view.carved[node.node_id])} virtual node(s)" if view.carved.get(node.node_id) else "",
    ]
    return ", ".join(part for part in held if part)


def scale_down_tainted(node: NodeState) -> bool:
    """Whether the node carries the scale-down taint."""
    return any(taint.key == SCALE_DOWN_TAINT for taint in node.taints)


def idle_for(launch: Launch, now: float) -> float:
    """Seconds the launch's node has held no work at time `now` (0 when it holds some)."""
    return 0.0 if launch.idle_since is None else max(0.0, now - launch.idle_since)


def backed_off(view: ClusterView, config: ScalingConfig, now: float) -> frozenset[str]:
    """Types whose newest launch failed less than `launch_timeout_s` ago: they wait before the next try."""
    newest: dict[str, Launch] = {}
    for launch in view.launches.values():
        if launch.requested_at >= newest.get(launch.node_type, launch).requested_at:
            newest[launch.node_type] = launch
    return frozenset(
        name
        for name, launch in newest.items()
        if launch.state == "failed" and now - launch.changed_at < config.launch_timeout_s
    )


def fleet_of(view: ClusterView, config: ScalingConfig, now: float) -> Fleet:
    """What the autoscaler has per type: registered live nodes, launches not registered yet, backed-off types."""
    running: dict[str, list[str]] = {}
    launching: dict[str, list[str]] = {}
    for launch in view.launches.values():
        if launch.state == "launching":
            launching.setdefault(launch.node_type, []).append(launch.launch_id)
        elif launch.state in ("registered", "draining") and launch.node_id in view.nodes:
            running.setdefault(launch.node_type, []).append(launch.node_id)
    return Fleet(
        running={name: tuple(sorted(ids)) for name, ids in running.items()},
        launching={name: tuple(sorted(ids)) for name, ids in launching.items()},
        backed_off=backed_off(view, config, now),
    )


def _numbered(view: ClusterView, planned: ScalePlan) -> list[tuple[PlannedLaunch, list[str]]]:
    """The plan's launches with the fresh launch ids their nodes get, numbered from the view's count."""
    numbered = []
    number = view.launch_count
    for launch in planned.launches:
        numbered.append((launch, [f"L{number + k + 1}" for k in range(launch.count)]))
        number += launch.count
    return numbered


@dataclass
class Round:
    """What one round decided: the events to append, and the plan (kept for status and `why`)."""

    events: list[AnyEvent]
    plan: ScalePlan | None
    """None in a round that only failed launches."""
    fleet: Fleet


class Decider:
    """Decides rounds for one configuration."""

    def __init__(
        self, config: ScalingConfig, rare_resources: tuple[str, ...], interval: float, budget: int = DEFAULT_BUDGET
    ) -> None:
        self.config, self.rare_resources, self.interval = config, rare_resources, interval
        self.budget = budget
        """The most bytes one decision may encode to: bigger ones are split (see `split`)."""

    def decide(self, view: ClusterView, now: float, failures: dict[str, str]) -> Round:
        """One round at time `now`; `failures` maps launch ids to why their provider failed them.

        Failed launches are decided alone: the next round plans on the view that folded them (their type backed off).
        """
        fleet = fleet_of(view, self.config, now)
        failed = self.failed(view, now, failures)
        if failed:
            return Round(failed, None, fleet)
        planned = plan(view, self.config, fleet, self.rare_resources)
        decided = [
            *self.launches(view, planned, now),
            *self.nominations(view, planned),
            *self.existing(view, planned),
            *self.scale_down(view, fleet, now),
        ]
        return Round(decided, planned, fleet)

    def failed(self, view: ClusterView, now: float, failures: dict[str, str]) -> list[AnyEvent]:
        """Launches not registered within `launch_timeout_s`, or failed by their provider."""
        timeout = self.config.launch_timeout_s
        found: list[AnyEvent] = []
        for launch_id, launch in sorted(view.launches.items()):
            if launch.state != "launching":
                continue
            if launch_id in failures:
                reason = failures[launch_id]
            elif now - launch.requested_at > timeout:
                reason = f"not registered within launch_timeout_s ({timeout:g}s)"
            else:
                continue
            found.append(NodeLaunchFailed(event_id=event_id(), launch_id=launch_id, reason=reason, failed_at=now))
        return found

    def launches(self, view: ClusterView, planned: ScalePlan, now: float) -> list[AnyEvent]:
        """The plan's launches, with fresh launch ids numbered from the view's count (a launch too big for one
        message in several events)."""
        found: list[AnyEvent] = []
        for launch, ids in _numbered(view, planned):
            template = NodesLaunchRequested(
                node_type=launch.node_type, launch_ids=[], reason=launch.reason, requested_at=now
            )
            per_node = launch.per_node or ((),) * launch.count
            nominated = launch.nominated or ({},) * launch.count
            nodes = [
                (launch_id, work, {work_id: dict(amount) for work_id, amount in put.items()})
                for launch_id, work, put in zip(ids, per_node, nominated, strict=True)
            ]
            found += launch_parts(template, nodes, self.budget, event_id)
        return found

    def nominations(self, view: ClusterView, planned: ScalePlan) -> list[AnyEvent]:
        """The pending work the plan counts on nodes still launching that their launches are not nominated for
        yet (or for other room): those nodes are nominated for it too."""
        new: dict[str, dict[str, Resources]] = {}
        for launch_id, put in sorted(planned.counted_on.items()):
            launch = view.launches.get(launch_id)
            if launch is None or launch.state != "launching":
                continue
            for work_id, amount in put.items():
                room = room_to_hold(amount)
                if work_id in view.pending and room and launch.nominated.get(work_id) != room:
                    new.setdefault(launch_id, {})[work_id] = room
        return list(nomination_parts(new, self.budget, event_id))

    def existing(self, view: ClusterView, planned: ScalePlan) -> list[AnyEvent]:
        """The room the plan puts on existing nodes for work it also puts on launches (a placement group mixing
        existing free room and new nodes), held there with the first of those launches (new ones first; asked for
        after `launches` and `nominations`, which nominate them for that work; room a node holds for that work already,
        its own launch's or an earlier one's, is not asked for again, so a steady round appends nothing)."""
        first: dict[str, str] = {}
        for launch, ids in _numbered(view, planned):
            for launch_id, put in zip(ids, launch.nominated, strict=False):
                for work_id in put:
                    first.setdefault(work_id, launch_id)
        for launch_id, put in sorted(planned.counted_on.items()):
            for work_id in put:
                first.setdefault(work_id, launch_id)
        held: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
        for node_id, put in sorted(planned.existing.items()):
            for work_id, amount in sorted(put.items()):
                if work_id in view.held.get(node_id, {}):
                    continue  # a registered node launched for it, or one an earlier round's launch holds, holds it
                room = room_to_hold(amount)
                holder = first.get(work_id, "")
                known = view.launches.get(holder)
                if holder and room and (known is None or known.existing.get(node_id, {}).get(work_id) != room):
                    held.setdefault(holder, {}).setdefault(node_id, {})[work_id] = room
        return list(existing_parts(held, self.budget, event_id))

    def scale_down(self, view: ClusterView, fleet: Fleet, now: float) -> list[AnyEvent]:
        """Drain idle launched nodes (keeping `min_workers`), cancel drains that got work, terminate drained ones."""
        kept = {
            name: sum(1 for n in ids if view.launches[view.launched_nodes[n]].state == "registered")
            for name, ids in fleet.running.items()
        }
        found: list[AnyEvent] = []
        for node_id, launch_id in sorted(view.launched_nodes.items()):
            launch, node = view.launches[launch_id], view.nodes.get(node_id)
            if node is None:
                continue
            holding = busy(view, node)
            if launch.state == "draining":
                if holding:
                    reason = f"work landed on it while it drained ({holding})"
                    found.append(
                        NodeDrainCancelled(
                            event_id=event_id(), node_id=node_id, launch_id=launch_id, reason=reason, at=now
                        )
                    )
                elif scale_down_tainted(node) and now - launch.changed_at >= self.interval:
                    found.append(
                        NodeTerminationRequested(
                            event_id=event_id(),
                            node_id=node_id,
                            launch_id=launch_id,
                            reason=launch.note,
                            requested_at=now,
                        )
                    )
                continue
            if launch.state != "registered" or holding:
                continue
            node_type = self.config.node_types.get(launch.node_type)
            minimum = node_type.min_workers if node_type is not None else 0
            idle = idle_for(launch, now)
            if idle >= self.config.idle_timeout_s and kept.get(launch.node_type, 0) > minimum:
                kept[launch.node_type] -= 1
                reason = DRAIN_REASON.format(idle=idle, timeout=self.config.idle_timeout_s)
                found.append(
                    NodeDrainStarted(event_id=event_id(), node_id=node_id, launch_id=launch_id, reason=reason, at=now)
                )
        return found
