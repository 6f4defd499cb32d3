"""`corral bench pending --mesh`: the same burst and stream as `corral bench pending`, through an embedded mesh.

The nodes are registered, the blocking placement group reserved and the waiting actors submitted over the bus.
The unrelated stream runs before the drain, during it (a submit and a removal at a time, until the drain is
over) and after it; the drain is timed from sending the group's removal to its answer, which comes once every
placement it led to is in the log.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from schemas import Pending
from services.cli.bench.burst import (
    BATCH_NODE,
    BLOCKER,
    KEPT,
    SERVICE,
    SERVICE_NODE,
    Measured,
    batch_nodes,
    blocker,
    service_nodes,
    unrelated_request,
    waiting_request,
)
from services.cli.common import CliError
from services.client import Client
from services.local.mesh import start_mesh

READY_TIMEOUT = 60.0
IN_FLIGHT = 200
"""Registrations and submissions in flight at once while the cluster is built."""


class Stream:
    """Unrelated requests decided one after another: each one's nanoseconds, and the next index."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.index = 0

    async def request(self, timings: list[int]) -> None:
        """Submit the next unrelated actor and remove the one submitted `KEPT` requests earlier."""
        clock = time.perf_counter_ns
        began = clock()
        await self.client.submit(unrelated_request(self.index))
        timings.append(clock() - began)
        if self.index >= KEPT:
            began = clock()
            await self.client.remove_actor(unrelated_request(self.index - KEPT).actor_id)
            timings.append(clock() - began)
        self.index += 1

    async def run(self, count: int) -> list[int]:
        """`count` requests."""
        timings: list[int] = []
        for _ in range(count):
            await self.request(timings)
        return timings

    async def run_until(self, done: asyncio.Event) -> list[int]:
        """Requests until `done` is set."""
        timings: list[int] = []
        while not done.is_set():
            await self.request(timings)
        return timings


async def build(client: Client, args: argparse.Namespace) -> None:
    """Register the nodes, reserve the blocking group, submit the waiting actors (each one must wait)."""
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def node(node_id: str, resources: dict[str, float], pool: str) -> None:
        async with gate:
            await client.register_node(node_id, resources, {"pool": pool}, [SERVICE] if pool == "s" else None)

    await asyncio.gather(
        *(node(n, {**BATCH_NODE, "memory": 256.0}, "b") for n in batch_nodes(args.nodes)),
        *(node(n, SERVICE_NODE, "s") for n in service_nodes(args.nodes)),
    )
    expected = args.nodes + len(service_nodes(args.nodes))
    deadline = time.monotonic() + READY_TIMEOUT
    while len(await client.nodes()) < expected:
        if time.monotonic() > deadline:
            raise CliError(f"fewer than {expected} nodes listed {READY_TIMEOUT:g}s after registering them")
        await asyncio.sleep(0.1)
    if isinstance(await client.create_placement_group(blocker(args.nodes)), Pending):
        raise CliError("the blocking placement group could not be reserved")

    async def waiting(index: int) -> None:
        async with gate:
            if not isinstance(await client.submit(waiting_request(index, args.shapes)), Pending):
                raise CliError(f"waiting actor {index} was placed: the batch nodes are not full")

    await asyncio.gather(*(waiting(index) for index in range(args.pending)))


async def measure(url: str, args: argparse.Namespace) -> Measured:
    """Build the cluster, then the stream before, during and after the drain."""
    async with Client(url, name="corral-bench-pending", timeout=120.0) as client:
        await client.wait_ready(READY_TIMEOUT)
        await build(client, args)
        stream = Stream(client)
        before = await stream.run(args.unrelated)
        done = asyncio.Event()
        during = asyncio.create_task(stream.run_until(done))
        began = time.perf_counter()
        await client.remove_placement_group(BLOCKER)
        drain = time.perf_counter() - began
        done.set()
        amid = await during
        left = len(await client.pending(limit=1000))
        after = await stream.run(args.unrelated)
    return Measured(round(drain, 2), left, before, after, amid)


def run_mesh(args: argparse.Namespace) -> Measured:
    """Start an embedded mesh in a throwaway folder, measure, stop it."""
    with tempfile.TemporaryDirectory(prefix="corral-bench-pending-") as folder:
        mesh = start_mesh(Path(folder))
        try:
            return asyncio.run(measure(mesh.nats_url, args))
        finally:
            mesh.close()
