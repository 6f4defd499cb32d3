"""Wiring of the labels service: commands, heartbeats, liveness (liveness.py), queries."""

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
from services.labels.liveness import Liveness
from services.labels.view import LabelsView
from services.runtime.codec import decode, encode
from services.runtime.commands import CommandDesk
from services.runtime.connection import answerable
from services.runtime.queries import query_handler
from services.runtime.service import Shell, service_shell
from services.runtime.settings import Settings

log = logging.getLogger("corral.labels")


async def main(settings: Settings) -> None:
    """Serve until cancelled."""
    view = LabelsView(time.monotonic, settings.seed, wall_clock=time.time)
    async with service_shell(settings, "labels", view) as shell:
        handlers = LabelsHandlers(view, settings.rare_resources, settings.heartbeat_timeout)
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
            liveness = Liveness(shell, desk, view, settings.heartbeat_timeout, settings.node_grace)
            group.start_soon(liveness.run)


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
