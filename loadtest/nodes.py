"""The simulated nodes: mixed shapes (CPU, GPU, zones, labels, taints), registered through the client concurrently."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from schemas import Taint
from schemas.replies import Accepted
from services.client import Client

ZONES = ("z0", "z1", "z2", "z3", "z4")
CPU_SIZES = (8.0, 16.0, 24.0, 32.0)
ACCELERATORS = ("A100", "L4")
TIERS = ("web", "batch", "db")
TAINT = Taint("dedicated", "loadtest")
"""The taint every 20th node carries; the `tolerate` workload tolerates it."""


@dataclass(frozen=True)
class NodeShape:
    """What one simulated node registers with."""

    node_id: str
    resources: dict[str, float]
    labels: dict[str, str]
    taints: list[Taint] = field(default_factory=list)
    zone: str = ""
    accelerator_type: str | None = None


def node_shapes(count: int, prefix: str) -> list[NodeShape]:
    """`count` nodes: CPU 8-32, every 10th with one GPU, zones z0..z4, disk and tier labels, every 20th tainted."""
    shapes = []
    for index in range(count):
        cpu = CPU_SIZES[(index * 7) % len(CPU_SIZES)]
        resources = {"CPU": cpu, "memory": cpu * 4}
        accelerator = None
        if index % 10 == 9:
            resources["GPU"] = 1.0
            accelerator = ACCELERATORS[(index // 10) % len(ACCELERATORS)]
        labels = {"disk": "hdd" if index % 3 == 2 else "ssd", "tier": TIERS[index % len(TIERS)]}
        taints = [TAINT] if index % 20 == 19 else []
        shapes.append(
            NodeShape(
                node_id=f"{prefix}-n{index:05d}",
                resources=resources,
                labels=labels,
                taints=taints,
                zone=ZONES[index % len(ZONES)],
                accelerator_type=accelerator,
            )
        )
    return shapes


async def register_node(client: Client, shape: NodeShape) -> Accepted:
    """Register one simulated node through `client` (its heartbeats go out while the client is connected)."""
    return await client.register_node(
        shape.node_id,
        shape.resources,
        shape.labels,
        shape.taints,
        zone=shape.zone,
        accelerator_type=shape.accelerator_type,
    )


async def register_nodes(
    clients: Sequence[Client], shapes: Sequence[NodeShape], *, in_flight: int = 100, quiet: bool = False
) -> float:
    """Register every node (node i through client i mod n, heartbeats on); returns the seconds it took."""
    gate = asyncio.Semaphore(in_flight)
    done = 0
    step = max(1, len(shapes) // 10)
    started = time.perf_counter()

    async def one(index: int, shape: NodeShape) -> None:
        nonlocal done
        async with gate:
            await register_node(clients[index % len(clients)], shape)
        done += 1
        if not quiet and (done % step == 0 or done == len(shapes)):
            print(f"  registered {done:,}/{len(shapes):,} nodes", file=sys.stderr, flush=True)

    await asyncio.gather(*(one(index, shape) for index, shape in enumerate(shapes)))
    return time.perf_counter() - started


async def wait_until_seen(client: Client, prefix: str, count: int, timeout: float = 60.0) -> None:
    """Wait until the scheduler's view holds all `count` nodes whose ids start with `prefix`."""
    deadline = time.monotonic() + timeout
    seen = 0
    while time.monotonic() < deadline:
        status = await client.status()
        seen = sum(1 for node in status.nodes if node.node_id.startswith(prefix))
        if seen >= count:
            return
        await asyncio.sleep(0.2)
    raise TimeoutError(f"the scheduler sees {seen} of {count} registered nodes after {timeout}s")
