"""What the autoscaler tells: its status (demand, node types, recent launches and terminations) and what it does
about one piece of pending work (`corral why`)."""

from __future__ import annotations

from typing import Protocol

from schemas.queries import (
    AutoscalerStatusQuery,
    AutoscalerStatusReply,
    AutoscalerWhyQuery,
    AutoscalerWhyReply,
    DemandGroupInfo,
    LaunchInfo,
    NodeTypeStatus,
)
from services.autoscaler.clock import ServerClock
from services.autoscaler.view import AutoscalerView
from services.core.autoscale import Fleet, ScalePlan, ScalingConfig
from services.core.state.model import Launch
from services.runtime.settings import Settings


class Scaling(Protocol):
    """What the reports read of the leading autoscaler."""

    view: AutoscalerView
    config: ScalingConfig
    settings: Settings
    clock: ServerClock
    plan: ScalePlan | None
    """The last round's plan (None before the first)."""
    fleet: Fleet


RECENT = 20
"""Launches and terminations a status lists (the newest)."""
WORK_SHOWN = 20
"""Work ids a demand group lists (the first)."""


def launch_info(launch: Launch) -> LaunchInfo:
    """A launch as the status query returns it."""
    return LaunchInfo(
        launch_id=launch.launch_id,
        node_type=launch.node_type,
        reason=launch.reason,
        requested_at=launch.requested_at,
        state=launch.state,
        work=list(launch.work),
        node_id=launch.node_id,
        note=launch.note,
        changed_at=launch.changed_at,
    )


class Reports:
    """Answers the autoscaler's queries from its view and its last round."""

    def __init__(self, autoscaler: Scaling) -> None:
        self.autoscaler = autoscaler

    def status(self, _query: AutoscalerStatusQuery) -> AutoscalerStatusReply:
        """Demand groups, node types with their counts, the newest launches and terminations."""
        scaler = self.autoscaler
        now = scaler.clock.now()
        view, plan, config = scaler.view.cluster, scaler.plan, scaler.config
        demand = [
            DemandGroupInfo(
                shape=group.describe(),
                count=group.count,
                work=list(group.work_ids[:WORK_SHOWN]),
                node_types=list(group.served_by),
                reasons=dict(group.reasons),
            )
            for group in (plan.demand if plan is not None else ())
        ]
        launches = sorted(view.launches.values(), key=lambda launch: (-launch.requested_at, launch.launch_id))
        terminated = sorted(
            (launch for launch in launches if launch.state == "terminated"), key=lambda launch: -launch.changed_at
        )
        return AutoscalerStatusReply(
            demand=demand,
            node_types=[self._type_status(name, launches, now) for name in config.node_types],
            launches=[launch_info(launch) for launch in launches[:RECENT]],
            terminations=[launch_info(launch) for launch in terminated[:RECENT]],
            sequence=scaler.view.sequence,
            now=now,
            instance=scaler.settings.instance,
        )

    def _type_status(self, name: str, launches: list[Launch], now: float) -> NodeTypeStatus:
        scaler = self.autoscaler
        node_type, fleet = scaler.config.node_types[name], scaler.fleet
        running = fleet.running.get(name, ())
        failed = [launch.changed_at for launch in launches if launch.node_type == name and launch.state == "failed"]
        backed_off = max(failed) + scaler.config.launch_timeout_s if name in fleet.backed_off and failed else 0.0
        return NodeTypeStatus(
            name=name,
            resources=dict(node_type.resources),
            min_workers=node_type.min_workers,
            max_workers=node_type.max_workers,
            running=len(running),
            launching=fleet.launching_count(name),
            idle=sum(1 for launch in launches if launch.node_id in running and launch.idle_since is not None),
            draining=sum(1 for launch in launches if launch.node_type == name and launch.state == "draining"),
            backed_off_until=backed_off,
        )

    def why(self, query: AutoscalerWhyQuery) -> AutoscalerWhyReply:
        """What the autoscaler does about one pending actor or placement group."""
        scaler = self.autoscaler
        now = scaler.clock.now()
        launching = sorted(
            (
                launch
                for launch in scaler.view.cluster.launches.values()
                if query.id in launch.work and launch.state == "launching"
            ),
            key=lambda launch: launch.launch_id,
        )
        if launching:
            ids = [launch.launch_id for launch in launching]
            age = now - min(launch.requested_at for launch in launching)
            types = sorted({launch.node_type for launch in launching})
            message = (
                f"autoscaler: launching {len(launching)} {', '.join(types)} for this "
                f"(launch {', '.join(ids)}, {age:.0f} s ago)"
            )
            return AutoscalerWhyReply(message, types[0], ids, round(age, 3))
        group = scaler.plan.group_of(query.id) if scaler.plan is not None else None
        if group is None:
            return AutoscalerWhyReply(f"autoscaler: nothing to do for {query.id} (it is not pending demand)")
        return AutoscalerWhyReply(f"autoscaler: {group.outcome()}")
