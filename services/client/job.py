"""A job scope: a virtual cluster created on entry, every request made through it kept inside, destroyed on exit.

Like `ray.init(virtual_cluster=...)` and `ray.shutdown()`: work submitted through the job lands only on the
cluster's virtual nodes, and introspection through it sees only that cluster.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Protocol

import msgspec

from schemas import (
    Admitted,
    Destroyed,
    Pending,
    Placed,
    PlacementGroupRequest,
    Queued,
    ScheduleRequest,
    VirtualCluster,
    VirtualClusterInfo,
)
from schemas.queries import ActorInfo, NodeInfo, ScopedWorkReply
from schemas.replies import Rejected
from services.core.errors import CorralError


class JobClient(Protocol):
    """The calls of `Client` a job scopes (the client creates jobs, so a job names only what it uses)."""

    async def submit(self, request: ScheduleRequest, timeout: float | None = None) -> Placed | Pending: ...

    async def submit_many(
        self, requests: Sequence[ScheduleRequest], timeout: float | None = None
    ) -> list[Placed | Pending | Rejected]: ...

    async def create_placement_group(
        self, request: PlacementGroupRequest, timeout: float | None = None
    ) -> Placed | Pending: ...

    async def create_virtual_cluster(
        self, vc_id: str, spec: VirtualCluster, parent: str | None = None, priority: int = 0, timeout: float = 5.0
    ) -> Admitted | Queued: ...

    async def destroy_virtual_cluster(self, vc_id: str, force: bool = False, timeout: float = 5.0) -> Destroyed: ...

    async def virtual_cluster(self, vc_id: str) -> VirtualClusterInfo: ...

    async def virtual_cluster_work(self, vc_id: str, limit: int | None = None) -> ScopedWorkReply: ...

    async def nodes(
        self, selector: dict[str, Any] | None = None, vcluster_id: str | None = None, limit: int | None = None
    ) -> list[NodeInfo]: ...


class Job:
    """`async with client.job(virtual_cluster=VirtualCluster(...)) as job:` scopes `job.submit(...)` and queries.

    A request that already names a virtual cluster (a child created through `job.create_virtual_cluster`) keeps
    it; every other request gets `vcluster_id=job.vc_id`. On exit the cluster is destroyed with `force=True`,
    stopping what still runs in it; `job.destroyed` then says what went.
    """

    def __init__(
        self,
        client: JobClient,
        spec: VirtualCluster,
        vc_id: str | None = None,
        parent: str | None = None,
        priority: int = 0,
        timeout: float = 5.0,
    ) -> None:
        self.client = client
        self.spec = spec
        self.vc_id = vc_id or f"job-{uuid.uuid4().hex[:12]}"
        self.parent, self.priority, self.timeout = parent, priority, timeout
        self.admission: Admitted | Queued | None = None
        """Admitted, or Queued (requests then wait until the cluster is admitted)."""
        self.destroyed: Destroyed | None = None

    async def __aenter__(self) -> Job:
        self.admission = await self.client.create_virtual_cluster(
            self.vc_id, self.spec, self.parent, self.priority, timeout=self.timeout
        )
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self.admission is None:
            return
        try:
            self.destroyed = await self.client.destroy_virtual_cluster(self.vc_id, force=True, timeout=self.timeout)
        except CorralError:
            if kind is None:
                raise  # otherwise the body's error matters more than a failed clean-up

    def _scoped(self, request: Any) -> Any:
        return request if request.vcluster_id else msgspec.structs.replace(request, vcluster_id=self.vc_id)

    # work

    async def submit(self, request: ScheduleRequest, timeout: float | None = None) -> Placed | Pending:
        """Schedule an actor or task inside the job's cluster."""
        return await self.client.submit(self._scoped(request), timeout)

    async def submit_many(
        self, requests: Sequence[ScheduleRequest], timeout: float | None = None
    ) -> list[Placed | Pending | Rejected]:
        """Schedule many actors or tasks inside the job's cluster in one message (`Client.submit_many`)."""
        return await self.client.submit_many([self._scoped(request) for request in requests], timeout)

    async def create_placement_group(
        self, request: PlacementGroupRequest, timeout: float | None = None
    ) -> Placed | Pending:
        """Reserve a placement group out of the job's cluster."""
        return await self.client.create_placement_group(self._scoped(request), timeout)

    async def create_virtual_cluster(
        self, vc_id: str, spec: VirtualCluster, priority: int = 0, timeout: float = 5.0
    ) -> Admitted | Queued:
        """Create a child cluster out of the job cluster's resources (destroyed with it)."""
        return await self.client.create_virtual_cluster(vc_id, spec, self.vc_id, priority, timeout=timeout)

    # introspection, scoped to the job's cluster

    async def virtual_cluster(self) -> VirtualClusterInfo:
        """The job's cluster: spec, state, resources, virtual nodes, children."""
        return await self.client.virtual_cluster(self.vc_id)

    async def cluster_resources(self) -> dict[str, float]:
        """The total resources of the job's cluster (like `ray.cluster_resources()`)."""
        return (await self.virtual_cluster()).total_resources

    async def available_resources(self) -> dict[str, float]:
        """The free resources of the job's cluster (like `ray.available_resources()`)."""
        return (await self.virtual_cluster()).available_resources

    async def nodes(self, selector: dict[str, Any] | None = None) -> list[NodeInfo]:
        """The job cluster's virtual nodes (like `ray.nodes()`), those matching `selector` when given."""
        return await self.client.nodes(selector, vcluster_id=self.vc_id)

    async def actors(self) -> list[ActorInfo]:
        """Every actor living in the job's cluster, placed or waiting."""
        return (await self.client.virtual_cluster_work(self.vc_id)).actors

    async def placements(self) -> dict[str, str]:
        """Actor id -> virtual node id, for the job's placed actors."""
        return (await self.client.virtual_cluster_work(self.vc_id)).placements

    async def placement_groups(self) -> dict[str, list[str]]:
        """Placement group id -> virtual node per bundle, for the job's placed groups."""
        return (await self.client.virtual_cluster_work(self.vc_id)).placement_groups

    async def pending(self) -> list[Pending]:
        """The job's waiting actors and placement groups, in queue order, with reasons."""
        return (await self.client.virtual_cluster_work(self.vc_id)).pending
