"""What the fuzz suites share: hypothesis settings for examples that change one live mesh, a probe of whether the
mesh still places a new actor, and a check of every process of a service against a replay of the log."""

from __future__ import annotations

import asyncio
import secrets
import time

from hypothesis import HealthCheck, Phase, settings

from loadtest.digests import live_digests
from schemas import ScheduleRequest
from services.client import Client, CorralError
from services.core.state import replay
from services.core.state.snapshot import digest
from services.local.mesh import Mesh
from services.runtime.bus import Bus


def on_one_mesh(examples: int) -> settings:
    """Settings for `examples` examples sent to one live mesh: never shrunk nor replayed from a database (each
    example changes the mesh, so a shrunk one would meet another mesh), no deadline, no health checks."""
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=(Phase.explicit, Phase.generate),
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )


async def does_not_place(mesh: Mesh) -> str:
    """Register a fresh node and place an actor on it through the client (its label selects the node, and it
    alone tolerates the node's taint): "" when it is placed there, else what went wrong."""
    tag = secrets.token_hex(4)
    try:
        async with Client(mesh.nats_url, timeout=10.0) as client:
            # Tainted for the probe alone: forged work waiting in the queue cannot take the node first.
            await client.register_node(f"probe-{tag}", {"CPU": 2}, labels={"probe": tag}, taints={f"probe-{tag}": tag})
            probe = ScheduleRequest(
                f"probe-{tag}", {"CPU": 1}, label_selector={"probe": tag}, tolerations={f"probe-{tag}": tag}
            )
            await client.submit(probe)
            placed = await client.wait_placed(f"probe-{tag}", timeout=20.0)
    except (CorralError, TimeoutError) as error:
        return f"a new actor is not placed: {type(error).__name__}: {error}"
    return "" if placed.node_id == f"probe-{tag}" else f"the new actor went to {placed.node_id}, not probe-{tag}"


async def differs_from_replay(bus: Bus, service: str, processes: int, timeout: float = 20.0) -> str:
    """ "" when `processes` processes of `service` (every decision worker answers one subject) have folded the log's
    end and each one's digest equals a replay of the log at its sequence; else what went wrong."""
    last = await bus.last_sequence()
    deadline = time.monotonic() + timeout
    replies = await live_digests(bus, service, processes)
    while (len(replies) < processes or any(r.sequence < last for r in replies)) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        replies = await live_digests(bus, service, processes)
    if len(replies) < processes or any(r.sequence < last for r in replies):
        return f"{service}: {len(replies)} of {processes} processes answered at the log's end ({last})"
    for reply in replies:
        events = await bus.read_to(reply.sequence)
        if reply.digest != digest(replay(events)):
            return f"{service}: a live digest at {reply.sequence} differs from a replay of the log"
    return ""
