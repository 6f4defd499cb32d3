"""Wiring of the labels service: commands, heartbeats, liveness, queries."""

from __future__ import annotations

import contextlib
import logging
import time

import anyio
import nats.errors
from nats.aio.msg import Msg

from schemas import subjects as s
from schemas.commands import Heartbeat, RegisterNode, RemoveNode, SetLabels
from schemas.queries import ActorsQuery, NodesQuery
from schemas.replies import Rejected
from services.core.errors import CodecError
from services.labels.handlers import LabelsHandlers
from services.labels.view import LabelsView
from services.runtime.bus import answerable
from services.runtime.codec import decode, encode
from services.runtime.commands import CommandDesk, Outcome
from services.runtime.queries import query_handler
from services.runtime.service import Shell, service_shell
from services.runtime.settings import Settings

log = logging.getLogger("corral.labels")


async def main(settings: Settings) -> None:
    """Serve until cancelled."""
    view = LabelsView(time.monotonic, settings.seed)
    async with service_shell(settings, "labels", view) as shell:
        handlers = LabelsHandlers(view, settings.rare_resources, settings.heartbeat_interval)
        desk = CommandDesk(shell.bus, shell.follower, "labels", before=shell.caught_up)
        routes = {
            s.REGISTER_NODE: desk.handler(RegisterNode, handlers.register),
            s.SET_LABELS: desk.handler(SetLabels, handlers.set_labels),
            s.REMOVE_NODE: desk.handler(RemoveNode, handlers.remove),
            s.NODES_QUERY: query_handler(NodesQuery, view.nodes, before=shell.caught_up, pager=shell.pager),
            s.ACTORS_QUERY: query_handler(ActorsQuery, view.actors, before=shell.caught_up, pager=shell.pager),
        }
        await shell.serve(routes)
        shell.subscriptions.append(await _listen_heartbeats(shell, view))
        async with anyio.create_task_group() as group:
            group.start_soon(shell.follower.run)
            group.start_soon(shell.follower.watch_log)
            group.start_soon(Liveness(shell, desk, handlers, settings.heartbeat_timeout).run)


async def _listen_heartbeats(shell: Shell, view: LabelsView) -> object:
    async def on_heartbeat(msg: Msg) -> None:
        """Note a live node's heartbeat; tell the agent of a node the log does not hold to register it again."""
        try:
            node_id = decode(msg.data, Heartbeat).node_id
        except CodecError as error:
            log.warning("heartbeat ignored: %s", error)
            return
        if not view.heard_from(node_id) and answerable(msg.reply):
            unknown = Rejected(f"node {node_id} is not a live node of the event log: register it again", "not_found")
            with contextlib.suppress(nats.errors.Error):
                await msg.respond(encode(unknown))

    return await shell.bus.nc.subscribe(s.HEARTBEATS, queue="labels", cb=on_heartbeat)


class Liveness:
    """Declares dead the nodes not heard from for `timeout`, but only while this service could have heard them.

    A disconnection from NATS, or a stall of this process (a long replay after a reconnect, say) longer than a
    quarter of the timeout, gives every node a fresh grace period: an outage of the bus never kills healthy nodes.
    """

    def __init__(self, shell: Shell, desk: CommandDesk, handlers: LabelsHandlers, timeout: float) -> None:
        self.desk, self.handlers, self.timeout = desk, handlers, timeout
        self.view = handlers.view
        self.connected = True
        shell.bus.connection_listeners.append(self.connection_changed)

    def connection_changed(self, connected: bool) -> None:
        """From the bus: NATS lost or back; either way, nobody could be heard meanwhile."""
        self.connected = connected
        self.view.grace_all()

    async def run(self) -> None:
        """Every quarter of the timeout, declare the silent nodes dead (after catching up with the log)."""
        tick = self.timeout / 4
        clock = self.view.clock
        last = clock()
        while True:
            await anyio.sleep(tick)
            now = clock()
            stalled, last = now - last > 2 * tick, now
            if not self.connected or stalled:
                self.view.grace_all()
                continue
            try:
                for node_id in self.view.overdue(self.timeout):
                    await self.desk.execute(lambda node_id=node_id: self._expire(node_id))  # type: ignore[misc]
            except (TimeoutError, nats.errors.Error) as error:  # the bus went away meanwhile
                log.warning("node liveness: %s; every node gets a fresh grace period", error or type(error).__name__)
                self.view.grace_all()

    def _expire(self, node_id: str) -> Outcome:
        """Run after the desk folded the log to its end: the node may have been heard from meanwhile."""
        if not self.connected or node_id not in self.view.overdue(self.timeout):
            return f"node {node_id} was heard from"
        log.warning("node %s missed heartbeats for %.1fs: it is dead", node_id, self.timeout)
        return self.handlers.expire(node_id)
