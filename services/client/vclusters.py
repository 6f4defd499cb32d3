"""The client's virtual-cluster calls: create and destroy (waiting for the scheduler), info, and scoped queries."""

from __future__ import annotations

import asyncio
import contextlib

import nats.errors
from nats.aio.subscription import Subscription
from nats.js import api

from schemas import Admitted, Destroyed, Queued, VirtualCluster, VirtualClusterDestroyed, VirtualClusterInfo
from schemas import subjects as s
from schemas.commands import CreateVirtualCluster, DestroyVirtualCluster
from schemas.events import AnyEvent
from schemas.queries import (
    NodeInfo,
    NodesReply,
    ScopedNodesQuery,
    ScopedWorkQuery,
    ScopedWorkReply,
    VirtualClusterQuery,
    VirtualClusterReply,
    VirtualClustersQuery,
    VirtualClustersReply,
)
from schemas.selectors import SelectorSpec
from services.client.base import Connection
from services.client.deadlines import check, deadline_in
from services.core.errors import CodecError, UnavailableError
from services.runtime.codec import decode

VNODE_FACTS = f"{s.PREFIX}.evt.{s.VNODE}.>"
"""Every virtual-cluster fact the scheduler writes (queued, reserved, resized, destroyed)."""

RECHECK = 0.1
"""Seconds between two looks at a cluster the scheduler has not decided yet (a fact wakes the client sooner)."""


class VirtualClusterCalls(Connection):
    """Virtual clusters over the bus: the vclusters service validates and answers, the scheduler decides."""

    async def create_virtual_cluster(
        self,
        vc_id: str,
        spec: VirtualCluster,
        parent: str | None = None,
        priority: int = 0,
        timeout: float = 5.0,
    ) -> Admitted | Queued:
        """Ask for a virtual cluster under `parent` (None: the root) and wait until the scheduler admits or queues it.

        The same request again returns where the cluster stands; another spec under the same id is a conflict.
        """
        command = CreateVirtualCluster(vc_id=vc_id, spec=spec, parent=parent, priority=priority)
        facts = await self.bus.nc.subscribe(s.event_subject(s.VNODE, vc_id))
        try:
            await self._command(s.CREATE_VCLUSTER, command)
            deadline = deadline_in(timeout)
            async with asyncio.timeout_at(deadline):
                while True:
                    check(deadline)
                    reply = await self._cluster_reply(vc_id)
                    if reply.decided:
                        return reply.admission
                    with contextlib.suppress(nats.errors.TimeoutError):
                        await facts.next_msg(timeout=RECHECK)
        except TimeoutError:
            raise UnavailableError(
                f"virtual cluster {vc_id!r}: the scheduler did not admit or queue it within {timeout:g}s"
            ) from None
        finally:
            with contextlib.suppress(nats.errors.Error):
                await facts.unsubscribe()

    async def destroy_virtual_cluster(self, vc_id: str, force: bool = False, timeout: float = 5.0) -> Destroyed:
        """Destroy a cluster and its children, and wait until they are gone; `force` stops their live work.

        Without `force`, live work refuses it (`RejectedError` naming the work). The result lists the clusters
        destroyed (children first) and the work stopped, as the scheduler's `VirtualClusterDestroyed` facts say.
        """
        subtree = (await self._cluster_reply(vc_id)).subtree
        accepted = await self._command(s.DESTROY_VCLUSTER, DestroyVirtualCluster(vc_id=vc_id, force=force))
        requested_at = accepted.sequence or await self._last_intent(vc_id)
        reader = await self.bus.js.subscribe(
            VNODE_FACTS,
            stream=s.EVENTS_STREAM,
            ordered_consumer=True,
            config=api.ConsumerConfig(deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=requested_at),
        )
        destroyed: list[str] = []
        stopped: list[str] = []
        deadline = deadline_in(timeout)
        try:
            async with asyncio.timeout_at(deadline):
                while vc_id not in destroyed:
                    check(deadline)
                    event = await _next_event(reader)
                    if isinstance(event, VirtualClusterDestroyed) and event.vc_id in subtree:
                        destroyed.append(event.vc_id)
                        stopped += event.stopped
        except TimeoutError:
            raise UnavailableError(
                f"virtual cluster {vc_id!r}: the scheduler did not destroy it within {timeout:g}s"
            ) from None
        finally:
            with contextlib.suppress(nats.errors.Error):
                await reader.unsubscribe()
        return Destroyed(vc_id, destroyed, sorted(stopped))

    async def _last_intent(self, vc_id: str) -> int:
        """The log sequence of the newest intent about `vc_id` (its destroy request, when one is under way)."""
        found = await self.bus.js.get_last_msg(s.EVENTS_STREAM, s.event_subject(s.VCLUSTER, vc_id))
        return int(found.seq or 0)

    async def virtual_cluster(self, vc_id: str) -> VirtualClusterInfo:
        """A cluster's spec, state, resources (total, max, available), virtual nodes, children and parent."""
        return (await self._cluster_reply(vc_id)).info

    async def virtual_clusters(self, limit: int | None = None) -> list[VirtualClusterInfo]:
        """Every virtual cluster, parents before children."""
        query = VirtualClustersQuery()
        answer: VirtualClustersReply = await self._list(s.VCLUSTERS_QUERY, query, VirtualClustersReply, limit)
        return answer.clusters

    async def _cluster_reply(self, vc_id: str) -> VirtualClusterReply:
        answer: VirtualClusterReply = await self._ask(s.VCLUSTER_QUERY, VirtualClusterQuery(vc_id), VirtualClusterReply)
        return answer

    async def virtual_cluster_work(self, vc_id: str, limit: int | None = None) -> ScopedWorkReply:
        """The actors, placements, placement groups and pending work of one cluster (the vclusters service's view)."""
        query = ScopedWorkQuery(vc_id)
        answer: ScopedWorkReply = await self._list(s.VCLUSTER_WORK_QUERY, query, ScopedWorkReply, limit)
        return answer

    async def _scoped_nodes(self, vc_id: str, selector: SelectorSpec, limit: int | None = None) -> list[NodeInfo]:
        """The virtual nodes of one cluster whose labels match `selector`."""
        query = ScopedNodesQuery(vc_id, selector)
        answer: NodesReply = await self._list(s.VCLUSTER_NODES_QUERY, query, NodesReply, limit)
        return answer.nodes


async def _next_event(reader: Subscription) -> AnyEvent | None:
    """The next event a log reader delivers (None when it does not decode)."""
    while True:
        with contextlib.suppress(nats.errors.TimeoutError):
            msg = await reader.next_msg(timeout=1.0)
            try:
                event: AnyEvent = decode(msg.data, AnyEvent)
            except CodecError:
                return None
            return event
