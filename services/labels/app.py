"""Wiring of the labels service: commands, heartbeats, liveness, queries."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

import anyio
from nats.aio.msg import Msg

from schemas import subjects as s
from schemas.commands import Heartbeat, RegisterNode, RemoveNode, SetLabels
from schemas.queries import ActorsQuery, NodesQuery
from services.labels.handlers import LabelsHandlers
from services.labels.view import LabelsView
from services.runtime.codec import CodecError, decode
from services.runtime.commands import CommandDesk
from services.runtime.queries import query_handler
from services.runtime.service import Shell, service_shell
from services.runtime.settings import Settings

log = logging.getLogger("corral.labels")


async def main(settings: Settings) -> None:
    """Serve until cancelled."""
    view = LabelsView(time.monotonic, settings.seed)
    async with service_shell(settings, "labels", view) as shell:
        handlers = LabelsHandlers(view, settings.rare_resources)
        desk = CommandDesk(shell.bus, shell.follower, "labels", before=shell.caught_up)
        routes: dict[str, Callable[[Msg], Awaitable[bytes]]] = {
            s.REGISTER_NODE: desk.handler(RegisterNode, handlers.register),
            s.SET_LABELS: desk.handler(SetLabels, handlers.set_labels),
            s.REMOVE_NODE: desk.handler(RemoveNode, handlers.remove),
            s.NODES_QUERY: query_handler(NodesQuery, view.nodes, before=shell.caught_up, pager=shell.pager),
            s.ACTORS_QUERY: query_handler(ActorsQuery, view.actors, before=shell.caught_up, pager=shell.pager),
        }
        for subject, handler in routes.items():
            shell.subscriptions.append(await shell.bus.serve(subject, handler, queue="labels"))
        shell.subscriptions.append(await _listen_heartbeats(shell, view))
        async with anyio.create_task_group() as group:
            group.start_soon(shell.follower.run)
            group.start_soon(_expire_silent_nodes, desk, handlers, view, settings.heartbeat_timeout)


async def _listen_heartbeats(shell: Shell, view: LabelsView) -> object:
    async def on_heartbeat(msg: Msg) -> None:
        try:
            view.heard_from(decode(msg.data, Heartbeat).node_id)
        except CodecError as error:
            log.warning("heartbeat ignored: %s", error)

    return await shell.bus.nc.subscribe(s.HEARTBEATS, queue="labels", cb=on_heartbeat)


async def _expire_silent_nodes(desk: CommandDesk, handlers: LabelsHandlers, view: LabelsView, timeout: float) -> None:
    while True:
        await anyio.sleep(timeout / 4)
        for node_id in view.overdue(timeout):
            log.warning("node %s missed heartbeats for %.1fs: it is dead", node_id, timeout)
            await desk.execute(lambda node_id=node_id: handlers.expire(node_id))  # type: ignore[misc]
