"""Wiring of the vclusters service: commands (create, destroy) and scoped queries, answered from its view."""

from __future__ import annotations

import functools

import anyio

from schemas import subjects as s
from schemas.commands import CreateVirtualCluster, DestroyVirtualCluster
from schemas.queries import ScopedNodesQuery, ScopedWorkQuery, VirtualClusterQuery, VirtualClustersQuery
from services.runtime import metrics
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
    metrics.gauge("corral.vclusters.queued", "{vcluster}", "Virtual clusters waiting in admission queues", view.queued)
    async with service_shell(settings, "vclusters", view) as shell:
        handlers = VClustersHandlers(view, settings.rare_resources)
        desk = CommandDesk(shell.bus, shell.follower, "vclusters", before=shell.caught_up)
        query = functools.partial(query_handler, before=shell.caught_up, pager=shell.pager)
        routes = {
            s.CREATE_VCLUSTER: desk.handler(CreateVirtualCluster, handlers.create),
            s.DESTROY_VCLUSTER: desk.handler(DestroyVirtualCluster, handlers.destroy),
            s.VCLUSTER_QUERY: query(VirtualClusterQuery, view.info),
            s.VCLUSTERS_QUERY: query(VirtualClustersQuery, view.clusters),
            s.VCLUSTER_WORK_QUERY: query(ScopedWorkQuery, view.work),
            s.VCLUSTER_NODES_QUERY: query(ScopedNodesQuery, view.nodes),
        }
        await shell.serve(routes)
        async with anyio.create_task_group() as group:
            group.start_soon(shell.follower.run)
            group.start_soon(shell.follower.watch_log)
