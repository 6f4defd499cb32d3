"""Wiring of the vclusters service: commands (create, destroy) and scoped queries, answered from its view."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
from nats.aio.msg import Msg

from schemas import subjects as s
from schemas.commands import CreateVirtualCluster, DestroyVirtualCluster
from schemas.queries import ScopedNodesQuery, ScopedWorkQuery, VirtualClusterQuery, VirtualClustersQuery
from services.runtime.commands import CommandDesk
from services.runtime.queries import query_handler
from services.runtime.service import service_shell
from services.runtime.settings import Settings
from services.vclusters.handlers import VClustersHandlers
from services.vclusters.view import VClustersView


async def main(settings: Settings) -> None:
    """Serve until cancelled.

    Commands and queries first fold the log up to its current end: live work and admissions are the scheduler's
    facts, so a destroy right after a placement sees it, and a query reflects every decision already replied.
    """
    view = VClustersView(settings.seed, settings.rare_resources)
    async with service_shell(settings, "vclusters", view) as shell:
        handlers = VClustersHandlers(view, settings.rare_resources)
        desk = CommandDesk(shell.bus, shell.follower, "vclusters", before=shell.caught_up)
        routes: dict[str, Callable[[Msg], Awaitable[bytes]]] = {
            s.CREATE_VCLUSTER: desk.handler(CreateVirtualCluster, handlers.create),
            s.DESTROY_VCLUSTER: desk.handler(DestroyVirtualCluster, handlers.destroy),
            s.VCLUSTER_QUERY: query_handler(VirtualClusterQuery, view.info, before=shell.caught_up),
            s.VCLUSTERS_QUERY: query_handler(VirtualClustersQuery, view.clusters, before=shell.caught_up),
            s.VCLUSTER_WORK_QUERY: query_handler(ScopedWorkQuery, view.work, before=shell.caught_up),
            s.VCLUSTER_NODES_QUERY: query_handler(ScopedNodesQuery, view.nodes, before=shell.caught_up),
        }
        for subject, handler in routes.items():
            shell.subscriptions.append(await shell.bus.serve(subject, handler, queue="vclusters"))
        async with anyio.create_task_group() as group:
            group.start_soon(shell.follower.run)
