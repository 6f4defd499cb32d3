"""Redis holds only snapshots, so it is optional at run time: down, read-only or hung, it never slows submits or
commands, fills the logs, or stops a service from starting; once it is back, snapshots are saved again."""

from __future__ import annotations

import asyncio
import re
import signal
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import httpx
import pytest
import redis.asyncio as redis

from schemas import ScheduleRequest
from services.client import Client
from services.local.mesh import SERVICES, Mesh
from services.local.servers import free_port
from tests.integration.conftest import holds_within, log_of, start_test_mesh
from tests.integration.gateway import http_base
from tests.integration.test_metrics import scrape, value
from tests.support.servers import ServerPath

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

SUBMITS, RATE = 300, 100.0
"""The load during an outage: 3 s of submits at 100 per second (the p95 is the fifteenth slowest; each of the three
outages sends them twice, with Redis up and away)."""
TAIL_BOUND_S = 0.050
"""The bound on a submit's p95 with Redis away on a quiet machine (it was 650 ms with Redis down, 2 to 4 s with it
stopped: a save held the fold up to its socket timeout). On a busy one the two windows of 3 s see other load: in a
suite on two busy cores the p99 of 500 was once 730 ms against 160 ms with Redis up, and the p95 of 300 once 88 ms
against 36 ms, so the bound there is `BUSY_SLACK_S` over twice the p95 with Redis up."""
BUSY_SLACK_S = 0.25
"""What another test's processes may add to one window's p95 over the other's: a tenth of the fault's cost."""
COMMAND_BOUND_S = 2.0
"""A command or query answers within this while Redis is away (they failed after 10 s: the view fell behind)."""
FOLDING = ("labels", "vclusters", "scheduler")
"""The services that fold actor events, so that submits cross their snapshot points."""


@pytest.fixture
def mesh(tmp_path: Path, server_path: ServerPath) -> Iterator[Mesh]:
    """The services and the gateway, snapshotting every 10 events, each serving /metrics."""
    settings = {"CORRAL_SNAPSHOT_EVERY": "10", "CORRAL_HTTP_PORT": str(free_port()), "CORRAL_HEARTBEAT_TIMEOUT": "60"}
    running = start_test_mesh(
        tmp_path / "mesh", server_path, services=(*SERVICES, "gateway"), settings=settings, metrics_from=0
    )
    if running.redis.process is None:
        running.close()
        pytest.skip("Redis is not a local process here (it is stopped with SIGSTOP)")
    try:
        yield running
    finally:
        if running.redis.process is not None:
            running.redis.process.send_signal(signal.SIGCONT)  # a stopped Redis would not stop
        running.close()


@asynccontextmanager
async def redis_down(mesh: Mesh) -> AsyncIterator[None]:
    """redis-server stopped, then started again (empty)."""
    mesh.redis.stop()
    try:
        yield
    finally:
        mesh.redis.start()


@asynccontextmanager
async def redis_read_only(mesh: Mesh) -> AsyncIterator[None]:
    """Redis a read-only replica of a master that is not there: it answers reads, refuses every write."""
    async with redis.Redis(port=mesh.redis.port) as store:
        await store.replicaof("127.0.0.1", str(free_port()))
        try:
            yield
        finally:
            await store.replicaof("NO", "ONE")


@asynccontextmanager
async def redis_stopped(mesh: Mesh) -> AsyncIterator[None]:
    """redis-server stopped with SIGSTOP (connections open, nothing answers), then going on."""
    assert mesh.redis.process is not None
    mesh.redis.process.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        mesh.redis.process.send_signal(signal.SIGCONT)


async def timed(call: Awaitable[object]) -> float:
    """Seconds `call` took."""
    began = time.perf_counter()
    await call
    return time.perf_counter() - began


async def submit_latencies(client: Client, prefix: str) -> list[float]:
    """Seconds each of `SUBMITS` submits took, sent at `RATE` per second whatever the answers' pace."""
    tasks = []
    began = time.perf_counter()
    for index in range(SUBMITS):
        await asyncio.sleep(max(0.0, began + index / RATE - time.perf_counter()))
        tasks.append(asyncio.create_task(timed(client.submit(ScheduleRequest(f"{prefix}{index}", {"CPU": 1})))))
    return list(await asyncio.gather(*tasks))


def percentiles(latencies: list[float], when: str) -> tuple[float, float]:
    """The p50 and p95 of submit latencies (the p99 too, said on the terminal with them)."""
    ordered = sorted(latencies)
    p50, p95, p99 = (statistics.median(ordered), *(ordered[int(len(ordered) * share) - 1] for share in (0.95, 0.99)))
    print(
        f"{when}: submit p50 {p50 * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms over {len(ordered)}"
    )
    return p50, p95


def not_saved_lines(mesh: Mesh, service: str) -> int:
    """The lines of a service's log that say a snapshot was not saved."""
    return sum("not saved" in line for line in log_of(mesh, service).splitlines())


def saved_sequences(mesh: Mesh, service: str) -> list[int]:
    """The sequences of the snapshots a service said it saved, in order."""
    return [int(found) for found in re.findall(rf"{service}: snapshot saved at sequence (\d+)", log_of(mesh, service))]


@pytest.mark.parametrize("outage", [redis_down, redis_read_only, redis_stopped], ids=["down", "read-only", "stopped"])
async def test_with_redis_away_submits_and_commands_keep_their_pace_and_snapshots_come_back(
    mesh: Mesh, outage: Callable[[Mesh], AbstractAsyncContextManager[None]]
) -> None:
    """Redis down, read-only or stopped: 300 submits at 100/s keep a p95 under 50 ms (or their pace with Redis
    up), commands answer at once, each service says "not saved" once, /readyz stays 200 saying the snapshots are
    stale; Redis back, snapshots are saved again and a restart loads one."""
    async with Client(mesh.nats_url, timeout=10.0) as client:
        await client.wait_ready(timeout=60.0)
        for index in range(4):
            await client.register_node(f"n{index}", {"CPU": 1000})
        normal = percentiles(await submit_latencies(client, "up"), "Redis up")
        async with outage(mesh):
            _, p95 = percentiles(await submit_latencies(client, "away"), "Redis away")
            commands = {
                "set_labels": await timed(client.set_labels("n0", {"disk": "ssd"})),
                "nodes": await timed(client.nodes()),
                "virtual_clusters": await timed(client.virtual_clusters()),
            }
            print(", ".join(f"{name} {seconds * 1000:.0f} ms" for name, seconds in commands.items()))

            async def every_save_failed() -> bool:  # a save to a stopped Redis fails only at its socket timeout
                snapshots = httpx.get(f"{http_base(mesh)}/readyz", timeout=10.0).json().get("snapshots", {})
                return all(str(snapshots.get(service, "")).startswith("stale: ") for service in FOLDING)

            await holds_within(every_save_failed, timeout=20.0)
            readiness = httpx.get(f"{http_base(mesh)}/readyz", timeout=10.0)
            failing = {
                service: value(scrape(mesh.metrics_ports[service]), "corral_snapshot_failing") for service in FOLDING
            }
        lines = {service: not_saved_lines(mesh, service) for service in SERVICES}
        print(f"'not saved' lines per service: {lines}")
        assert p95 < max(TAIL_BOUND_S, 2 * normal[1] + BUSY_SLACK_S), f"submit p95 {p95 * 1000:.0f} ms"
        assert all(seconds < COMMAND_BOUND_S for seconds in commands.values()), commands
        assert all(count <= 2 for count in lines.values()), lines
        assert readiness.status_code == 200, readiness.text
        assert "snapshots stale" in readiness.json()["warning"], readiness.json()
        assert readiness.json()["snapshots"]["scheduler"].startswith("stale: "), readiness.json()
        assert failing == dict.fromkeys(FOLDING, 1.0), failing

        async def saved_again() -> bool:
            await client.submit(ScheduleRequest(f"back{time.monotonic_ns()}", {"CPU": 1}))
            return all("snapshots saved again" in log_of(mesh, service) for service in FOLDING)

        assert await holds_within(saved_again, timeout=90.0), {s: log_of(mesh, s)[-2000:] for s in FOLDING}
        after_outage = saved_sequences(mesh, "scheduler")[-1]
        mesh.stop_service("scheduler")
        mesh.start_service("scheduler")
        await client.wait_ready(timeout=60.0)
        loaded = [int(found) for found in re.findall(r"snapshot at sequence (\d+) loaded", log_of(mesh, "scheduler"))]
        assert loaded and loaded[-1] >= after_outage, (loaded, after_outage)
        ready = httpx.get(f"{http_base(mesh)}/readyz", timeout=10.0).json()
        assert ready["snapshots"]["scheduler"] == "ok", ready


async def test_a_service_starts_while_redis_hangs_and_stops_soon(mesh: Mesh) -> None:
    """Redis stopped (SIGSTOP): a service restarted stops within seconds and starts from the log alone."""
    async with Client(mesh.nats_url, timeout=10.0) as client:
        await client.wait_ready(timeout=60.0)
        await client.register_node("n0", {"CPU": 4})
        async with redis_stopped(mesh):
            began = time.monotonic()
            mesh.stop_service("labels")
            mesh.start_service("labels")
            await client.wait_ready(timeout=30.0)
            seconds = time.monotonic() - began
            print(f"labels stopped and started again in {seconds:.1f}s with Redis stopped")
            assert "snapshot store unreachable" in log_of(mesh, "labels")
            assert [node.node_id for node in await client.nodes()] == ["n0"]
            assert seconds < 20.0  # a stop and a start, each giving up on Redis after 2 s, on a busy machine
