"""Node liveness on the labels service's clock: silent nodes become unreachable, then dead; heard again, back."""

from __future__ import annotations

import logging

import anyio
import nats.errors

from schemas import NodeDeclaredDead, NodeReachable, NodeUnreachable
from services.core.labels import utc_text
from services.core.liveness import LivenessEvent, liveness_event
from services.labels.view import LabelsView
from services.runtime.commands import CommandDesk, Outcome
from services.runtime.service import Shell

log = logging.getLogger("corral.labels")


class Liveness:
    """Judges every node's silence a few times a heartbeat timeout, but only silences this service could have
    heard: a disconnection from NATS, or a stall of this process longer than two ticks, restarts every count
    (`LabelsView.grace_all`), so an outage of the bus or a busy machine never declares a healthy node dead."""

    def __init__(self, shell: Shell, desk: CommandDesk, view: LabelsView, timeout: float, grace: float) -> None:
        self.desk, self.view, self.timeout, self.grace = desk, view, timeout, grace
        self.connected = True
        shell.bus.connection_listeners.append(self.connection_changed)

    def connection_changed(self, connected: bool) -> None:
        """From the bus: NATS lost or back; either way, nobody could be heard meanwhile."""
        self.connected = connected
        self.view.grace_all()

    @property
    def tick(self) -> float:
        """How often silences are judged: a quarter of the shorter of the timeout and the grace."""
        return min(self.timeout, self.grace) / 4

    async def run(self) -> None:
        """Judge every node each tick (after catching up with the log), appending what its silence calls for.

        The start-up replay's folds started every clock while no heartbeat could be heard: they start again now."""
        self.view.grace_all()
        clock = self.view.clock
        last = clock()
        while True:
            await anyio.sleep(self.tick)
            now = clock()
            stalled, last = now - last > 2 * self.tick, now
            if not self.connected or stalled:
                self.view.grace_all()
                continue
            try:
                for node_id in sorted(self.view.cluster.nodes):
                    if self._due(node_id):
                        await self.desk.execute(lambda node_id=node_id: self._append(node_id))  # type: ignore[misc]
            except (TimeoutError, nats.errors.Error) as error:  # the bus went away meanwhile
                log.warning("node liveness: %s; every node's silence counts from now", error or type(error).__name__)
                self.view.grace_all()

    def _due(self, node_id: str) -> bool:
        """Whether the node's silence calls for an event; a bug met judging one node leaves the others judged."""
        try:
            return self._judge(node_id) is not None
        except Exception:  # a bug, logged with its trace; the loop and the service go on
            log.exception("node liveness: node %s could not be judged", node_id)
            return False

    def _judge(self, node_id: str) -> list[LivenessEvent] | None:
        event = liveness_event(self.view.cluster, node_id, self.view.silence(node_id), self.timeout, self.grace)
        return None if event is None else [event]

    def _append(self, node_id: str) -> Outcome:
        """Run once the desk folded the log to its end: the node may have been heard from meanwhile."""
        if not self.connected:
            return f"node {node_id}: not judged while NATS is away"
        outcome = self._judge(node_id)
        if outcome is None:
            return f"node {node_id}: nothing changed"
        for event in outcome:
            log.warning("node %s %s", node_id, _said(event))
        return outcome


def _said(event: LivenessEvent) -> str:
    if isinstance(event, NodeUnreachable):
        return f"is unreachable (last heard {utc_text(event.last_heard)}): no new work lands on it"
    if isinstance(event, NodeReachable):
        return f"is back after {event.unreachable_for:.1f}s unreachable"
    if isinstance(event, NodeDeclaredDead):
        return f"is declared dead after {event.unreachable_for:.1f}s unreachable ({event.dead_for:g}s dead)"
    return f"is dead: {event.reason}"
