"""Wiring of the taints service: commands and queries."""

from __future__ import annotations

import anyio

from schemas import subjects as s
from schemas.commands import AddTaints, RemoveTaints
from schemas.queries import TaintsQuery
from services.runtime.commands import CommandDesk
from services.runtime.queries import query_handler
from services.runtime.service import service_shell
from services.runtime.settings import Settings
from services.taints.handlers import TaintsHandlers
from services.taints.view import SUBJECTS, TaintsView


async def main(settings: Settings) -> None:
    """Serve until cancelled.

    Commands first fold the log up to its current end: the nodes they name are registered by the labels service.
    """
    view = TaintsView(settings.seed)
    async with service_shell(settings, "taints", view, subjects=SUBJECTS) as shell:
        handlers = TaintsHandlers(view, settings.rare_resources)
        desk = CommandDesk(shell.bus, shell.follower, "taints", before=shell.caught_up)
        async with anyio.create_task_group() as group:
            group.start_soon(shell.follower.run)
            group.start_soon(shell.follower.watch_log)
            await desk.execute(handlers.isolate_rare)
            routes = {
                s.ADD_TAINTS: desk.handler(AddTaints, handlers.add),
                s.REMOVE_TAINTS: desk.handler(RemoveTaints, handlers.remove),
                s.TAINTS_QUERY: query_handler(TaintsQuery, view.taints, before=shell.caught_up, pager=shell.pager),
            }
            await shell.serve(routes)
