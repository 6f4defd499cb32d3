"""The virtual-cluster load: tenants admitted over the bus, users scheduling inside them, a queue drained by churn.

Tenants are created concurrently through `Client.create_virtual_cluster` (the vclusters service writes the
intent, the scheduler admits or queues it); then the same closed-loop users as the root phase send their
requests inside the tenants (`vcluster_id` set per user); last, `waiting` clusters too big for what is left
queue up, and destroying tenants one by one admits them, each timed from its destroy to its admission.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

import msgspec

from loadtest.stats import percentile
from loadtest.transport import Connection, Result, Target
from loadtest.workloads import SMALL
from schemas import Admitted, FixedSizeNode, FixedSizeNodes, ScheduleRequest, VirtualCluster
from services.client import Client
from services.core.errors import CorralError

POLICIES = ("PACK", "SPREAD", "STRICT_SPREAD")
ROOM = 16.0
"""Flexible CPUs a tenant may borrow above its minimum: room for what one user holds, so the phase measures
scheduling inside clusters rather than tenants at their quota."""
ADMISSION_POLL = 0.02
"""Seconds between two looks at a waiting cluster after a destroy."""


class SizeFigures(TypedDict):
    """Create-to-decision latency of one size class of tenants (ms)."""

    tenants: int
    admitted: int
    p50_ms: float
    p99_ms: float


class TenantFigures(TypedDict):
    """What the tenants phase measured."""

    tenants: int
    admitted: int
    admissions_per_s: float
    """Tenants admitted over the wall time of creating them all (concurrently, over the bus)."""
    by_size: dict[str, SizeFigures]
    waiting: int
    """Clusters too big for what was left, queued behind the tenants."""
    queued_admitted: int
    destroy_to_admission_ms: dict[str, float]
    """For the waiting clusters the churn admitted: time from the destroy that made room to the admission."""
    errors: int
    first_error: str


@dataclass(frozen=True)
class TenantSpec:
    """One tenant: its id, size class and spec."""

    vc_id: str
    size: str
    spec: VirtualCluster


def _cpus(cpu: float) -> dict[str, float]:
    """`cpu` CPUs and the memory that goes with them on the simulated nodes (4 per CPU)."""
    return {"CPU": cpu, "memory": cpu * 4}


def tenant_specs(count: int, prefix: str, seed: int, batch: int = 1) -> list[TenantSpec]:
    """`count` tenants: one or two groups of 1 to 3 one-CPU fixed-size nodes, plus a flexible range of `ROOM` CPUs,
    and room for the `batch - 1` more requests a user sending batches holds at once (each `SMALL`).

    Memory is named in the range too: with fixed-size nodes, a resource the spec leaves out may not grow at all.
    """
    room = ROOM + (batch - 1) * SMALL["CPU"]
    draw = random.Random(seed)
    specs = []
    for index in range(count):
        groups = []
        for _ in range(draw.choice((1, 1, 2))):
            nodes = [FixedSizeNode(_cpus(1.0))] * draw.randint(1, 3)
            groups.append(FixedSizeNodes(nodes, draw.choice(POLICIES)))  # type: ignore[arg-type]
        minimum = float(draw.choice((1, 2, 4, 8)))
        fixed = sum(len(group.nodes) for group in groups)
        size = "small" if minimum + fixed <= 4 else "medium" if minimum + fixed <= 8 else "large"
        spec = VirtualCluster(
            flexible_resource_min=_cpus(minimum), flexible_resource_max=_cpus(minimum + room), fixed_size_nodes=groups
        )
        specs.append(TenantSpec(f"{prefix}-t{index:03d}", size, spec))
    return specs


class InsideTenants:
    """The root phase's target, with each user's requests sent inside that user's tenant."""

    name = "tenants"
    description = "the Corral scheduler, each user's requests inside its own virtual cluster"

    def __init__(self, inner: Target, tenants: Sequence[str]) -> None:
        self.inner = inner
        self.tenants = list(tenants)

    def _tenant(self, actor_id: str) -> str:
        user = actor_id.rsplit("-", 1)[0].rsplit("u", 1)[-1]
        return self.tenants[int(user) % len(self.tenants)]

    async def submit(self, conn: Connection, request: ScheduleRequest) -> Result:
        """The same request, in the sender's tenant."""
        scoped = msgspec.structs.replace(request, vcluster_id=self._tenant(request.actor_id))
        return await self.inner.submit(conn, scoped)

    async def remove(self, conn: Connection, actor_id: str) -> Result:
        """Removes are not scoped."""
        return await self.inner.remove(conn, actor_id)

    async def submit_many(self, conn: Connection, requests: Sequence[ScheduleRequest]) -> list[Result]:
        """The same batch, each request in its sender's tenant."""
        scoped = [msgspec.structs.replace(r, vcluster_id=self._tenant(r.actor_id)) for r in requests]
        return await self.inner.submit_many(conn, scoped)

    async def remove_many(self, conn: Connection, actor_ids: Sequence[str]) -> list[Result]:
        """Removes are not scoped."""
        return await self.inner.remove_many(conn, actor_ids)


class _Errors:
    def __init__(self) -> None:
        self.count = 0
        self.first = ""

    def add(self, error: Exception) -> None:
        self.count += 1
        self.first = self.first or f"{type(error).__name__}: {error}"


async def create_tenants(
    clients: Sequence[Client], specs: Sequence[TenantSpec], in_flight: int, timeout: float
) -> tuple[list[str], dict[str, list[float]], float, _Errors]:
    """Create every tenant (at most `in_flight` at once); the admitted ids, latencies (ms) per size, wall time."""
    gate = asyncio.Semaphore(in_flight)
    admitted: list[str] = []
    latencies: dict[str, list[float]] = {}
    errors = _Errors()

    async def create(index: int, tenant: TenantSpec) -> None:
        async with gate:
            began = time.perf_counter()
            try:
                outcome = await clients[index % len(clients)].create_virtual_cluster(
                    tenant.vc_id, tenant.spec, timeout=timeout
                )
            except CorralError as error:
                errors.add(error)
                return
            latencies.setdefault(tenant.size, []).append((time.perf_counter() - began) * 1000)
            if isinstance(outcome, Admitted):
                admitted.append(tenant.vc_id)

    began = time.perf_counter()
    await asyncio.gather(*(create(index, tenant) for index, tenant in enumerate(specs)))
    return admitted, latencies, time.perf_counter() - began, errors


async def drain_queue(
    client: Client, tenants: Sequence[str], waiting: Sequence[str], timeout: float
) -> tuple[list[float], _Errors]:
    """Destroy tenants one by one; after each, time until the next waiting cluster is admitted (ms)."""
    times: list[float] = []
    errors = _Errors()
    queue = list(waiting)
    for vc_id in tenants:
        if not queue:
            break
        began = time.perf_counter()
        try:
            await client.destroy_virtual_cluster(vc_id, force=True, timeout=timeout)
            deadline = began + timeout
            while queue and time.perf_counter() < deadline:
                if (await client.virtual_cluster(queue[0])).state != "queued":
                    times.append((time.perf_counter() - began) * 1000)
                    queue.pop(0)
                    break
                await asyncio.sleep(ADMISSION_POLL)
        except CorralError as error:
            errors.add(error)
    return times, errors


def size_figures(
    specs: Sequence[TenantSpec], admitted: Sequence[str], latencies: dict[str, list[float]]
) -> dict[str, SizeFigures]:
    """Per size class: how many, how many admitted, create latency p50/p99."""
    taken = set(admitted)
    figures: dict[str, SizeFigures] = {}
    for size in ("small", "medium", "large"):
        members = [spec for spec in specs if spec.size == size]
        ordered = sorted(latencies.get(size, []))
        figures[size] = SizeFigures(
            tenants=len(members),
            admitted=sum(1 for spec in members if spec.vc_id in taken),
            p50_ms=round(percentile(ordered, 0.5), 1),
            p99_ms=round(percentile(ordered, 0.99), 1),
        )
    return figures


def flexible_only(cpu: float) -> VirtualCluster:
    """A cluster of exactly `cpu` flexible CPUs."""
    return VirtualCluster(flexible_resource_min={"CPU": cpu}, flexible_resource_max={"CPU": cpu})


async def queue_behind(client: Client, prefix: str, count: int, timeout: float) -> list[str]:
    """Fill what is free but 2 CPUs with one holder cluster, then ask for `count` 4-CPU clusters: they queue."""
    free = sum(node.available.get("CPU", 0.0) for node in await client.nodes() if not node.taints)
    if free > 2:
        await client.create_virtual_cluster(f"{prefix}-holder", flexible_only(free - 2), timeout=timeout)
    waiting = []
    for index in range(count):
        vc_id = f"{prefix}-w{index:03d}"
        await client.create_virtual_cluster(vc_id, flexible_only(4), timeout=timeout)
        waiting.append(vc_id)
    return waiting


def tenant_figures(
    specs: Sequence[TenantSpec],
    admitted: Sequence[str],
    latencies: dict[str, list[float]],
    seconds: float,
    waiting: int,
    drained: list[float],
    errors: Sequence[_Errors],
) -> TenantFigures:
    """The phase's figures."""
    ordered = sorted(drained)
    return TenantFigures(
        tenants=len(specs),
        admitted=len(admitted),
        admissions_per_s=round(len(admitted) / seconds, 1) if seconds > 0 else 0.0,
        by_size=size_figures(specs, admitted, latencies),
        waiting=waiting,
        queued_admitted=len(drained),
        destroy_to_admission_ms={"p50": round(percentile(ordered, 0.5), 1), "p99": round(percentile(ordered, 0.99), 1)},
        errors=sum(e.count for e in errors),
        first_error=next((e.first for e in errors if e.first), ""),
    )
